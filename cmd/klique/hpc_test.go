package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/cli"
)

func runHPCSubmitter(t *testing.T, server string, args ...string) error {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli.CLI{In: strings.NewReader(""), Out: &out, Err: &errOut, Server: server}
	cmd := newHPCSubmitterCmd(c)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cmd.ExecuteContext(ctx)
}

func TestHPCSubmitterCommand(t *testing.T) {
	t.Setenv("KLIQUE_SERVER", "")
	t.Setenv("KLIQUE_WORKER_TOKEN", "")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := write("worker.token", "kqw_test\n")
	users := write("users.yaml", "default: root\n")
	badUsers := write("bad.yaml", "users: [alice]\n")
	config := write("hpc.yaml", "scheduler: lsf\nuserMap: "+users+"\nparameters: {queue: gpu}\n")
	var mu sync.Mutex
	var got agentapi.RegisterRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != agentapi.PathRegister || r.Header.Get("Authorization") != "Bearer kqw_test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		_ = json.NewDecoder(r.Body).Decode(&got)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(agentapi.RegisterResponse{WorkerID: "w1", Pool: "hpc", HeartbeatSeconds: 10})
	}))
	defer srv.Close()
	work := t.TempDir()
	base := []string{"--token-file", token, "--user-map", users, "--gpus", "4", "--work-dir", work}

	for name, c := range map[string]struct {
		server string
		args   []string
		usage  bool
		want   string
	}{
		"without a server it says how to give one":     {"", base, true, "--server URL"},
		"without a credential it says how to give one": {srv.URL, []string{"--user-map", users, "--gpus", "4"}, true, "--token-file"},
		"without a user map it says why one is needed": {srv.URL, []string{"--token-file", token, "--gpus", "4"}, true,
			"--user-map FILE is required: it maps platform users to the Linux accounts"},
		"an unknown scheduler is refused":      {srv.URL, append([]string{"--scheduler", "sge"}, base...), true, `--scheduler "sge": use slurm, pbs or lsf`},
		"a share of the cluster must be given": {srv.URL, []string{"--token-file", token, "--user-map", users}, true, "--gpus N"},
		"a user map that does not parse is refused at start": {srv.URL, []string{"--token-file", token, "--user-map", badUsers, "--gpus", "4"}, true,
			"--user-map: user map " + badUsers},
		"a bad template parameter is refused": {srv.URL, append([]string{"--param", "queue"}, base...), true, "write name=value"},
		"a credential of another pool is refused": {srv.URL, append([]string{"--pool", "other", "--scheduler", "pbs"}, base...), false,
			`belongs to pool "hpc", not "other"`},
		"the configuration file gives the scheduler and the map": {srv.URL, []string{"--config", config, "--token-file", token, "--gpus", "2",
			"--work-dir", work, "--pool", "other"}, false, `belongs to pool "hpc", not "other"`},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			got = agentapi.RegisterRequest{}
			mu.Unlock()
			err := runHPCSubmitter(t, c.server, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			var ue cli.UsageError
			if errors.As(err, &ue) != c.usage {
				t.Fatalf("usage error: %v, want %v (%v)", !c.usage, c.usage, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !c.usage && (got.Mode != agentapi.ModeBatch || (got.Kind != "pbs" && got.Kind != "lsf") || got.Labels["scheduler"] != got.Kind) {
				t.Fatalf("registered as %+v, want mode batch and the scheduler's kind", got)
			}
		})
	}
}
