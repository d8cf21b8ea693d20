package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// client is the official-style OpenAI client pointed at the gateway:
// only the base URL and the key change; the project rides in a header, as
// an SDK's default headers carry it.
func (e *env) client(user, project string) *openai.Client {
	cfg := openai.DefaultConfig(e.keys[user])
	cfg.BaseURL = e.srv.URL + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerTransport{project: project}}
	return openai.NewClientWithConfig(cfg)
}

type headerTransport struct{ project string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Klique-Project", h.project)
	return http.DefaultTransport.RoundTrip(r)
}

func TestTheGoOpenAIClientWorksUnmodified(t *testing.T) {
	e := newEnv(t, standard)
	ctx := context.Background()
	c := e.client("vic", "detect")

	resp, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "chat", MaxCompletionTokens: 20,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}}})
	if err != nil || resp.Choices[0].Message.Content != "hello from meta/llama" || resp.Usage.CompletionTokens != 3 {
		t.Fatalf("chat: %+v %v", resp, err)
	}

	e.up.set("meta/llama", behaviour{reply: "streamed to the sdk"})
	stream, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "chat", Stream: true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var usage *openai.Usage
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
	}
	stream.Close()
	if text.String() != "streamed to the sdk" || usage == nil || usage.CompletionTokens != 4 {
		t.Fatalf("stream: %q %+v", text.String(), usage)
	}

	emb, err := c.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{Model: "embed", Input: []string{"a", "b"}})
	if err != nil || len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 2 {
		t.Fatalf("embeddings: %+v %v", emb, err)
	}

	models, err := c.ListModels(ctx)
	if err != nil || len(models.Models) != 2 || models.Models[0].ID != "chat" || models.Models[1].ID != "embed" {
		t.Fatalf("models: %+v %v", models, err)
	}

	// Refusals come back as the SDK's typed errors.
	_, err = c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "ml-only",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "x"}}})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 403 || apiErr.Code != "model_not_allowed" {
		t.Fatalf("refusal: %v", err)
	}
	if calls := e.ledger(3); calls[2].Endpoint != "embeddings" {
		t.Fatalf("ledger %s", dump(calls))
	}
}
