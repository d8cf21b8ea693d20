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
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/cli"
)

// runWorker runs `klique worker` with args against server and returns its
// error.
func runWorker(t *testing.T, server string, args ...string) error {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli.CLI{In: strings.NewReader(""), Out: &out, Err: &errOut, Server: server}
	cmd := newWorkerCmd(c)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cmd.ExecuteContext(ctx)
}

func TestWorkerCommand(t *testing.T) {
	t.Setenv("KLIQUE_SERVER", "")
	t.Setenv("KLIQUE_WORKER_TOKEN", "")
	// No `klique login` on this machine to take the server from.
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	token := filepath.Join(t.TempDir(), "worker.token")
	if err := os.WriteFile(token, []byte("kqw_test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != agentapi.PathRegister || r.Header.Get("Authorization") != "Bearer kqw_test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(agentapi.RegisterResponse{WorkerID: "w1", Pool: "bare-metal", HeartbeatSeconds: 10})
	}))
	defer srv.Close()
	workDir := t.TempDir()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: "x"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	badTemplate := filepath.Join(t.TempDir(), "pod-template.yaml")
	if err := os.WriteFile(badTemplate, []byte("spec:\n  containerz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]struct {
		server string
		args   []string
		usage  bool
		want   string
	}{
		"without a server it says how to give one":     {"", []string{"--token-file", token, "--gpus", "0"}, true, "--server URL"},
		"without a credential it says how to give one": {srv.URL, []string{"--gpus", "0"}, true, "--token-file"},
		"an HPC kind is the submitter's": {srv.URL, []string{"--token-file", token, "--gpus", "0", "--kind", "slurm", "--work-dir", workDir}, true,
			"--kind slurm: this worker runs on bare metal and VMs (bare_metal) or in a Kubernetes cluster (kubernetes); Slurm, PBS and LSF have `klique hpc-submitter`"},
		"a kubernetes worker needs its share of the cluster's GPUs": {srv.URL, []string{"--token-file", token, "--kind", "kubernetes", "--work-dir", workDir}, true,
			"--kind kubernetes: declare how many GPUs of the cluster this worker may hold at once with --gpus"},
		"a kubernetes worker outside a cluster needs a kubeconfig": {srv.URL, []string{"--token-file", token, "--kind", "kubernetes", "--gpus", "0-3", "--namespace", "ns", "--work-dir", workDir}, true,
			"give --kubeconfig FILE"},
		"a misspelt pod template is refused": {srv.URL, []string{"--token-file", token, "--kind", "kubernetes", "--gpus", "0-3", "--namespace", "ns", "--work-dir", workDir,
			"--kubeconfig", kubeconfig, "--pod-template", badTemplate}, true, `unknown field "containerz"`},
		"an unknown mode is refused": {srv.URL, []string{"--token-file", token, "--gpus", "0", "--mode", "vm", "--work-dir", workDir}, true, "use process or docker"},
		"bad labels are refused":     {srv.URL, []string{"--token-file", token, "--gpus", "0", "--labels", "rack", "--work-dir", workDir}, true, "key=value"},
		"a credential of another pool is refused": {srv.URL, []string{"--token-file", token, "--gpus", "0,1", "--pool", "slurm-a100", "--work-dir", workDir,
			"--labels", "rack=r1,site=dc1"}, false, `belongs to pool "bare-metal", not "slurm-a100"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := runWorker(t, c.server, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			var ue cli.UsageError
			if errors.As(err, &ue) != c.usage {
				t.Fatalf("usage error: %v, want %v (%v)", !c.usage, c.usage, err)
			}
		})
	}

	t.Run("without --server it uses the control plane klique login signed in to", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(cfg, []byte(`{"server": "`+srv.URL+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KLIQUE_CONFIG", cfg)
		err := runWorker(t, "", "--token-file", token, "--gpus", "0", "--pool", "slurm-a100", "--work-dir", workDir)
		if err == nil || !strings.Contains(err.Error(), `belongs to pool "bare-metal"`) {
			t.Fatalf("err = %v, want the registration answered by the signed-in server", err)
		}
	})
}
