package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/klique-ai/klique/internal/model"
)

// A plain member key works with an OpenAI SDK that sends no project
// header: the call is for the caller's groups' only project, or, with
// several, for the default project they set; without one the refusal says
// how to set it.
func TestAPlainKeyNeedsNoProjectHeaderWhenTheProjectIsClear(t *testing.T) {
	e := newEnv(t, standard)
	ctx := context.Background()
	ask := func(user string) (openai.ChatCompletionResponse, error) {
		return e.client(user, "").CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "chat", MaxCompletionTokens: 20,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}}})
	}

	// Alice's group, ml, has one project: fraud (shared is open to all).
	if _, err := ask("alice"); err != nil {
		t.Fatalf("alice, with one project and no header: %v", err)
	}
	if c := e.ledger(1)[0]; c.UserName != "alice" || c.ProjectName != "fraud" {
		t.Fatalf("alice's call on the ledger: %s", dump(c))
	}

	// Vic joins ml: fraud and detect are both his now.
	if _, err := e.svc.SetGroupMember(e.admin, "ml", "vic", model.GroupRoleMember); err != nil {
		t.Fatal(err)
	}
	_, err := ask("vic")
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, "klique project use NAME") {
		t.Fatalf("vic, with two projects and no header: %v", err)
	}

	vic := e.signIn(e.keys["vic"])
	if _, err := e.svc.SetDefaultProject(vic, "detect"); err != nil {
		t.Fatal(err)
	}
	if _, err := ask("vic"); err != nil {
		t.Fatalf("vic, after setting his default project: %v", err)
	}
	if c := e.ledger(2)[1]; c.UserName != "vic" || c.ProjectName != "detect" {
		t.Fatalf("vic's call on the ledger: %s", dump(c))
	}
	// A header still wins over the default.
	if _, err := e.client("vic", "fraud").CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "chat", MaxCompletionTokens: 20,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	if c := e.ledger(3)[2]; c.ProjectName != "fraud" {
		t.Fatalf("vic's call with a header on the ledger: %s", dump(c))
	}
}
