package state

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

func TestWriteListRemove(t *testing.T) {
	t.Parallel()
	d := New(filepath.Join(t.TempDir(), "state"))
	r := &Record{TaskID: "task/1", Attempt: 2, GPUs: []int{0, 3}, Runner: "process", PID: 4242, StartTime: 99, BootID: "b"}
	if err := d.Write(r); err != nil {
		t.Fatal(err)
	}
	// A rewrite replaces the record in one step, and leaves no temporary
	// file behind.
	r.PID = 4343
	if err := d.Write(r); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(d.Path())
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if strings.Join(names, ",") != "task_1.2.json" {
		t.Fatalf("files %v, want the one record", names)
	}
	// A temporary file of a write the worker was killed in is not a record.
	if err := os.WriteFile(filepath.Join(d.Path(), ".tmp-123"), []byte(`{"taskId":`), 0o600); err != nil {
		t.Fatal(err)
	}
	es, err := d.List()
	if err != nil || len(es) != 1 || es[0].Err != nil {
		t.Fatalf("List = %+v, %v", es, err)
	}
	if got := es[0].Record; got.TaskID != "task/1" || got.Attempt != 2 || got.PID != 4343 || len(got.GPUs) != 2 || got.GPUs[1] != 3 ||
		got.WorkerPID != os.Getpid() || got.StartedAt.IsZero() {
		t.Fatalf("record %+v", got)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), ".tmp-123")); !os.IsNotExist(err) {
		t.Fatalf("the unfinished temporary file is still there: %v", err)
	}
	if err := d.Remove("task/1", 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("task/1", 2); err != nil {
		t.Fatalf("removing a removed record: %v", err)
	}
	if es, err := d.List(); err != nil || len(es) != 0 {
		t.Fatalf("List after Remove = %+v, %v", es, err)
	}
	// No directory yet: nothing recorded, no error.
	if es, err := New(filepath.Join(t.TempDir(), "absent")).List(); err != nil || len(es) != 0 {
		t.Fatalf("List of an absent directory = %+v, %v", es, err)
	}
	// A nil directory records nothing.
	var none *Dir
	if err := none.Write(r); err != nil {
		t.Fatal(err)
	}
}

func TestACorruptRecordIsQuarantinedWithAClearError(t *testing.T) {
	t.Parallel()
	d := New(t.TempDir())
	good := &Record{TaskID: "t-good", Attempt: 1, PID: 1 << 22, StartTime: 1}
	if err := d.Write(good); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"t-bad.1.json": `{"taskId": "t-bad", "pid": 12`, "t-empty.1.json": `{}`} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	es, err := d.List()
	if err != nil || len(es) != 3 {
		t.Fatalf("List = %+v, %v", es, err)
	}
	for _, e := range es {
		base := filepath.Base(e.File)
		if base == "t-good.1.json" {
			if e.Err != nil || e.Record == nil {
				t.Fatalf("the good record: %+v", e)
			}
			continue
		}
		if e.Err == nil || !strings.Contains(e.Err.Error(), base) || !strings.Contains(e.Err.Error(), "was not stopped") ||
			!strings.Contains(e.Err.Error(), "moved aside to "+base+".corrupt") {
			t.Fatalf("%s: err %v, want one naming the file, saying nothing was stopped and where it went", base, e.Err)
		}
		if _, err := os.Stat(e.File + ".corrupt"); err != nil {
			t.Fatalf("%s was not quarantined: %v", base, err)
		}
	}
	// Quarantined files are read once: the next start sees only the good
	// record, and Recover goes on past bad ones.
	if es, err := d.List(); err != nil || len(es) != 1 {
		t.Fatalf("second List = %+v, %v", es, err)
	}
}

// startGroup starts script as the leader of its own process group and
// returns its record; the test reaps it.
func startGroup(t *testing.T, script string) (*Record, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-waited })
	start, boot, err := Process(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return &Record{TaskID: "t-" + strconv.Itoa(cmd.Process.Pid), Attempt: 1, GPUs: []int{1}, Runner: "process",
		PID: cmd.Process.Pid, StartTime: start, BootID: boot}, cmd
}

func alive(pid int) bool {
	st, err := readStat(pid)
	return err == nil && !st.zombie
}

