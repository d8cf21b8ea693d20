package translate

import "github.com/tidwall/gjson"

// chatChunk is what both stream translations read of a chat completions
// chunk, in one pass over its keys (gjson's Get would scan the chunk again
// for each path): its id, choices and usage, and the message of an error
// the model server sent mid-stream ("" when it sent none).
type chatChunk struct {
	id, choices, usage gjson.Result
	err                string
}

func readChatChunk(data []byte) chatChunk {
	var c chatChunk
	var errv gjson.Result
	gjson.ParseBytes(data).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			c.id = v
		case "choices":
			c.choices = v
		case "usage":
			c.usage = v
		case "error":
			errv = v
		}
		return true
	})
	if errv.Exists() {
		if c.err = errv.Get("message").Str; c.err == "" {
			c.err = errv.String()
		}
	}
	return c
}
