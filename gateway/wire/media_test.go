package wire_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// An image of known size costs what its provider's rule says: OpenAI's
// share of tiles or of patches of the model's most (so that a tile-billed
// and a patch-billed model are both bounded), Anthropic's (w×h)/750 after
// its scaling and within its cap; a self-hosted model's, and any image of
// unknown size, the most the model bills for one.
func TestAnImageCostsWhatItsProviderBills(t *testing.T) {
	cases := []struct {
		name string
		im   wire.Image
		b    wire.Billing
		most int64
		want int64
	}{
		// GPT-4o: 85 + 170 a tile, 1,445 for its largest image.
		{"openai: a small image is one tile", wire.Image{Width: 100, Height: 100}, wire.BillsOpenAI, 1445, 85 + 170},
		{"openai: the largest image is 8 tiles", wire.Image{Width: 2048, Height: 768}, wire.BillsOpenAI, 1445, 85 + 8*170},
		{"openai: a photo is scaled to 1024×768, and its patches cost more than its tiles", wire.Image{Width: 4000, Height: 3000}, wire.BillsOpenAI, 1445, 1445},
		// 768×768 is 4 tiles (765), 1,024 of the 1,536 patches (964).
		{"openai: 1024² by patches", wire.Image{Width: 1024, Height: 1024}, wire.BillsOpenAI, 1445, 964},
		// gpt-4.1-mini: 1.62 a patch, 2,489 at most; 1024² is 1,024 patches (1,659).
		{"openai patch model: 1024²", wire.Image{Width: 1024, Height: 1024}, wire.BillsOpenAI, 2489, 1660},
		{"openai: low detail is the base", wire.Image{Width: 64, Height: 64, Low: true}, wire.BillsOpenAI, 1445, 85},
		{"openai: low detail never under the patches", wire.Image{Width: 512, Height: 512, Low: true}, wire.BillsOpenAI, 1445, 241},
		{"anthropic: (w×h)/750", wire.Image{Width: 200, Height: 200}, wire.BillsAnthropic, 4096, 54},
		{"anthropic: 1092²", wire.Image{Width: 1092, Height: 1092}, wire.BillsAnthropic, 4096, 1590},
		{"anthropic: a large image is scaled, and capped", wire.Image{Width: 3000, Height: 2000}, wire.BillsAnthropic, 4096, 1600},
		{"anthropic: within the model's most", wire.Image{Width: 1092, Height: 1092}, wire.BillsAnthropic, 1000, 1000},
		{"a self-hosted model: its most", wire.Image{Width: 10, Height: 10}, wire.BillsPerImage, 3000, 3000},
		{"unknown size: the most", wire.Image{}, wire.BillsOpenAI, 1445, 1445},
		{"unknown size at Anthropic: the most", wire.Image{}, wire.BillsAnthropic, 1600, 1600},
		{"a huge header", wire.Image{Width: 1 << 30, Height: 1 << 30}, wire.BillsOpenAI, 1445, 1445},
	}
	for _, tc := range cases {
		if got := tc.im.Tokens(tc.b, tc.most); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.name, got, tc.want)
		}
	}
}

// encoded returns an image of w×h in a format, as bytes.
func encoded(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	case "webp":
		// A lossless WebP's header: the RIFF and VP8L chunks, the
		// signature, then 14 bits each of width-1 and height-1.
		var bits [4]byte
		binary.LittleEndian.PutUint32(bits[:], uint32(w-1)|uint32(h-1)<<14)
		chunk := append([]byte{0x2f}, bits[:]...)
		chunk = append(chunk, make([]byte, 16)...)
		b.WriteString("RIFF")
		_ = binary.Write(&b, binary.LittleEndian, uint32(4+8+len(chunk)))
		b.WriteString("WEBPVP8L")
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(chunk)))
		b.Write(chunk)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURLOf(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// An inline image's size is read from its header, on every door and in
// every format providers take; an image by URL, or whose bytes are no
// image, is of unknown size.
func TestImageSizesAreReadFromTheirHeaders(t *testing.T) {
	for _, format := range []string{"png", "jpeg", "gif", "webp"} {
		data := encoded(t, format, 300, 200)
		url := dataURLOf("image/"+format, data)
		b64 := base64.StdEncoding.EncodeToString(data)
		chat := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},
			{"type":"image_url","image_url":{"url":"` + url + `","detail":"low"}},
			{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,bm90IGFuIGltYWdl"}}]}]}`
		c, err := wire.Parse(wire.Chat, []byte(chat))
		want := []wire.Image{{Width: 300, Height: 200, Low: true}, {}, {}}
		if err != nil || !slices.Equal(c.Images, want) {
			t.Fatalf("%s on the chat door: %+v %v", format, c.Images, err)
		}
		msgs := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[
			{"type":"image","source":{"type":"base64","media_type":"image/` + format + `","data":"` + b64 + `"}},
			{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"}},
			{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}]}]}]}`
		c, err = wire.ParseMessages([]byte(msgs), false)
		want = []wire.Image{{Width: 300, Height: 200}, {}, {Width: 300, Height: 200}}
		if err != nil || !slices.Equal(c.Images, want) {
			t.Fatalf("%s on the Messages door: %+v %v", format, c.Images, err)
		}
		resp := `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + url + `","detail":"high"},
			{"type":"input_image","file_id":"file-1"}]}]}`
		c, err = wire.ParseResponses([]byte(resp))
		want = []wire.Image{{Width: 300, Height: 200}, {}}
		if err != nil || !slices.Equal(c.Images, want) {
			t.Fatalf("%s on the Responses door: %+v %v", format, c.Images, err)
		}
	}
}

