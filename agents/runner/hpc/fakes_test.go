package hpc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/testclock"
)

// Recorded outputs of PBS Pro's qstat -f -x and LSF's bjobs -o, in the
// documented formats, for a job that waits, runs, and ends.
const (
	qstatQueued = `Job Id: 4242.pbs-head
    Job_Name = klique-train
    Job_Owner = root@login1
    job_state = Q
    queue = workq
    comment = Not Running: Insufficient amount of resource: ngpus (R: 4 A: 
	0 T: 8)
    Resource_List.ngpus = 8
    Resource_List.select = 2:ngpus=4
`
	qstatRunning = `Job Id: 4242.pbs-head
    Job_Name = klique-train
    job_state = R
    queue = workq
    exec_host = gpu07/0*4+gpu08/0*4
    comment = Job run at Sun Nov 29 at 14:02 on (gpu07:ngpus=4)+(gpu08:ngpus=4)
`
	qstatFinished = `Job Id: 4242.pbs-head
    Job_Name = klique-train
    job_state = F
    queue = workq
    exec_host = gpu07/0*4+gpu08/0*4
    Exit_status = 3
    comment = Job run at Sun Nov 29 at 14:02 on (gpu07:ngpus=4)+(gpu08:ngpus=4) and finished
`
	qstatKilled = `Job Id: 4242.pbs-head
    job_state = F
    exec_host = gpu07/0*4
    Exit_status = 271
`
	bjobsPending  = "PEND|-|Job's resource requirements not satisfied|-\n"
	bjobsRunning  = "RUN|-|-|2*gpu11:2*gpu12\n"
	bjobsExited   = "EXIT|3|-|2*gpu11:2*gpu12\n"
	bjobsKilled   = "EXIT|130|-|2*gpu11\n"
	bjobsNotFound = "Job <77> is not found\n"
)

func TestParsers(t *testing.T) {
	cases := map[string]struct {
		got  JobState
		want JobState
	}{
		"qstat: queued with its comment": {parseQstat(qstatQueued), JobState{Known: true, State: "Q", Phase: runner.Pending,
			Reason: "Not Running: Insufficient amount of resource: ngpus (R: 4 A:0 T: 8)"}},
		"qstat: running on its first host": {parseQstat(qstatRunning), JobState{Known: true, State: "R", Phase: runner.Running, Node: "gpu07"}},
		"qstat: finished with its exit status": {parseQstat(qstatFinished), JobState{Known: true, State: "F", Phase: runner.Ended, Node: "gpu07", ExitCode: 3,
			Reason: "Job run at Sun Nov 29 at 14:02 on (gpu07:ngpus=4)+(gpu08:ngpus=4) and finished"}},
		"qstat: killed by SIGTERM is 128+15": {parseQstat(qstatKilled), JobState{Known: true, State: "F", Phase: runner.Ended, Node: "gpu07", ExitCode: 143}},
		"bjobs: pending with its reason":     {parseBjobs(bjobsPending), JobState{Known: true, State: "PEND", Phase: runner.Pending, Reason: "Job's resource requirements not satisfied"}},
		"bjobs: running":                     {parseBjobs(bjobsRunning), JobState{Known: true, State: "RUN", Phase: runner.Running, Node: "2*gpu11:2*gpu12"}},
		"bjobs: exited 3":                    {parseBjobs(bjobsExited), JobState{Known: true, State: "EXIT", Phase: runner.Ended, ExitCode: 3, Node: "2*gpu11:2*gpu12"}},
		"bjobs: done":                        {parseBjobs("DONE|-|-|gpu11\n"), JobState{Known: true, State: "DONE", Phase: runner.Ended, Node: "gpu11"}},
		"sacct: cancelled by a signal":       {mustSacct(t, "CANCELLED by 0|0:15|None|localhost"), JobState{Known: true, State: "CANCELLED", Phase: runner.Ended, ExitCode: 143, Node: "localhost"}},
		"sacct: timeout is never a success":  {mustSacct(t, "TIMEOUT|0:0|None|n1"), JobState{Known: true, State: "TIMEOUT", Phase: runner.Ended, ExitCode: 1, Node: "n1"}},
		"sacct: out of memory":               {mustSacct(t, "OUT_OF_MEMORY|0:125|None|n1"), JobState{Known: true, State: "OUT_OF_MEMORY", Phase: runner.Ended, ExitCode: 253, Node: "n1", OOM: true}},
		"squeue: pending on resources":       {mustSqueue(t, "PENDING|Resources|"), JobState{Known: true, State: "PENDING", Phase: runner.Pending, Reason: "Resources"}},
		"scontrol: failed with exit code 3": {parseScontrol("JobId=9 JobName=x UserId=alice(1001) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 NodeList=localhost"),
			JobState{Known: true, State: "FAILED", Phase: runner.Ended, ExitCode: 3, Reason: "NonZeroExitCode", Node: "localhost"}},
	}
	for name, c := range cases {
		if c.got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", name, c.got, c.want)
		}
	}
	for out, want := range map[string]string{"Job <1234> is submitted to queue <normal>.\n": "1234"} {
		if id, err := (LSF{}).ParseSubmit(out); err != nil || id != want {
			t.Errorf("bsub %q: %q %v", out, id, err)
		}
	}
	if id, err := (PBS{}).ParseSubmit("4242.pbs-head\n"); err != nil || id != "4242.pbs-head" {
		t.Errorf("qsub: %q %v", id, err)
	}
	if id, err := (Slurm{}).ParseSubmit("77;cluster\n"); err != nil || id != "77" {
		t.Errorf("sbatch: %q %v", id, err)
	}
	if _, err := (PBS{}).ParseSubmit("qsub: Unknown queue\n"); err == nil {
		t.Error("qsub's error taken as a job id")
	}
}

