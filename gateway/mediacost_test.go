package gateway_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"image"
	"image/png"
	"regexp"
	"strconv"
	"testing"
)

// reserved is what a call would reserve: the amount a budget too small
// for anything names when it refuses the call ("this call may use up to
// N").
func (e *env) reserved(path, body string) int64 {
	e.t.Helper()
	r := e.post("vic", "detect", path, body)
	msg := r.json("error.message").Str
	m := regexp.MustCompile(`may use up to (\d+)`).FindStringSubmatch(msg)
	if m == nil {
		e.t.Fatalf("%s %s: %d %s, want a budget refusal naming the amount", path, body, r.status, r.body)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// wavOf is a second of 16 kHz, 16-bit mono PCM as a WAV file, in base64.
func wavOf() string {
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(36+32000))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(16000), uint32(32000), uint16(2), uint16(16)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, binary.LittleEndian, uint32(32000))
	b.Write(make([]byte, 32000))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// What an image, audio or a file adds to a call's reservation, read off
// the gateway's own refusal: an inline image's size is read from its
// header and counted by the rule of the provider the alias sends it to
// (OpenAI's share of tiles or patches of the model's most, Anthropic's
// (w×h)/750), or as the most the model bills for one (a self-hosted
// model, or an image by URL); audio by its length at 50 tokens a second;
// a file a token a byte, or 100 images' worth when only named; best_of
// as n is counted.
func TestWhatMediaAddsToAReservation(t *testing.T) {
	m := newBillingMock(t)
	e := billingGateway(t, m, 1) // no call fits: each refusal names its amount
	wide, square, small := pngOf(t, 2048, 768), pngOf(t, 1092, 1092), pngOf(t, 64, 64)
	chatWith := func(alias, part string) string {
		return `{"model":"` + alias + `","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"look"}` + part + `]}]}`
	}
	messagesWith := func(alias, block string) string {
		return `{"model":"` + alias + `","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"look"}` + block + `]}]}`
	}
	responsesWith := func(alias, part string) string {
		return `{"model":"` + alias + `","max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_text","text":"look"}` + part + `]}]}`
	}
	image := func(data, detail string) string {
		return `,{"type":"image_url","image_url":{"url":"data:image/png;base64,` + data + `","detail":"` + detail + `"}}`
	}
	for _, tc := range []struct {
		name, path string
		with       func(alias, part string) string
		alias      string
		part       string
		want       int64
	}{
		{"chat to openai: the largest image is the model's most", "chat/completions", chatWith, "gpt", image(wide, "high"), 1600},
		{"chat to openai: a small image at low detail is its base", "chat/completions", chatWith, "gpt", image(small, "low"), (1600 + 16) / 17},
		{"chat to a self-hosted model: any image is its most", "chat/completions", chatWith, "vlm", image(small, "low"), 1600},
		{"chat: an image by URL is the model's most", "chat/completions", chatWith, "gpt", `,{"type":"image_url","image_url":{"url":"https://x/y.png"}}`, 1600},
		{"chat: a second of WAV audio", "chat/completions", chatWith, "vlm", `,{"type":"input_audio","input_audio":{"data":"` + wavOf() + `","format":"wav"}}`, (32044*50 + 31999) / 32000},
		{"chat: a file of 3,000 bytes", "chat/completions", chatWith, "vlm",
			`,{"type":"file","file":{"file_data":"data:application/pdf;base64,` + base64.StdEncoding.EncodeToString(make([]byte, 3000)) + `"}}`, 3000},
		{"chat: a file by id", "chat/completions", chatWith, "gpt", `,{"type":"file","file":{"file_id":"file-1"}}`, 100 * 1600},
		{"messages to anthropic: (w×h)/750", "messages", messagesWith, "claude",
			`,{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + square + `"}}`, (1092*1092 + 749) / 750},
		{"messages translated: a self-hosted model's most", "messages", messagesWith, "vlm",
			`,{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + square + `"}}`, 1600},
		{"messages: a document by URL", "messages", messagesWith, "claude", `,{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}`, 100 * 1600},
		{"responses to openai: the largest image", "responses", responsesWith, "gpt",
			`,{"type":"input_image","image_url":"data:image/png;base64,` + wide + `"}`, 1600},
		{"responses translated: a self-hosted model's most", "responses", responsesWith, "vlm", `,{"type":"input_image","image_url":"https://x/y.png"}`, 1600},
	} {
		base := e.reserved(tc.path, tc.with(tc.alias, ""))
		if got := e.reserved(tc.path, tc.with(tc.alias, tc.part)) - base; got != tc.want {
			t.Errorf("%s: adds %d to the reservation, want %d", tc.name, got, tc.want)
		}
	}
	// best_of candidates are each reserved, as n is.
	one := e.reserved("completions", `{"model":"vlm","prompt":"x","max_tokens":100}`)
	if got := e.reserved("completions", `{"model":"vlm","prompt":"x","max_tokens":100,"best_of":3}`) - one; got != 200 {
		t.Errorf("best_of 3 adds %d to the reservation, want 200", got)
	}
}
