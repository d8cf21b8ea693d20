package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// transferTimeout bounds one attempt of an artifact's upload or an
// input's download: long enough for the largest stored artifact on a slow
// link.
const transferTimeout = 30 * time.Minute

// artifactPath is PathTasks+"{id}/artifacts/{name}", each segment of the
// name escaped and its '/' kept.
func artifactPath(taskID, what, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return taskPath(taskID, what) + "/" + strings.Join(segs, "/")
}

// PutArtifact uploads the file at path as the attempt's artifact name,
// with its SHA-256 for the server to check. A transient failure sends the
// file again from its start.
func (c *Client) PutArtifact(ctx context.Context, taskID string, attempt int, name, path, contentType string) (*agentapi.ArtifactResponse, error) {
	sum, size, err := fileSHA256(path)
	if err != nil {
		return nil, err
	}
	p := artifactPath(taskID, agentapi.PathArtifacts, name) + "?attempt=" + strconv.Itoa(attempt)
	var out agentapi.ArtifactResponse
	err = c.retry(ctx, http.MethodPut, p, func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		actx, cancel := context.WithTimeout(ctx, transferTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(actx, http.MethodPut, c.BaseURL+p, f)
		if err != nil {
			return err
		}
		req.ContentLength = size
		if contentType == "" {
			contentType = "application/octet-stream"
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(agentapi.HeaderSHA256, sum)
		resp, raw, err := c.do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode >= 300 {
			return answerError(resp, raw, http.MethodPut, p)
		}
		return json.Unmarshal(raw, &out)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Pointer registers a pointer artifact for an attempt.
func (c *Client) Pointer(ctx context.Context, taskID string, req *agentapi.PointerRequest) (*agentapi.ArtifactResponse, error) {
	var out agentapi.ArtifactResponse
	if _, err := c.call(ctx, http.MethodPost, taskPath(taskID, agentapi.PathPointers), req, &out, 0); err != nil {
		return nil, err
	}
	return &out, nil
}

// FetchInput downloads an input of a task the worker holds into dst and
// checks its SHA-256 against what the server says it is. A pointer input
// is not downloaded: its URL is returned.
func (c *Client) FetchInput(ctx context.Context, taskID string, attempt int, name, dst string) (pointer string, err error) {
	p := taskPath(taskID, agentapi.PathInputs) + "/" + url.PathEscape(name) + "?attempt=" + strconv.Itoa(attempt)
	err = c.retry(ctx, http.MethodGet, p, func() error {
		actx, cancel := context.WithTimeout(ctx, transferTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(actx, http.MethodGet, c.BaseURL+p, nil)
		if err != nil {
			return err
		}
		c.headers(req)
		resp, err := c.client().Do(req)
		if err != nil {
			return &NetError{Op: "GET " + p, Err: err}
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNoContent:
			pointer = resp.Header.Get(agentapi.HeaderPointer)
			return nil
		case resp.StatusCode >= 300:
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return answerError(resp, raw, http.MethodGet, p)
		}
		return saveVerified(resp.Body, dst, resp.Header.Get(agentapi.HeaderSHA256), p)
	})
	return pointer, err
}

// saveVerified writes body to dst (through a temporary file) and checks
// its SHA-256.
func saveVerified(body io.Reader, dst, want, op string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), body); err != nil {
		_ = tmp.Close()
		return &NetError{Op: op, Err: fmt.Errorf("read the input: %w", err)}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		return &NetError{Op: op, Err: fmt.Errorf("the input arrived with SHA-256 %s, not the %s it was stored with", got, want)}
	}
	return os.Rename(tmp.Name(), dst)
}

// retry runs one attempt of a raw call until it succeeds, fails for good,
// or runs out of retries, as call does.
func (c *Client) retry(ctx context.Context, method, path string, attempt func() error) error {
	retries := c.Retries
	if retries == 0 {
		retries = 4
	}
	for n := 0; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx))
		}
		if !IsTransient(err) || n >= retries {
			return err
		}
		if !Sleep(ctx, c.Backoff.Delay(n)) {
			return fmt.Errorf("%s %s: %w", method, path, context.Cause(ctx))
		}
	}
}

func (c *Client) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.Token)
	ua := c.UserAgent
	if ua == "" {
		ua = "klique-worker"
	}
	req.Header.Set("User-Agent", ua)
}

func (c *Client) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// do sends a request with the credential and reads a small answer.
func (c *Client) do(req *http.Request) (*http.Response, []byte, error) {
	c.headers(req)
	op := req.Method + " " + req.URL.Path
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, nil, &NetError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, &NetError{Op: op, Err: fmt.Errorf("read answer: %w", err)}
	}
	return resp, raw, nil
}

func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
