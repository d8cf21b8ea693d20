package hpc

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
)

// slurmUser is the second Linux account jobs are submitted as;
// .ci/slurm.sh creates it and exports KLIQUE_TEST_SLURM_USER.
var slurmUser = cmp.Or(os.Getenv("KLIQUE_TEST_SLURM_USER"), "alice")

// needSlurm skips without a running Slurm, or fails under CI=true.
func needSlurm(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("sbatch")
	if err == nil {
		var out []byte
		out, err = exec.Command("scontrol", "ping").CombinedOutput()
		if err == nil && !strings.Contains(string(out), "UP") {
			err = fmt.Errorf("scontrol ping: %s", out)
		}
	}
	if err == nil {
		_, err = user.Lookup(slurmUser)
	}
	if err != nil {
		msg := fmt.Sprintf("no running single-node Slurm with user %s (start it with .ci/slurm.sh): %v", slurmUser, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		msg := "the Slurm tests submit as another account and run as root (as .ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// slurmBundle is a Slurm runner whose jobs run the test binary as task-run
// and report to a fake control plane.
type slurmBundle struct {
	r     *Runner
	plane *fakePlane
	dir   string
}

func setupSlurm(t *testing.T) *slurmBundle {
	t.Helper()
	needSlurm(t)
	dir := sharedDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "klique")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	in.Close()
	out.Close()
	users, err := LoadUserMap(writeUserMap(t, dir, "users:\n  alice-platform: "+slurmUser+"\n  root-platform: root\n"))
	if err != nil {
		t.Fatal(err)
	}
	plane := newFakePlane(t)
	r, err := New(Options{Scheduler: Slurm{}, Users: users, Server: plane.URL, Klique: bin, StatusInterval: 200 * time.Millisecond,
		Gone:       20 * time.Second,
		Credential: func(_ context.Context, taskID string, _ int) (string, error) { return "kqt_for_" + taskID, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return &slurmBundle{r: r, plane: plane, dir: dir}
}

func (b *slurmBundle) submit(t *testing.T, id, owner string, milli int64, cmd ...string) (runner.Handle, *jobLog) {
	t.Helper()
	l := &jobLog{}
	a := &agentapi.Assignment{TaskID: id, Attempt: 1, Name: "test " + id, MilliGPUsPerNode: milli, Nodes: 1, Command: cmd, Owner: owner,
		Secrets: []string{"API_TOKEN"}}
	jobDir := filepath.Join(b.dir, id)
	h, err := b.r.Submit(context.Background(), &runner.Job{Task: a, Dir: jobDir, Log: l.sink,
		Env: map[string]string{"KLIQUE_TASK_ID": id, "API_TOKEN": "must-not-be-in-the-files"}})
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	return h, l
}

func TestSlurm(t *testing.T) {
	b := setupSlurm(t)

	t.Run("a job is submitted as the mapped account, runs, and reports its lines and end itself", func(t *testing.T) {
		t.Parallel()
		h, l := b.submit(t, "t-alice", "alice-platform", 1000, "sh", "-c", `echo "user=$(id -un) gpus=$CUDA_VISIBLE_DEVICES secret=$API_TOKEN"; sleep 2; echo done`)
		if !strings.Contains(l.String(), "submitted to Slurm as job") || !strings.Contains(l.String(), "by Linux account "+slurmUser) {
			t.Fatalf("no submission line in the task's log:\n%s", l)
		}
		waitPhase(t, h, runner.Running, 30*time.Second)
		st := waitPhase(t, h, runner.Ended, 60*time.Second)
		if st.ExitCode != 0 {
			t.Fatalf("exit code %d; log:\n%s\njob:\n%s", st.ExitCode, l, b.plane.log("t-alice"))
		}
		got := b.plane.log("t-alice")
		if !regexp.MustCompile(`stdout: user=alice gpus=[0-3] secret=s3cret-value`).MatchString(got) || !strings.Contains(got, "stdout: done") {
			t.Fatalf("lines sent from inside the job:\n%s\ntask log:\n%s", got, l)
		}
		if f, ok := b.plane.ended("t-alice"); !ok || f.State != agentapi.StateCompleted || f.ExitCode != 0 {
			t.Fatalf("end reported from the job: %+v %v", f, ok)
		}
		if d := h.Diagnostics(context.Background()); !d.Reported {
			t.Fatalf("diagnostics do not say the job reported its end: %+v", d)
		}
		for _, f := range []string{"job.json", "job.sh"} {
			if raw, _ := os.ReadFile(filepath.Join(b.dir, "t-alice", f)); strings.Contains(string(raw), "must-not-be-in-the-files") {
				t.Fatalf("%s holds the secret's value", f)
			}
		}
		if !strings.Contains(l.String(), "RUNNING on localhost") || !strings.Contains(l.String(), "COMPLETED") {
			t.Fatalf("the job's states are not in the task's log:\n%s", l)
		}
	})

	t.Run("a multi-GPU task gets that many GPUs from Slurm", func(t *testing.T) {
		t.Parallel()
		h, l := b.submit(t, "t-gpus", "root-platform", 2000, "sh", "-c", `echo "gpus=$CUDA_VISIBLE_DEVICES"`)
		st := waitPhase(t, h, runner.Ended, 60*time.Second)
		script, _ := os.ReadFile(filepath.Join(b.dir, "t-gpus", "job.sh"))
		if !strings.Contains(string(script), "#SBATCH --gres=gpu:2") {
			t.Fatalf("batch script:\n%s", script)
		}
		got := b.plane.log("t-gpus")
		if st.ExitCode != 0 || !strings.Contains(got, "gpus=") || strings.Count(strings.SplitN(got, "gpus=", 2)[1], ",") != 1 {
			t.Fatalf("exit %d, lines:\n%s\nlog:\n%s", st.ExitCode, got, l)
		}
	})

	t.Run("a failing command reports failed with its exit code", func(t *testing.T) {
		t.Parallel()
		h, _ := b.submit(t, "t-fail", "alice-platform", 1000, "sh", "-c", "echo oops >&2; exit 3")
		st := waitPhase(t, h, runner.Ended, 60*time.Second)
		f, ok := b.plane.ended("t-fail")
		if st.ExitCode != 3 || !ok || f.State != agentapi.StateFailed || f.ExitCode != 3 || !strings.Contains(f.Message, "oops") {
			t.Fatalf("exit %d, reported %+v", st.ExitCode, f)
		}
	})

	t.Run("a cancelled job ends and its end is left to the submitter", func(t *testing.T) {
		t.Parallel()
		h, l := b.submit(t, "t-cancel", "alice-platform", 1000, "sh", "-c", "echo started; sleep 300")
		waitPhase(t, h, runner.Running, 30*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := h.Stop(ctx, 5*time.Second); err != nil {
			t.Fatalf("stop: %v\n%s", err, l)
		}
		st, _ := h.Poll(context.Background())
		if st.Phase != runner.Ended || st.ExitCode == 0 {
			t.Fatalf("after cancel: %+v\n%s", st, l)
		}
		if !strings.Contains(l.String(), "CANCELLED") {
			t.Fatalf("the task's log does not say CANCELLED:\n%s", l)
		}
		if f, ok := b.plane.ended("t-cancel"); ok {
			t.Fatalf("a cancelled job reported an end itself: %+v", f)
		}
		if d := h.Diagnostics(context.Background()); d.Reported || !strings.Contains(d.Signal, "CANCELLED") {
			t.Fatalf("diagnostics: %+v", d)
		}
	})

	t.Run("an owner without a mapping is refused, naming the user and the map", func(t *testing.T) {
		t.Parallel()
		a := &agentapi.Assignment{TaskID: "t-nobody", Attempt: 1, Name: "x", MilliGPUsPerNode: 1000, Nodes: 1, Command: []string{"true"}, Owner: "mallory"}
		_, err := b.r.Submit(context.Background(), &runner.Job{Task: a, Dir: filepath.Join(b.dir, "t-nobody"), Log: func(string, string) {}})
		if err == nil || !strings.Contains(err.Error(), `"mallory"`) || !strings.Contains(err.Error(), b.r.o.Users.Path()) {
			t.Fatalf("err = %v", err)
		}
	})
}
