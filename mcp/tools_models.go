package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/identity"
)

type aliasesArgs struct {
	Project string `json:"project,omitempty" jsonschema:"the aliases you may call for this project (else for any of yours)"`
}

type aliasView struct {
	Name        string `json:"name" jsonschema:"what to pass as alias to call_model"`
	Description string `json:"description,omitempty"`
}

type aliasesView struct {
	Aliases []aliasView `json:"aliases"`
}

type chatMessage struct {
	Role    string `json:"role" jsonschema:"system, user or assistant"`
	Content string `json:"content"`
}

type callModelArgs struct {
	Alias       string        `json:"alias" jsonschema:"the model alias to call, such as chat: list_model_aliases lists yours"`
	Project     string        `json:"project,omitempty" jsonschema:"the project the call is for and charged to (needed unless the credential is scoped to one project)"`
	Prompt      string        `json:"prompt,omitempty" jsonschema:"a single user message (or give messages)"`
	System      string        `json:"system,omitempty" jsonschema:"a system message to put before the prompt"`
	Messages    []chatMessage `json:"messages,omitempty" jsonschema:"the conversation, oldest first (instead of prompt)"`
	MaxTokens   int           `json:"maxTokens,omitempty" jsonschema:"the most tokens to generate"`
	Temperature *float64      `json:"temperature,omitempty" jsonschema:"sampling temperature, as the model accepts it (most take 0 to 2)"`
}

type modelAnswer struct {
	Alias        string `json:"alias"`
	Project      string `json:"project,omitempty"`
	Model        string `json:"model,omitempty" jsonschema:"the model that answered"`
	Content      string `json:"content" jsonschema:"the answer"`
	FinishReason string `json:"finishReason,omitempty"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
}

// refusedError is a refusal that did not come from the platform service
// (the gateway's answer), with a message meant for people.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func (s *Server) addModelTools() {
	addTool(s, toolDef{name: "list_model_aliases", title: "List model aliases",
		description: "The model aliases of the LLM gateway you may call (such as chat or embed), for a project or for any of yours."}, s.modelAliases)
	if s.o.Models == nil {
		return
	}
	addTool(s, toolDef{name: "call_model", title: "Call a model", writes: true, openWorld: true,
		description: "Call a model alias through the LLM gateway as a chat completion, under your identity and for a project: " +
			"the gateway's guardrails, token budgets and rate limits apply, and the call is metered on the ledger like any other."}, s.callModel)
}

// addTools registers every tool.
func (s *Server) addTools() {
	s.addEstateTools()
	s.addTreeTools()
	s.addTaskTools()
	s.addQueueTools()
	s.addModelTools()
	s.addAppTools()
	s.addPipelineTools()
	s.addStudyTools()
	s.addScheduleTools()
}

func (s *Server) modelAliases(ctx context.Context, in *aliasesArgs) (*aliasesView, string, error) {
	aliases, err := s.svc.LLM.ModelAliases(ctx, strings.TrimSpace(in.Project))
	if err != nil {
		return nil, "", err
	}
	out := &aliasesView{Aliases: []aliasView{}}
	for _, a := range aliases {
		out.Aliases = append(out.Aliases, aliasView{Name: a.Name, Description: a.Description})
	}
	return out, fmt.Sprintf("listed %d model aliases", len(out.Aliases)), nil
}

// chatRoles are the roles a message may have.
var chatRoles = map[string]bool{"system": true, "user": true, "assistant": true}

func (s *Server) callModel(ctx context.Context, in *callModelArgs) (*modelAnswer, string, error) {
	p, _ := identity.PrincipalFrom(ctx)
	if err := need(in.Alias, "alias", "the model alias to call, as list_model_aliases lists them"); err != nil {
		return nil, "", err
	}
	if strings.TrimSpace(in.Project) == "" && (p == nil || p.ProjectID == "") {
		return nil, "", badArg("argument 'project' is missing: give the project the call is for (it is charged to it)")
	}
	var msgs []chatMessage
	switch {
	case in.Prompt != "" && len(in.Messages) > 0:
		return nil, "", badArg("give prompt or messages, not both")
	case in.Prompt != "":
		if in.System != "" {
			msgs = append(msgs, chatMessage{Role: "system", Content: in.System})
		}
		msgs = append(msgs, chatMessage{Role: "user", Content: in.Prompt})
	case len(in.Messages) > 0:
		if in.System != "" {
			return nil, "", badArg("with messages, put the system message first in messages instead of system")
		}
		for i, m := range in.Messages {
			if !chatRoles[m.Role] {
				return nil, "", badArg("message %d has role %q: use system, user or assistant", i+1, m.Role)
			}
			if strings.TrimSpace(m.Content) == "" {
				return nil, "", badArg("message %d is empty", i+1)
			}
		}
		msgs = in.Messages
	default:
		return nil, "", badArg("say what to ask: give prompt (one message) or messages")
	}
	// The gateway's rule for max_tokens, checked here too so that a bad
	// argument is an argument error of the tool; temperature goes to the
	// model's server as given, as through /v1.
	if err := wire.CheckMaxTokens("argument 'maxTokens'", int64(in.MaxTokens)); err != nil {
		return nil, "", badArg("%v", err)
	}
	req := map[string]any{"model": strings.TrimSpace(in.Alias), "messages": msgs, "stream": false}
	if in.MaxTokens > 0 {
		req["max_tokens"] = in.MaxTokens
	}
	if in.Temperature != nil {
		req["temperature"] = *in.Temperature
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, "", fmt.Errorf("mcp: encode a chat request: %w", err)
	}
	status, raw, err := s.o.Models.ChatCompletion(ctx, credentialFrom(ctx), strings.TrimSpace(in.Project), body)
	if err != nil {
		return nil, "", err
	}
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, "", fmt.Errorf("mcp: the gateway answered %d with something other than JSON: %w", status, err)
	}
	if status != http.StatusOK {
		msg := fmt.Sprintf("the gateway refused the call (HTTP %d)", status)
		if resp.Error != nil && resp.Error.Message != "" {
			msg = resp.Error.Message
		}
		return nil, "", &refusedError{msg: msg}
	}
	if len(resp.Choices) == 0 {
		return nil, "", errors.New("mcp: the gateway answered without a choice")
	}
	out := &modelAnswer{Alias: strings.TrimSpace(in.Alias), Project: strings.TrimSpace(in.Project), Model: resp.Model,
		FinishReason: resp.Choices[0].FinishReason, InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	if c := resp.Choices[0].Message.Content; c != nil {
		out.Content = *c
	}
	project := out.Project
	if project == "" {
		project = "of the credential"
	}
	return out, fmt.Sprintf("called alias %s for project %s: %d input and %d output tokens", quote(out.Alias), project,
		out.InputTokens, out.OutputTokens), nil
}
