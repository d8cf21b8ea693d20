// Package client is the worker side of the agent protocol
// (internal/agentapi): a small HTTP client that registers a worker, long-polls
// for work, heartbeats, streams logs and metrics, fetches a task's secrets and
// reports its end.
//
// Every call sends the worker credential as a bearer token, bounds each
// attempt with a timeout, and retries transient failures (connection refused
// or reset, timeouts, 5xx, 429) with exponential backoff and jitter, so a
// worker rides out a control-plane restart. Refusals are typed: a report for
// an attempt the server has moved past matches ErrStaleAttempt (HTTP 409), a
// refused credential matches ErrUnauthorized (HTTP 401).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// Client talks to one control plane with one worker credential. Its fields
// may be set before the first call and not after.
type Client struct {
	// BaseURL is the control plane, such as https://klique.corp.
	BaseURL string
	// Token is the worker credential (kqw_…).
	Token string
	// HTTP sends the requests (default: a client with no overall timeout;
	// each attempt is bounded by Timeout instead).
	HTTP *http.Client
	// Timeout bounds one attempt of a call other than a claim (default
	// 30 s). A claim may take its long-poll wait plus Timeout.
	Timeout time.Duration
	// Retries is how many times a transient failure is retried within one
	// call (default 4; negative: never). Callers that must not give up,
	// such as the report of a task's end, loop around the call.
	Retries int
	// Backoff spaces the retries.
	Backoff Backoff
	// UserAgent names the caller (default "klique-worker").
	UserAgent string
	// Log receives a line for each retried failure (default: discarded).
	Log *slog.Logger
}

// New returns a client for the control plane at baseURL.
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token}
}

// Register announces the worker and returns who it is.
func (c *Client) Register(ctx context.Context, req *agentapi.RegisterRequest) (*agentapi.RegisterResponse, error) {
	var out agentapi.RegisterResponse
	if _, err := c.call(ctx, http.MethodPost, agentapi.PathRegister, req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Claim long-polls for a task the worker can run now. It returns nil, nil
// when none came within the wait (HTTP 204).
func (c *Client) Claim(ctx context.Context, req *agentapi.ClaimRequest) (*agentapi.Assignment, error) {
	var out agentapi.ClaimResponse
	wait := time.Duration(req.WaitSeconds) * time.Second
	status, err := c.call(ctx, http.MethodPost, agentapi.PathClaim, req, &out, wait)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return out.Task, nil
}

// Heartbeat extends the leases of the worker's tasks and returns what the
// worker must do.
func (c *Client) Heartbeat(ctx context.Context, req *agentapi.HeartbeatRequest) (*agentapi.HeartbeatResponse, error) {
	var out agentapi.HeartbeatResponse
	if _, err := c.call(ctx, http.MethodPost, agentapi.PathHeartbeat, req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Logs sends a batch of a task's log lines, in order.
func (c *Client) Logs(ctx context.Context, taskID string, req *agentapi.LogsRequest) (*agentapi.LogsResponse, error) {
	var out agentapi.LogsResponse
	if _, err := c.call(ctx, http.MethodPost, taskPath(taskID, "logs"), req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// Metrics sends a batch of a task's metric points.
func (c *Client) Metrics(ctx context.Context, taskID string, req *agentapi.MetricsRequest) error {
	_, err := c.call(ctx, http.MethodPost, taskPath(taskID, "metrics"), req, nil, 0)
	return err
}

// Finish reports a task's end.
func (c *Client) Finish(ctx context.Context, taskID string, req *agentapi.FinishRequest) error {
	_, err := c.call(ctx, http.MethodPost, taskPath(taskID, "finish"), req, nil, 0)
	return err
}

// Secrets fetches the values of the secrets a task names, for one attempt.
func (c *Client) Secrets(ctx context.Context, taskID string, attempt int) (map[string]string, error) {
	var out agentapi.SecretsResponse
	p := taskPath(taskID, "secrets") + "?attempt=" + strconv.Itoa(attempt)
	if _, err := c.call(ctx, http.MethodGet, p, nil, &out, 0); err != nil {
		return nil, err
	}
	if out.Secrets == nil {
		out.Secrets = map[string]string{}
	}
	return out.Secrets, nil
}

func taskPath(taskID, what string) string {
	return agentapi.PathTasks + url.PathEscape(taskID) + "/" + what
}

// call sends one request, retrying transient failures, and decodes a 200
// answer into out. It returns the final HTTP status.
func (c *Client) call(ctx context.Context, method, path string, in, out any, wait time.Duration) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
	}
	retries := c.Retries
	if retries == 0 {
		retries = 4
	}
	for n := 0; ; n++ {
		status, err := c.once(ctx, method, path, body, out, wait)
		if err == nil {
			return status, nil
		}
		if ctx.Err() != nil {
			return status, fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx))
		}
		if !IsTransient(err) || n >= retries {
			return status, err
		}
		d := c.Backoff.Delay(n)
		if c.Log != nil {
			c.Log.Debug("retrying a call to the control plane", "path", path, "err", err, "in", d)
		}
		if !Sleep(ctx, d) {
			return status, fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx))
		}
	}
}

// errAttemptTimeout marks an attempt that ran out of time (as opposed to the
// caller giving up).
var errAttemptTimeout = errors.New("timed out")

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any, wait time.Duration) (int, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	actx, cancel := context.WithTimeoutCause(ctx, timeout+wait, errAttemptTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, c.BaseURL+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	ua := c.UserAgent
	if ua == "" {
		ua = "klique-worker"
	}
	req.Header.Set("User-Agent", ua)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if context.Cause(actx) == errAttemptTimeout && ctx.Err() == nil {
			return 0, &NetError{Op: method + " " + path, Err: errAttemptTimeout}
		}
		return 0, &NetError{Op: method + " " + path, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, &NetError{Op: method + " " + path, Err: fmt.Errorf("read answer: %w", err)}
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return resp.StatusCode, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if out != nil && len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
			}
		}
		return resp.StatusCode, nil
	default:
		return resp.StatusCode, answerError(resp, raw, method, path)
	}
}

// answerError is the typed error of a 4xx or 5xx answer.
func answerError(resp *http.Response, raw []byte, method, path string) *Error {
	e := &Error{Status: resp.StatusCode, Method: method, Path: path}
	var body agentapi.Error
	if json.Unmarshal(raw, &body) == nil && (body.Error.Code != "" || body.Error.Message != "") {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := strconv.Atoi(s); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return e
}