func mustSacct(t *testing.T, out string) JobState {
	st, ok := parseSacct(out)
	if !ok {
		t.Fatalf("sacct %q not read", out)
	}
	return st
}

func mustSqueue(t *testing.T, out string) JobState {
	st, ok := parseSqueue(out)
	if !ok {
		t.Fatalf("squeue %q not read", out)
	}
	return st
}

// fakeBin puts scheduler commands on PATH: each records its arguments
// and standard input, and the state command prints the recorded outputs
// in turn (the last one again), or the cancelled output after a cancel.
func fakeBin(t *testing.T, submit, submitOut, state string, outputs []string, cancel, cancelled string) string {
	t.Helper()
	dir := t.TempDir()
	for i, o := range outputs {
		if err := os.WriteFile(filepath.Join(dir, "out"+string(rune('0'+i))), []byte(o), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "cancelled.out"), []byte(cancelled), 0o644)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nD="+dir+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(submit, `echo "$@" > $D/submit.args; cat > $D/submit.stdin; printf '%s\n' '`+submitOut+`'`+"\n")
	write(state, `if [ -f $D/cancelled ]; then cat $D/cancelled.out; exit 0; fi
n=$(cat $D/n 2>/dev/null || echo 0)
f=$D/out$n; [ -f $f ] || f=$D/out`+string(rune('0'+len(outputs)-1))+`
echo $((n+1)) > $D/n
cat $f
`)
	write(cancel, `echo "$@" > $D/cancel.args; touch $D/cancelled`+"\n")
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return dir
}

