package wire

import (
	"encoding/base64"
	"encoding/binary"
	"image"
	_ "image/gif" // the formats whose size an image's header gives
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strings"

	"github.com/tidwall/gjson"
	_ "golang.org/x/image/webp"
)

// A request's parts that are not text (images, audio, files) count toward
// its prompt's upper bound too, or a call of a few tokens of text and
// several large images would reserve almost nothing and be billed
// thousands (issue 39). Audio and files are counted here, by their bytes;
// an image's cost depends on the model that reads it, so the decoders keep
// what is known of each (Image) and the gateway counts it for each of the
// call's models (Image.Tokens, Call.MediaTokens).

// Image is an image part of a request: its size when the request carries
// it (a data: URL or base64 source, whose header says its width and
// height), and whether it asks for OpenAI's low detail.
type Image struct {
	// Width and Height are 0 when the size is not known: an image given by
	// URL or file id, or one whose header could not be read.
	Width, Height int
	// Low is detail "low": OpenAI's tile-billed models read the image at
	// 512×512 and bill their base cost only.
	Low bool
}

// Billing is how a model's upstream bills an image whose size is known.
type Billing int

const (
	// BillsPerImage is a server whose vision encoder the gateway does not
	// know (a self-hosted model behind an OpenAI-compatible API): every
	// image counts as the most the model bills for one.
	BillsPerImage Billing = iota
	// BillsOpenAI is OpenAI's API: by 512-pixel tiles (GPT-4o, GPT-4.1,
	// GPT-5, o-series) or by 32-pixel patches (the mini and nano models).
	BillsOpenAI
	// BillsAnthropic is Anthropic's API: (width × height) / 750, after
	// the image is scaled to fit its limits.
	BillsAnthropic
)

// Rates and limits of the media counts (docs/gateway.md states them).
const (
	// AudioTokensPerSecond bounds what a second of audio costs: Whisper's
	// encoder frame rate (50 a second), above what OpenAI (about 10),
	// Gemini (32) and Qwen2-Audio (25) bill.
	AudioTokensPerSecond = 50
	// AudioMinBytesPerSecond is the lowest bit rate an audio clip is taken
	// to have when its header does not say (compressed audio: MP3, Opus):
	// 6.4 kbit/s, below any speech codec's usual rate, so that a clip's
	// bytes bound its length from above.
	AudioMinBytesPerSecond = 800
	// FilePages is how many pages a file the request only names (a file id
	// or URL, whose bytes the gateway never sees) counts as: providers read
	// a PDF of up to 100 pages, each page as an image.
	FilePages = 100
)

// Media counts of OpenAI's and Anthropic's image rules.
const (
	// openAITiles is the most 512-pixel tiles an image costs at high
	// detail (2 × 4, once scaled to 2048 × 768), and openAIPatches the
	// most 32-pixel patches: the largest image costs the model's most.
	openAITiles   = 8
	openAIPatches = 1536
	// anthropicLongEdge and anthropicMost are Anthropic's limits: an image
	// is scaled down until its long edge is at most 1,568 pixels and it
	// costs at most about 1,600 tokens.
	anthropicLongEdge = 1568
	anthropicMost     = 1600
	anthropicPixels   = 750
)

// Tokens bounds what the image costs a model that bills images as b, and
// whose most for one image is most. An image of unknown size costs most.
// OpenAI's models differ in what a tile or a patch costs, but each bills
// its largest image most and a smaller one its share of tiles (a base of
// half a tile, then a tile each) or of patches: the share that is larger
// is counted, so that both kinds of model are bounded.
func (im Image) Tokens(b Billing, most int64) int64 {
	if im.Width <= 0 || im.Height <= 0 || b == BillsPerImage {
		return most
	}
	w, h := float64(im.Width), float64(im.Height)
	var n int64
	switch b {
	case BillsAnthropic:
		if long := max(w, h); long > anthropicLongEdge {
			w, h = w*anthropicLongEdge/long, h*anthropicLongEdge/long
		}
		n = min(ceilDiv(int64(w+0.5)*int64(h+0.5), anthropicPixels), anthropicMost)
	case BillsOpenAI:
		// Tiles, in halves of a tile's cost: the base (one half) and two
		// a tile, 2 × 8 + 1 at most; low detail is the base only.
		halves := int64(1)
		if !im.Low {
			tw, th := w, h
			if long := max(tw, th); long > 2048 {
				tw, th = tw*2048/long, th*2048/long
			}
			if short := min(tw, th); short > 768 {
				tw, th = tw*768/short, th*768/short
			}
			halves = 1 + 2*ceilDiv(int64(tw+0.5), 512)*ceilDiv(int64(th+0.5), 512)
		}
		patches := min(ceilDiv(int64(im.Width), 32)*ceilDiv(int64(im.Height), 32), openAIPatches)
		// The larger share of the most: halves/(2·8+1) or patches/1536.
		if halves*openAIPatches >= patches*(2*openAITiles+1) {
			n = ceilDiv(most*halves, 2*openAITiles+1)
		} else {
			n = ceilDiv(most*patches, openAIPatches)
		}
	}
	return min(n, most)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// MediaTokens bounds what the call's images and the files it only names
// cost a model that bills images as b, with most the most it bills for
// one image: what Call.InputTokens does not count already.
func (c *Call) MediaTokens(b Billing, most int64) int64 {
	n := c.UnsizedFiles * FilePages * most
	for _, im := range c.Images {
		n += im.Tokens(b, most)
	}
	return n
}

// dataURL splits a data: URL into its media type and its payload, decoded
// when it is base64 (a reader, so that only what is read is decoded), and
// says how many bytes the payload holds at most.
func dataURL(u string) (mediaType string, payload io.Reader, size int64, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, 0, false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", nil, 0, false
	}
	mediaType, _, _ = strings.Cut(meta, ";")
	if strings.HasSuffix(meta, ";base64") {
		return mediaType, base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)), int64(base64.StdEncoding.DecodedLen(len(data))), true
	}
	return mediaType, strings.NewReader(data), int64(len(data)), true
}

