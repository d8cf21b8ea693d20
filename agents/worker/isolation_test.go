package worker

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/gpu"
	"github.com/klique-ai/klique/agents/hostuser"
	"github.com/klique-ai/klique/agents/runner/process"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/citest"
	"github.com/klique-ai/klique/internal/eventually"
)

// testUIDs is the range the isolation tests give tasks: outside the
// default, so that a worker of another test process on this host (which
// kills what its tasks' uids leave running) never shares one.
var testUIDs = hostuser.Range{First: 42100, Last: 42199}

// reachableWorkDir is a work directory whose parents let other users
// through (t.TempDir's parent is 0700).
func reachableWorkDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o711); err != nil {
		t.Fatal(err)
	}
	return d
}

// The probe of issue 39 defect 4, on a real worker running as root in
// process mode: bob's task holds a project secret in its environment and
// writes a 0600 file in its directory, and sleeps; alice's task, of
// another project, on the same host at the same time, tries to read the
// secret from /proc/<pid>/environ of bob's process, to list bob's
// directory and to print his file. It finds none of them.
func TestATaskCannotReadAnotherUsersTaskOnTheSameHost(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		citest.Missing(t, "giving each task a uid of its own needs root")
	}
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(shared), 0o711); err != nil {
		t.Fatal(err)
	}
	workDir := reachableWorkDir(t)
	b := setup(t, func(c *Config) {
		c.WorkDir = workDir
		r := testUIDs
		c.TaskUIDs = &r
	})
	b.srv.mu.Lock()
	b.srv.secrets["BOB_TOKEN"] = "bob-secret-123"
	b.srv.mu.Unlock()

	bob := shTask("bob-task", `
echo "bob-private-content" > private.txt
chmod 600 private.txt
echo "uid=$(id -u)"
echo "$$ $PWD" > `+shared+`/bob.tmp && mv `+shared+`/bob.tmp `+shared+`/bob
exec sleep 20`)
	bob.Project, bob.ProjectID, bob.Owner, bob.Secrets = "risk", "p-risk", "bob", []string{"BOB_TOKEN"}
	b.srv.enqueue(bob)

	alice := shTask("alice-task", `
for i in $(seq 100); do [ -f `+shared+`/bob ] && break; sleep 0.1; done
read pid dir < `+shared+`/bob
echo "uid=$(id -u) bob=$pid in $dir"
tr '\0' '\n' < /proc/$pid/environ 2>&1 | grep BOB_TOKEN && echo "LEAK: environ"
ls "$dir" 2>&1 && echo "LEAK: listing"
cat "$dir/private.txt" 2>&1 && echo "LEAK: file"
ls "$dir/../.." 2>/dev/null | grep bob && echo "LEAK: names"
echo probed`)
	alice.Project, alice.ProjectID, alice.Owner = "fraud", "p-fraud", "alice"
	b.srv.enqueue(alice)

	f := b.srv.finished(t, "alice-task", 20*time.Second)
	out := strings.Join(b.srv.task("alice-task").lines(agentapi.StreamStdout, agentapi.StreamStderr), "\n")
	if f.State != agentapi.StateCompleted || !strings.Contains(out, "probed") {
		t.Fatalf("alice's task: %+v\n%s", f, out)
	}
	for _, leak := range []string{"bob-secret-123", "bob-private-content", "LEAK"} {
		if strings.Contains(out, leak) {
			t.Errorf("alice's task read %q of bob's task:\n%s", leak, out)
		}
	}
	// Bob's task is still running: its first line comes home with the
	// worker's next log flush, which may follow alice's end.
	var bobOut string
	eventually.Within(t, 10*time.Second, "bob's task's uid line", func() bool {
		bobOut = b.srv.task("bob-task").logText()
		return uidIn(bobOut) != ""
	})
	bobUID, aliceUID := uidIn(bobOut), uidIn(out)
	if bobUID == "" || aliceUID == "" || bobUID == aliceUID || bobUID == "0" || aliceUID == "0" {
		t.Errorf("the tasks ran as uid %q (bob) and %q (alice), want two uids of their own:\n%s\n%s", bobUID, aliceUID, bobOut, out)
	}
	if n, _ := strconv.Atoi(bobUID); n < int(testUIDs.First) || n > int(testUIDs.Last) {
		t.Errorf("bob's task ran as uid %s, outside the range %s", bobUID, testUIDs)
	}
	b.srv.stop("bob-task", "done", agentapi.StateAborted)
	b.srv.finished(t, "bob-task", 20*time.Second)
}

