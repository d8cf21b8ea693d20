package worker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

func TestSplitLine(t *testing.T) {
	t.Parallel()
	r := newRedactor(map[string]string{"A": "hunter22", "B": "x", "KEY": "-----BEGIN-----\nMIIEabcdef\n-----END-----"})
	for name, c := range map[string]struct {
		in   string
		want []string
	}{
		"a short line is kept":                   {"hello", []string{"hello"}},
		"a secret's value is redacted":           {"pw=hunter22!", []string{"pw=" + Redacted + "!"}},
		"a value shorter than 4 bytes is left":   {"x marks", []string{"x marks"}},
		"a line of a multi-line secret is found": {"key MIIEabcdef", []string{"key " + Redacted}},
		"invalid UTF-8 is replaced":              {"a\xffb", []string{"a\uFFFDb"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := splitLine(c.in, r); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("splitLine(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	t.Run("a line longer than the protocol allows is cut into pieces that say so", func(t *testing.T) {
		long := strings.Repeat("é", agentapi.MaxLogLineBytes) // 2 bytes each
		got := splitLine(long, nil)
		if len(got) < 2 {
			t.Fatalf("%d pieces", len(got))
		}
		var joined string
		for i, p := range got {
			if len(p) > agentapi.MaxLogLineBytes {
				t.Fatalf("piece %d has %d bytes", i, len(p))
			}
			if i < len(got)-1 {
				if !strings.HasSuffix(p, continued) {
					t.Fatalf("piece %d does not say the line continues", i)
				}
				p = strings.TrimSuffix(p, continued)
			}
			if !strings.HasPrefix(p, "é") || strings.ContainsRune(p, '\uFFFD') {
				t.Fatalf("piece %d was cut inside a character", i)
			}
			joined += p
		}
		if joined != long {
			t.Fatal("the pieces do not add up to the line")
		}
	})
}

func TestLogStream(t *testing.T) {
	t.Parallel()

	// A sink that fails while down is set; refused is closed when it
	// first fails.
	type sink struct {
		mu      sync.Mutex
		down    bool
		got     []string
		refused chan struct{}
	}
	newStream := func(t *testing.T, s *sink, memory int) *logStream {
		return newLogStream(filepath.Join(t.TempDir(), "spool.jsonl"),
			logLimits{BatchLines: 7, BatchBytes: 1 << 20, FlushInterval: 10 * time.Millisecond, MemoryLines: memory},
			client.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
			func(_ context.Context, lines []agentapi.LogLine) (*agentapi.LogsResponse, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.down {
					if s.refused != nil {
						close(s.refused)
						s.refused = nil
					}
					return nil, &client.NetError{Op: "POST logs", Err: errors.New("connection refused")}
				}
				for _, l := range lines {
					s.got = append(s.got, l.Line)
				}
				return &agentapi.LogsResponse{Accepted: len(lines)}, nil
			})
	}
	add := func(ls *logStream, from, to int) {
		for i := from; i < to; i++ {
			ls.Add(agentapi.LogLine{At: time.Now(), Stream: "stdout", Line: fmt.Sprint(i)})
		}
	}

	t.Run("lines spilled while the server is down are sent in order once it is back", func(t *testing.T) {
		refused := make(chan struct{})
		s := &sink{down: true, refused: refused}
		ls := newStream(t, s, 5)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { ls.run(ctx); close(done) }()
		add(ls, 0, 40)
		select { // a batch is in flight, failing, when more lines come
		case <-refused:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream never tried to send")
		}
		add(ls, 40, 100)
		ls.mu.Lock()
		spooled := ls.spool != nil && ls.spool.lines > 0
		ls.mu.Unlock()
		if !spooled {
			t.Fatal("nothing spilled to disk while the server was down")
		}
		s.mu.Lock()
		s.down = false
		s.mu.Unlock()
		add(ls, 100, 120)
		if err := ls.close(context.Background()); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
		if len(s.got) != 120 {
			t.Fatalf("%d lines arrived, want 120", len(s.got))
		}
		for i, l := range s.got {
			if l != fmt.Sprint(i) {
				t.Fatalf("line %d is %s", i, l)
			}
		}
	})

	t.Run("a batch whose answer was lost is sent again with the same line numbers", func(t *testing.T) {
		var mu sync.Mutex
		var sent [][]int64
		lost := true
		ls := newLogStream(filepath.Join(t.TempDir(), "s.jsonl"),
			logLimits{BatchLines: 4, BatchBytes: 1 << 20, FlushInterval: 10 * time.Millisecond, MemoryLines: 2},
			client.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
			func(_ context.Context, lines []agentapi.LogLine) (*agentapi.LogsResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				var ns []int64
				for _, l := range lines {
					ns = append(ns, l.N)
				}
				sent = append(sent, ns)
				if lost { // the server stored the batch, but its answer never came
					lost = false
					return nil, &client.NetError{Op: "POST logs", Err: errors.New("connection reset by peer")}
				}
				return &agentapi.LogsResponse{Accepted: len(lines)}, nil
			})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { ls.run(ctx); close(done) }()
		add(ls, 0, 10) // more than MemoryLines: some go through the spool
		if err := ls.close(context.Background()); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if len(sent) < 2 || fmt.Sprint(sent[0]) != fmt.Sprint(sent[1]) {
			t.Fatalf("batches sent %v: want the first sent again with the same numbers", sent)
		}
		var all []int64
		for _, b := range sent[1:] {
			all = append(all, b...)
		}
		for i, n := range all {
			if n != int64(i+1) {
				t.Fatalf("after the resend, lines carry numbers %v, want 1 to 10 in order", all)
			}
		}
		if len(all) != 10 {
			t.Fatalf("after the resend, %d lines were sent, want 10", len(all))
		}
	})

	t.Run("a 409 stops the stream and calls back once", func(t *testing.T) {
		calls := 0
		ls := newLogStream(filepath.Join(t.TempDir(), "s.jsonl"),
			logLimits{BatchLines: 10, BatchBytes: 1 << 20, FlushInterval: time.Millisecond, MemoryLines: 100}, client.Backoff{},
			func(context.Context, []agentapi.LogLine) (*agentapi.LogsResponse, error) {
				calls++
				return nil, &client.Error{Status: 409}
			})
		stale := 0
		ls.onStale = func(error) { stale++ }
		add(ls, 0, 30)
		if err := ls.flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		add(ls, 30, 40)
		_ = ls.flush(context.Background())
		if calls != 1 || stale != 1 {
			t.Fatalf("%d sends, %d stale callbacks; want 1 and 1", calls, stale)
		}
	})
}

func TestParamEnvName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"lr":             "KLIQUE_PARAM_LR",
		"learning-rate":  "KLIQUE_PARAM_LEARNING_RATE",
		"Model.Name":     "KLIQUE_PARAM_MODEL_NAME",
		"a  b":           "KLIQUE_PARAM_A_B",
		"batch_size/gpu": "KLIQUE_PARAM_BATCH_SIZE_GPU",
	} {
		if got := ParamEnvName(in); got != want {
			t.Errorf("ParamEnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("one object, an array and JSON lines are read", func(t *testing.T) {
		for _, body := range []string{
			`{"name":"loss","value":0.42,"step":10}`,
			`[{"name":"loss","value":0.42,"step":10}]`,
			"{\"name\":\"loss\",\"value\":0.42,\"step\":10}\n",
		} {
			p, err := parseMetrics([]byte(body), now)
			if err != nil || len(p) != 1 || p[0].Name != "loss" || p[0].Value != 0.42 || p[0].Step != 10 || !p[0].At.Equal(now) {
				t.Fatalf("parseMetrics(%s) = %+v, %v", body, p, err)
			}
		}
	})
	t.Run("a metric without a name or a value is refused", func(t *testing.T) {
		for _, body := range []string{`{"value":1}`, `{"name":"loss"}`, `{"name":"loss","value":"high"}`, `nonsense`} {
			if _, err := parseMetrics([]byte(body), now); err == nil {
				t.Errorf("parseMetrics(%s) accepted it", body)
			}
		}
	})
}
