// Package client talks to a Klique control plane over its GraphQL API, for
// the CLI and for tests that drive the server the way people do.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/Khan/genqlient/graphql"
)

// Client calls one control plane with one credential.
type Client struct {
	// BaseURL is the server, such as http://127.0.0.1:8080.
	BaseURL string
	// Credential is an API key or an access token.
	Credential string
	// Name goes in X-Klique-Client, so the audit trail records the channel
	// ("cli").
	Name string
	HTTP *http.Client
	// Retry is how long a creating mutation (WithIdempotencyKey) keeps trying a mutation the server could
	// not be reached for (or answered 502, 503 or 504); 0 tries once.
	Retry time.Duration
}

// New returns a client with a sensible timeout.
func New(baseURL, credential string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Credential: credential, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// Error is an error the server returned: its code (extensions.code for
// GraphQL) and its message, which says what to change.
type Error struct {
	Code string
	// Reason is extensions.reason: which refusal this is, for a client to
	// act on without reading the message (ReasonProjectRequired).
	Reason   string
	Message  string
	Problems []string
	Status   int
}

func (e *Error) Error() string {
	if len(e.Problems) > 1 {
		return e.Message + ":\n  - " + strings.Join(e.Problems, "\n  - ")
	}
	return e.Message
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code     string   `json:"code"`
			Reason   string   `json:"reason"`
			Problems []string `json:"problems"`
		} `json:"extensions"`
	} `json:"errors"`
}

// MakeRequest runs one of the CLI's generated operations (internal/cli/gql),
// so that a Client is the graphql.Client genqlient's functions take. The
// server's refusal comes back as an *Error, its code and reason read from
// the GraphQL extensions. A context made by WithIdempotencyKey makes it a
// creating mutation: see retried.
func (c *Client) MakeRequest(ctx context.Context, req *graphql.Request, resp *graphql.Response) error {
	if key, ok := ctx.Value(idempotencyKey{}).(string); ok {
		return c.retried(ctx, key, req, resp.Data)
	}
	return c.do(ctx, "", req, resp.Data)
}

// Do runs a GraphQL document written by hand and decodes its data into
// out: for tests that ask the server what no command asks. The commands
// send internal/cli/gql's typed operations instead.
func (c *Client) Do(ctx context.Context, query string, vars map[string]any, out any) error {
	return c.do(ctx, "", &graphql.Request{Query: query, Variables: vars}, out)
}

type idempotencyKey struct{}

// WithIdempotencyKey marks the operations run with ctx as a creating
// mutation with the idempotency key key (the Idempotency-Key header). Make
// one key per thing to create (per command run), before the first try.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// retried runs a creating mutation: when the server cannot be reached or
// the answer is lost, it sends the mutation again with the same key for up
// to Retry, and the server returns what the first one created instead of
// creating it twice.
func (c *Client) retried(ctx context.Context, key string, req *graphql.Request, out any) error {
	deadline := time.Now().Add(c.Retry)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := c.do(ctx, key, req, out)
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// errUnreachable marks a request that got no answer.
type errUnreachable struct{ error }

func (e errUnreachable) Unwrap() error { return e.error }

// transient reports whether trying again may succeed: no answer, or a
// gateway or unavailable status.
func transient(err error) bool {
	var u errUnreachable
	var e *Error
	return errors.As(err, &u) || (errors.As(err, &e) && (e.Status == http.StatusBadGateway ||
		e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout))
}

func (c *Client) do(ctx context.Context, idempotencyKey string, op *graphql.Request, out any) error {
	body, err := json.Marshal(op)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("server address %q: %w", c.BaseURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return errUnreachable{fmt.Errorf("cannot reach the server at %s: %w", c.BaseURL, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return errUnreachable{fmt.Errorf("read response: %w", err)}
	}
	var r gqlResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return &Error{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: fmt.Sprintf("the server answered %s with something other than GraphQL", resp.Status)}
	}
	if len(r.Errors) > 0 {
		e := r.Errors[0]
		return &Error{Status: resp.StatusCode, Code: e.Extensions.Code, Reason: e.Extensions.Reason, Message: e.Message, Problems: e.Extensions.Problems}
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return fmt.Errorf("decode response: %w", err)
		}
	}
	return nil
}

// Token exchanges the client's API key for an access token.
func (c *Client) Token(ctx context.Context) (string, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/api/v1/auth/token", nil)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("server address %q: %w", c.BaseURL, err)
	}
	c.authorize(req)
	resp, err := c.http().Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("cannot reach the server at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string    `json:"access_token"`
		ExpiresAt   time.Time `json:"expires_at"`
		Error       *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", time.Time{}, fmt.Errorf("the server answered %s with something unexpected", resp.Status)
	}
	if out.Error != nil {
		return "", time.Time{}, &Error{Status: resp.StatusCode, Code: out.Error.Code, Message: out.Error.Message}
	}
	return out.AccessToken, out.ExpiresAt, nil
}

func (c *Client) authorize(req *http.Request) {
	if c.Credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.Credential)
	}
	if c.Name != "" {
		req.Header.Set("X-Klique-Client", c.Name)
	}
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// ReasonProjectRequired is the reason (extensions.reason) of a refusal of
// work that names no project when the caller has no default one.
const ReasonProjectRequired = "PROJECT_REQUIRED"