// fakeRunner is a Runner on s whose status interval (1 ms) is measured by
// the clock it returns, which the test moves.
func fakeRunner(t *testing.T, s Scheduler) (*Runner, string, *testclock.Clock) {
	t.Helper()
	dir := t.TempDir()
	me := currentUser(t)
	users, err := LoadUserMap(writeUserMap(t, dir, "default: "+me+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Now())
	r, err := New(Options{Scheduler: s, Users: users, Server: "https://klique.example", Klique: "/shared/bin/klique",
		AsUser: []string{}, StatusInterval: time.Millisecond, Now: clk.Now, Params: map[string]string{"time_limit": "04:00:00", "queue": "gpu"},
		Credential: func(context.Context, string, int) (string, error) { return "kqt_x", nil }})
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, clk
}

func submitFake(t *testing.T, r *Runner, dir string) (runner.Handle, *jobLog) {
	t.Helper()
	l := &jobLog{}
	a := &agentapi.Assignment{TaskID: "t1", Attempt: 2, Name: "train big", MilliGPUsPerNode: 4000, Nodes: 2, Command: []string{"python", "train.py"},
		Owner: "anyone", Image: "/images/pytorch.sif", Parameters: map[string]string{"queue": "gpu-long"}}
	h, err := r.Submit(context.Background(), &runner.Job{Task: a, Dir: filepath.Join(dir, "job"), Log: l.sink})
	if err != nil {
		t.Fatal(err)
	}
	return h, l
}

// phases polls h n times, the status interval passing on clk between
// polls, so that each asks the scheduler.
func phases(t *testing.T, h runner.Handle, clk *testclock.Clock, n int) []runner.Phase {
	var out []runner.Phase
	for range n {
		st, err := h.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Phase)
		clk.Add(2 * time.Millisecond)
	}
	return out
}

func TestPBSWithFakeCommands(t *testing.T) {
	bin := fakeBin(t, "qsub", "4242.pbs-head", "qstat", []string{qstatQueued, qstatRunning, qstatFinished}, "qdel", qstatKilled)
	r, dir, clk := fakeRunner(t, PBS{})
	h, l := submitFake(t, r, dir)
	script, _ := os.ReadFile(filepath.Join(dir, "job", "job.sh"))
	for _, want := range []string{"#PBS -N klique-train_big", "#PBS -l select=2:ngpus=4", "#PBS -l walltime=04:00:00", "#PBS -q gpu-long",
		"exec /shared/bin/klique task-run --job " + filepath.Join(dir, "job", "job.json")} {
		if !strings.Contains(string(script), want) {
			t.Errorf("the script lacks %q:\n%s", want, script)
		}
	}
	spec, err := ReadJobSpec(filepath.Join(dir, "job", "job.json"))
	if err != nil || strings.Join(spec.Command, " ") != "apptainer exec --nv /images/pytorch.sif python train.py" {
		t.Fatalf("job description: %+v %v", spec, err)
	}
	if args, _ := os.ReadFile(filepath.Join(bin, "submit.args")); strings.TrimSpace(string(args)) != filepath.Join(dir, "job", "job.sh") {
		t.Fatalf("qsub args %q", args)
	}
	got := phases(t, h, clk, 3)
	if got[0] != runner.Pending || got[1] != runner.Running || got[2] != runner.Ended {
		t.Fatalf("phases %v", got)
	}
	if st, _ := h.Poll(context.Background()); st.ExitCode != 3 {
		t.Fatalf("exit %d", st.ExitCode)
	}
	if !strings.Contains(l.String(), "PBS job 4242.pbs-head: Q (Not Running: Insufficient amount") || !strings.Contains(l.String(), "F on gpu07, exit code 3") {
		t.Fatalf("task log:\n%s", l)
	}
}