func TestGroupAliveTellsAReusedPidFromTheRecordedProcess(t *testing.T) {
	t.Parallel()
	r, _ := startGroup(t, "sleep 60")
	if !r.GroupAlive() {
		t.Fatal("the recorded process is running, but GroupAlive says it is gone")
	}
	reused := *r
	reused.StartTime = r.StartTime - 1
	if reused.GroupAlive() {
		t.Fatal("a process with the recorded id but another start time was taken for the recorded one")
	}
	rebooted := *r
	rebooted.BootID = "another-boot"
	if rebooted.GroupAlive() {
		t.Fatal("a record of another boot was taken for a running process")
	}

	// Recover leaves a process that merely reuses the id alone, and
	// forgets its record.
	d := New(t.TempDir())
	if err := d.Write(&reused); err != nil {
		t.Fatal(err)
	}
	left, err := d.Recover(context.Background(), time.Second, nil)
	if err != nil || len(left) != 1 || left[0].WasRunning || left[0].Running || left[0].Err != nil {
		t.Fatalf("Recover = %+v, %v", left, err)
	}
	if !alive(r.PID) {
		t.Fatal("Recover killed a process that only reused a recorded id")
	}
	if es, _ := d.List(); len(es) != 0 {
		t.Fatalf("the record of a gone process stays: %+v", es)
	}
}

func TestRecoverStopsTheWholeGroupEvenWithoutItsLeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The leader starts a child in its group and records its pid; the
	// child ignores SIGTERM, so only SIGKILL after the grace ends it.
	r, _ := startGroup(t, `sh -c 'trap "" TERM; echo $$ > `+dir+`/child; while :; do sleep 0.05; done' & wait`)
	var child int
	eventually.Within(t, 5*time.Second, "the child to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return child != 0
	})
	// The leader dies (as PR_SET_PDEATHSIG kills it with the worker); its
	// child goes on in the group.
	if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the leader to die", func() bool { return !alive(r.PID) })
	if !alive(child) || !r.GroupAlive() {
		t.Fatal("the child should outlive its leader, and its group count as alive")
	}
	d := New(filepath.Join(dir, "state"))
	if err := d.Write(r); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	left, err := d.Recover(context.Background(), 300*time.Millisecond, nil)
	if err != nil || len(left) != 1 {
		t.Fatalf("Recover = %+v, %v", left, err)
	}
	if l := left[0]; l.TaskID != r.TaskID || l.Attempt != 1 || !l.WasRunning || l.Running || l.Err != nil ||
		len(l.GPUs) != 1 || l.GPUs[0] != 1 || l.What != "process group "+strconv.Itoa(r.PID) {
		t.Fatalf("leftover %+v", l)
	}
	if alive(child) {
		t.Fatal("the child outlived Recover")
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("Recover took %v: the group did not get its grace after SIGTERM", took)
	}
	if es, _ := d.List(); len(es) != 0 {
		t.Fatalf("the record of a stopped group stays: %+v", es)
	}
}

func TestRecoverKeepsWhatItCannotStop(t *testing.T) {
	t.Parallel()
	d := New(t.TempDir())
	if err := d.Write(&Record{TaskID: "t-1", Attempt: 3, GPUs: []int{2}, Runner: "docker", Container: "klique-t-1-3"}); err != nil {
		t.Fatal(err)
	}
	left, err := d.Recover(context.Background(), 0, nil)
	if err != nil || len(left) != 1 || !left[0].Running || left[0].Err == nil || !strings.Contains(left[0].Err.Error(), "--mode docker") {
		t.Fatalf("Recover without a container remover = %+v, %v", left, err)
	}
	if es, _ := d.List(); len(es) != 1 {
		t.Fatal("the record of a container still there was removed")
	}
	left, err = d.Recover(context.Background(), 0, func(_ context.Context, name string) (bool, error) {
		if name != "klique-t-1-3" {
			t.Errorf("removing %q", name)
		}
		return true, nil
	})
	if err != nil || len(left) != 1 || left[0].Running || !left[0].WasRunning {
		t.Fatalf("Recover = %+v, %v", left, err)
	}
	if es, _ := d.List(); len(es) != 0 {
		t.Fatal("the record of a removed container stays")
	}
}

func TestLockKeepsASecondWorkerOut(t *testing.T) {
	t.Parallel()
	d := New(filepath.Join(t.TempDir(), "state"))
	unlock, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lock(); err == nil || !strings.Contains(err.Error(), "another worker (pid "+strconv.Itoa(os.Getpid())+")") ||
		!strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("second Lock: %v", err)
	}
	unlock()
	unlock2, err := d.Lock()
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	unlock2()
	// The lock file is not a record.
	if es, err := d.List(); err != nil || len(es) != 0 {
		t.Fatalf("List = %+v, %v", es, err)
	}
}