// wav is a WAV file's header (PCM) and its samples.
func wav(sampleRate, channels, bits, dataBytes int) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+dataBytes))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(channels), uint32(sampleRate),
		uint32(sampleRate * channels * bits / 8), uint16(channels * bits / 8), uint16(bits)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(dataBytes))
	b.Write(make([]byte, dataBytes))
	return b.Bytes()
}

// Audio counts by its length, 50 tokens a second: a WAV file's from its
// header, compressed audio's from its bytes at 800 bytes a second. A file
// counts a token a byte when the request carries it, and as 100 pages of
// images when it only names it.
func TestAudioAndFilesCountByTheirLengthAndBytes(t *testing.T) {
	clip := base64.StdEncoding.EncodeToString(wav(16000, 1, 16, 102400)) // 3.2 s: 44 + 102,400 bytes
	mp3 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 3000))
	pdf := dataURLOf("application/pdf", append([]byte("%PDF-1.7\n"), make([]byte, 2991)...))
	base := func(body string) int64 {
		t.Helper()
		c, err := wire.Parse(wire.Chat, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return c.InputTokens
	}
	chatWith := func(part string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` + part + `]}]}`
	}
	text := base(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	for _, tc := range []struct {
		name, part string
		want       int64
	}{
		{"a WAV clip, by its length", `{"type":"input_audio","input_audio":{"data":"` + clip + `","format":"wav"}}`, (102444*50 + 31999) / 32000},
		{"an MP3 clip, by its bytes", `{"type":"input_audio","input_audio":{"data":"` + mp3 + `","format":"mp3"}}`, (3000*50 + 799) / 800},
		{"a PDF as a data: URL, a token a byte", `{"type":"file","file":{"filename":"a.pdf","file_data":"` + pdf + `"}}`, 3000},
		{"a file as base64", `{"type":"file","file":{"file_data":"` + base64.StdEncoding.EncodeToString(make([]byte, 600)) + `"}}`, 600},
	} {
		if got := base(chatWith(tc.part)) - text; got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.name, got, tc.want)
		}
	}
	c, err := wire.Parse(wire.Chat, []byte(chatWith(`{"type":"file","file":{"file_id":"file-abc"}}`)))
	if err != nil || c.InputTokens != text || c.UnsizedFiles != 1 || c.MediaTokens(wire.BillsOpenAI, 1445) != 100*1445 {
		t.Fatalf("a file by id: %+v %v", c, err)
	}
	r, err := wire.ParseResponses([]byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"},
		{"type":"input_file","file_data":"` + pdf + `"}]}]}`))
	if err != nil || r.UnsizedFiles != 1 || r.InputTokens != 3000+8 {
		t.Fatalf("files on the Responses door: %+v %v", r, err)
	}
	m, err := wire.ParseMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
		{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"`+base64.StdEncoding.EncodeToString(make([]byte, 900))+`"}},
		{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}},
		{"type":"document","source":{"type":"text","media_type":"text/plain","data":"twelve bytes"}}]}]}`), false)
	if err != nil || m.UnsizedFiles != 1 || m.InputTokens != 900+12+8 {
		t.Fatalf("documents on the Messages door: %+v %v", m, err)
	}
}

// best_of candidates are each generated and billed: they count as n does.
func TestBestOfCountsAsChoices(t *testing.T) {
	c, err := wire.Parse(wire.Completions, []byte(`{"model":"m","prompt":"x","best_of":5,"n":2}`))
	if err != nil || c.Choices != 5 {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := wire.Parse(wire.Completions, []byte(`{"model":"m","prompt":"x","best_of":0}`)); err == nil || !strings.Contains(err.Error(), "best_of must be between 1 and 128") {
		t.Fatalf("best_of 0: %v", err)
	}
}

// A stream that is not a boolean, and a body that is not UTF-8 (raw, or an
// escape of half a surrogate pair), are refused by every door's decoder,
// each with a message that says what to change.
func TestEveryDoorRefusesWhatProvidersRefuse(t *testing.T) {
	doors := map[string]func(body string) error{
		"chat": func(b string) error {
			_, err := wire.Parse(wire.Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"x"}]`+b+`}`))
			return err
		},
		"completions": func(b string) error {
			_, err := wire.Parse(wire.Completions, []byte(`{"model":"m","prompt":"x"`+b+`}`))
			return err
		},
		"embeddings": func(b string) error {
			_, err := wire.Parse(wire.Embeddings, []byte(`{"model":"m","input":"x"`+b+`}`))
			return err
		},
		"messages": func(b string) error {
			_, err := wire.ParseMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]`+b+`}`), false)
			return err
		},
		"count_tokens": func(b string) error {
			_, err := wire.ParseMessages([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]`+b+`}`), true)
			return err
		},
		"responses": func(b string) error {
			_, err := wire.ParseResponses([]byte(`{"model":"m","input":"x"` + b + `}`))
			return err
		},
	}
	for name, parse := range doors {
		for _, tc := range []struct{ extra, want string }{
			{`,"stream":"yes"`, `stream must be true or false, not "yes"`},
			{`,"stream":1`, "stream must be true or false, not 1"},
			{`,"stream":{}`, "stream must be true or false"},
			{`,"user":"caf` + "\xe9" + `"`, "not valid UTF-8 (at byte"},
			{`,"user":"` + "\xed\xa0\x80" + `"`, "not valid UTF-8"},
			{`,"user":"\ud800"`, `lone surrogate \ud800`},
			{`,"user":"a\udc00"`, `lone surrogate \udc00`},
			{`,"user":"\ud800\u0041"`, `lone surrogate \ud800`},
			{`,"user":"\ud800`, "not valid JSON"},
		} {
			if err := parse(tc.extra); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with %q: %v, want %q", name, tc.extra, err, tc.want)
			}
		}
		for _, ok := range []string{`,"stream":false`, `,"stream":null`, `,"user":"\ud83d\ude00 \\ud800 \u00e9 é"`, `,"user":"\\"`} {
			if err := parse(ok); err != nil {
				t.Errorf("%s with %q: %v", name, ok, err)
			}
		}
	}
}