func TestLSFWithFakeCommands(t *testing.T) {
	bin := fakeBin(t, "bsub", "Job <77> is submitted to queue <gpu>.", "bjobs", []string{bjobsPending, bjobsRunning}, "bkill", bjobsKilled)
	r, dir, clk := fakeRunner(t, LSF{})
	h, l := submitFake(t, r, dir)
	stdin, _ := os.ReadFile(filepath.Join(bin, "submit.stdin"))
	for _, want := range []string{"#BSUB -J klique-train_big", "#BSUB -n 2", `#BSUB -gpu "num=4"`, "#BSUB -W 04:00:00", "#BSUB -q gpu-long"} {
		if !strings.Contains(string(stdin), want) {
			t.Errorf("the script given to bsub lacks %q:\n%s", want, stdin)
		}
	}
	if got := phases(t, h, clk, 2); got[0] != runner.Pending || got[1] != runner.Running {
		t.Fatalf("phases %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if args, _ := os.ReadFile(filepath.Join(bin, "cancel.args")); strings.TrimSpace(string(args)) != "77" {
		t.Fatalf("bkill args %q", args)
	}
	st, _ := h.Poll(context.Background())
	if st.Phase != runner.Ended || st.ExitCode != 130 {
		t.Fatalf("after bkill: %+v\n%s", st, l)
	}
	if d := h.Diagnostics(context.Background()); !strings.Contains(d.Signal, "LSF job 77 ended EXIT") || d.Reported {
		t.Fatalf("diagnostics %+v", d)
	}
	_ = bjobsNotFound
}

func TestUserMapIsReadAgainWhenItChanges(t *testing.T) {
	dir := t.TempDir()
	p := writeUserMap(t, dir, "users:\n  alice: alice\n")
	m, err := LoadUserMap(p)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := m.Account("alice"); err != nil || a != "alice" {
		t.Fatalf("alice: %q %v", a, err)
	}
	if _, err := m.Account("bob"); err == nil || !strings.Contains(err.Error(), `"bob"`) || !strings.Contains(err.Error(), p) {
		t.Fatalf("bob without a mapping: %v", err)
	}
	writeUserMap(t, dir, "default: jobs\nusers:\n  alice: alice\n  bob: bsmith\n")
	if a, err := m.Account("bob"); err != nil || a != "bsmith" {
		t.Fatalf("bob after the change: %q %v", a, err)
	}
	if a, _ := m.Account("carol"); a != "jobs" {
		t.Fatalf("carol takes the default: %q", a)
	}
	writeUserMap(t, dir, "users: [not, a, map]\n")
	if a, err := m.Account("bob"); err != nil || a != "bsmith" {
		t.Fatalf("a broken change keeps the last good map: %q %v", a, err)
	}
	if m.LastError() == nil {
		t.Fatal("the broken change is not reported")
	}
	if _, err := LoadUserMap(p); err == nil {
		t.Fatal("a broken map is accepted at start")
	}
}

func TestCleanupCancelsJobsAnEarlierRunLeft(t *testing.T) {
	bin := fakeBin(t, "qsub", "4242.pbs-head", "qstat", []string{qstatRunning}, "qdel", qstatKilled)
	r, dir, _ := fakeRunner(t, PBS{})
	r.o.JobsFile = filepath.Join(dir, "hpc-jobs.json")
	submitFake(t, r, dir)
	if raw, _ := os.ReadFile(r.o.JobsFile); !strings.Contains(string(raw), `"4242.pbs-head"`) {
		t.Fatalf("the submitted job is not listed: %s", raw)
	}

	// The submitter restarts: a new runner on the same list.
	again, err := New(r.o)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if args, _ := os.ReadFile(filepath.Join(bin, "cancel.args")); strings.TrimSpace(string(args)) != "4242.pbs-head" {
		t.Fatalf("qdel args %q, want the job left behind", args)
	}
	if raw, _ := os.ReadFile(r.o.JobsFile); string(raw) != "{}" {
		t.Fatalf("the list after the cleanup: %s", raw)
	}
}

func TestAnEndedJobLeavesTheList(t *testing.T) {
	fakeBin(t, "qsub", "4242.pbs-head", "qstat", []string{qstatFinished}, "qdel", qstatKilled)
	r, dir, _ := fakeRunner(t, PBS{})
	r.o.JobsFile = filepath.Join(dir, "hpc-jobs.json")
	h, _ := submitFake(t, r, dir)
	if st, err := h.Poll(context.Background()); err != nil || st.Phase != runner.Ended {
		t.Fatalf("%+v %v", st, err)
	}
	if raw, _ := os.ReadFile(r.o.JobsFile); string(raw) != "{}" {
		t.Fatalf("the list after the end: %s", raw)
	}
}