// imageOf reads an image given as a URL (an http(s) URL or a data: URL)
// or as base64 data: its size from its header when it is carried inline.
// Only the header is decoded.
func imageOf(url, base64Data string, low bool) Image {
	im := Image{Low: low}
	var r io.Reader
	switch {
	case base64Data != "":
		r = base64.NewDecoder(base64.StdEncoding, strings.NewReader(base64Data))
	default:
		_, payload, _, ok := dataURL(url)
		if !ok {
			return im
		}
		r = payload
	}
	if cfg, _, err := image.DecodeConfig(r); err == nil {
		im.Width, im.Height = cfg.Width, cfg.Height
	}
	return im
}

// addImage counts an image part.
func (c *Call) addImage(url, base64Data, detail string) {
	c.Images = append(c.Images, imageOf(url, base64Data, detail == "low"))
}

// addAudio counts an audio clip given as base64 data: by its length when
// its header says it (a WAV file's sample rate, channels and sample size),
// else by its bytes at the lowest bit rate (AudioMinBytesPerSecond), at
// AudioTokensPerSecond.
func (c *Call) addAudio(base64Data string) {
	size := int64(base64.StdEncoding.DecodedLen(len(base64Data)))
	rate := int64(AudioMinBytesPerSecond)
	var head [36]byte
	if _, err := io.ReadFull(base64.NewDecoder(base64.StdEncoding, strings.NewReader(base64Data)), head[:]); err == nil &&
		string(head[0:4]) == "RIFF" && string(head[8:16]) == "WAVEfmt " {
		channels := int64(binary.LittleEndian.Uint16(head[22:24]))
		sampleRate := int64(binary.LittleEndian.Uint32(head[24:28]))
		bits := int64(binary.LittleEndian.Uint16(head[34:36]))
		// What a decoder plays the samples at; never taken to be below
		// the lowest rate, which would count a clip as longer than its
		// bytes can hold at any rate. A header past any real format is
		// not believed.
		if channels <= 256 && bits <= 64 {
			rate = max(channels*sampleRate*bits/8, rate)
		}
	}
	c.InputTokens += ceilDiv(size*AudioTokensPerSecond, rate)
}

// addFile counts a file the request carries (base64 data or a data: URL)
// by its bytes, a token a byte; one it only names (a file id or an http
// URL: data is empty) as FilePages pages of images (Call.MediaTokens).
func (c *Call) addFile(data string) {
	switch {
	case data == "" || strings.HasPrefix(data, "http://") || strings.HasPrefix(data, "https://"):
		c.UnsizedFiles++
	case strings.HasPrefix(data, "data:"):
		if _, _, size, ok := dataURL(data); ok {
			c.InputTokens += size
		} else {
			c.InputTokens += int64(len(data))
		}
	default:
		c.InputTokens += int64(base64.StdEncoding.DecodedLen(len(data)))
	}
}

// addChatPart counts a chat message's content part that is not text: an
// image_url (a URL or a data: URL, with its detail), an input_audio clip,
// a file (its file_data, or its file_id); any other by its raw size.
func (c *Call) addChatPart(part gjson.Result) {
	switch part.Get("type").Str {
	case "image_url":
		img := part.Get("image_url")
		url := img.Str
		if img.IsObject() {
			url = img.Get("url").Str
		}
		c.addImage(url, "", img.Get("detail").Str)
	case "input_audio":
		c.addAudio(part.Get("input_audio.data").Str)
	case "file":
		c.addFile(part.Get("file.file_data").Str)
	default:
		c.InputTokens += int64(len(part.Raw))
	}
}

// addResponsesMedia counts a Responses content part that is not text: an
// input_image (by URL, data: URL or file id, with its detail), an
// input_file (its file_data, or its file_id or file_url), an input_audio
// clip. It reports whether the part was one of these.
func (c *Call) addResponsesMedia(part gjson.Result) bool {
	switch part.Get("type").Str {
	case "input_image":
		c.addImage(part.Get("image_url").Str, "", part.Get("detail").Str)
	case "input_file":
		c.addFile(part.Get("file_data").Str)
	case "input_audio":
		c.addAudio(part.Get("input_audio.data").Str)
	default:
		return false
	}
	return true
}

// addMessagesMedia counts a Messages block that is an image (its source
// base64 data, or a URL or file id) or a document (a PDF's base64 data,
// a plain text source's text, or a URL or file id). It reports whether
// the block was one of these.
func (c *Call) addMessagesMedia(b gjson.Result) bool {
	src := b.Get("source")
	switch b.Get("type").Str {
	case "image":
		if src.Get("type").Str == "base64" {
			c.addImage("", src.Get("data").Str, "")
		} else {
			c.addImage(src.Get("url").Str, "", "")
		}
	case "document":
		switch src.Get("type").Str {
		case "base64":
			c.addFile(src.Get("data").Str)
		case "text":
			c.InputTokens += int64(len(src.Get("data").Str))
		case "content":
			c.InputTokens += int64(len(src.Raw))
		default: // a URL or a file id
			c.UnsizedFiles++
		}
	default:
		return false
	}
	return true
}