func uidIn(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(l, "uid="); ok {
			return strings.Fields(rest)[0]
		}
	}
	return ""
}

// A worker whose tasks share one user (not root, or --run-as one user: no
// TaskUIDs) never runs tasks of two projects at once: its claims ask for
// the project it runs, and it says so at its start. Unless the pool is
// single-tenant: then they run side by side.
func TestAWorkerWhoseTasksShareAUserRunsOneProjectAtATime(t *testing.T) {
	t.Parallel()
	for _, singleTenant := range []bool{false, true} {
		t.Run("single-tenant="+strconv.FormatBool(singleTenant), func(t *testing.T) {
			t.Parallel()
			srv := newFakeServer(t)
			srv.singleTenant = singleTenant
			var logs syncBuffer
			b := start(t, srv, func(c *Config) { c.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
			marks := t.TempDir()
			run := func(id, project string) agentapi.Assignment {
				a := shTask(id, `date +%s.%N > `+marks+`/`+id+`.start; sleep 1; date +%s.%N > `+marks+`/`+id+`.end`)
				a.Project, a.ProjectID = project, "p-"+project
				return a
			}
			b.srv.enqueue(run("bob-task", "risk"))
			b.srv.enqueue(run("alice-task", "fraud"))
			b.srv.finished(t, "bob-task", 20*time.Second)
			b.srv.finished(t, "alice-task", 20*time.Second)
			mark := func(name string) float64 {
				raw, err := os.ReadFile(filepath.Join(marks, name))
				if err != nil {
					t.Fatal(err)
				}
				v, _ := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
				return v
			}
			overlap := mark("alice-task.start") < mark("bob-task.end") && mark("bob-task.start") < mark("alice-task.end")
			if overlap != singleTenant {
				t.Errorf("the tasks of two projects overlapped = %v, want %v", overlap, singleTenant)
			}
			asked := false
			for _, c := range b.srv.claimRequests() {
				asked = asked || c.Project == "p-risk"
			}
			if asked == singleTenant {
				t.Errorf("a claim asked for bob's project only = %v, want %v", asked, !singleTenant)
			}
			want := "it runs tasks of one project at a time"
			if singleTenant {
				want = "the pool is single-tenant"
			}
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the worker's log does not say %q:\n%s", want, logs.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer a logger and a test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAWorkerThatCannotGiveTasksUsersByDefaultRunsOneProjectAtATime: per
// task users on by default (root, no --task-uids) in a work directory the
// tasks' users cannot reach, such as a quickstart's under a 0700 home,
// turn off with the reason said at start: the worker runs as one that
// cannot switch users, one project at a time. Asked for (--task-uids), the
// same directory is refused with what to change.
func TestAWorkerThatCannotGiveTasksUsersByDefaultRunsOneProjectAtATime(t *testing.T) {
	if os.Geteuid() != 0 {
		citest.Missing(t, "per-task users need root")
	}
	t.Parallel()
	blocked := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(blocked, 0o700); err != nil {
		t.Fatal(err)
	}
	r := hostuser.Default
	var logs syncBuffer
	b := start(t, newFakeServer(t), func(c *Config) {
		c.WorkDir = filepath.Join(blocked, "work")
		c.TaskUIDs, c.TaskUIDsByDefault = &r, true
		c.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	a := shTask("t1", "id -u")
	a.Project, a.ProjectID = "risk", "p-risk"
	b.srv.enqueue(a)
	b.srv.finished(t, "t1", 20*time.Second)
	want := "tasks on this host share one user because the tasks' users cannot reach the work directory"
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "it runs tasks of one project at a time") {
		t.Errorf("the worker's log does not say why its tasks share a user:\n%s", logs.String())
	}
	asked := false
	for _, c := range b.srv.claimRequests() {
		asked = asked || c.Project != ""
	}
	if !asked {
		t.Error("no claim asked for one project: the worker runs any project's tasks side by side under one user")
	}

	cl := client.New(b.srv.url(), testToken)
	w, err := New(Config{Client: cl, Runner: process.New(process.Options{}), GPUs: []agentapi.GPU{{Index: 0}}, Hostname: "h",
		WorkDir: filepath.Join(blocked, "asked"), TaskUIDs: &r, SMI: gpu.SMI{Path: filepath.Join(t.TempDir(), "no-nvidia-smi")}})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "chmod o+x") {
		t.Errorf("per-task users asked for in a directory they cannot reach: %v, want a refusal that says what to change", err)
	}
}