// The output bound goes in the field the API takes: lowered where the
// caller's is higher (or not a whole number), added where there is none,
// kept where the caller's is lower; a chat body for OpenAI's own API gets
// max_completion_tokens.
func TestBoundOutputSetsTheAPIsField(t *testing.T) {
	for _, tc := range []struct {
		ep         wire.Endpoint
		body       string
		bound      int64
		completion bool
		want       map[string]any // field → value; nil: absent
	}{
		{wire.Chat, `{"model":"m"}`, 4096, false, map[string]any{"max_tokens": int64(4096), "max_completion_tokens": nil}},
		{wire.Chat, `{"model":"m"}`, 4096, true, map[string]any{"max_completion_tokens": int64(4096), "max_tokens": nil}},
		{wire.Chat, `{"model":"m","max_tokens":100}`, 4096, true, map[string]any{"max_tokens": int64(100), "max_completion_tokens": nil}},
		{wire.Chat, `{"model":"m","max_completion_tokens":9000}`, 4096, false, map[string]any{"max_completion_tokens": int64(4096), "max_tokens": nil}},
		{wire.Chat, `{"model":"m","max_completion_tokens":90,"max_tokens":9000}`, 90, false, map[string]any{"max_completion_tokens": int64(90), "max_tokens": int64(90)}},
		{wire.Chat, `{"model":"m","max_tokens":null}`, 50, false, map[string]any{"max_tokens": int64(50)}},
		{wire.Chat, `{"model":"m","max_tokens":0}`, 50, false, map[string]any{"max_tokens": int64(50)}},
		{wire.Chat, `{"model":"m","max_tokens":10.5}`, 50, false, map[string]any{"max_tokens": int64(50)}},
		{wire.Completions, `{"model":"m","prompt":"x"}`, 16, true, map[string]any{"max_tokens": int64(16)}},
		{wire.Messages, `{"model":"m","max_tokens":64000}`, 8192, false, map[string]any{"max_tokens": int64(8192)}},
		{wire.Responses, `{"model":"m"}`, 1000, false, map[string]any{"max_output_tokens": int64(1000)}},
		{wire.Embeddings, `{"model":"m"}`, 1000, false, map[string]any{"max_tokens": nil}},
		{wire.Chat, `{"model":"m"}`, 0, false, map[string]any{"max_tokens": nil}},
	} {
		out, err := wire.BoundOutput([]byte(tc.body), tc.ep, tc.bound, tc.completion)
		if err != nil {
			t.Fatal(err)
		}
		for f, want := range tc.want {
			v := gjson.GetBytes(out, f)
			if want == nil && v.Exists() || want != nil && (v.Type != gjson.Number || v.Int() != want.(int64)) {
				t.Errorf("%s %s bounded at %d: %s = %s, want %v", tc.ep, tc.body, tc.bound, f, v.Raw, want)
			}
		}
		if gjson.GetBytes(out, "model").Str != "m" {
			t.Errorf("%s lost its model: %s", tc.body, out)
		}
	}
	// A body within its bound is the same bytes, not a copy.
	body := []byte(`{"model":"m","max_tokens":10}`)
	if out, _ := wire.BoundOutput(body, wire.Chat, 50, false); &out[0] != &body[0] {
		t.Error("a body within its bound was copied")
	}
}
