package hpc

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/klique-ai/klique/agents/runner"
)

// Slurm submits with sbatch, reads state with squeue while the job is in
// the queue and with sacct (then scontrol) once it left, and cancels with
// scancel.
type Slurm struct{}

func (Slurm) Name() string  { return "slurm" }
func (Slurm) Title() string { return "Slurm" }

func (Slurm) DefaultTemplate() string {
	return `#!/bin/bash
#SBATCH --job-name={{.JobName}}
#SBATCH --nodes={{.Nodes}}
{{- if .GPUsPerNode}}
#SBATCH --gres=gpu:{{.GPUsPerNode}}
{{- end}}
{{- with .Param "time_limit"}}
#SBATCH --time={{.}}
{{- end}}
{{- with .Param "partition"}}
#SBATCH --partition={{.}}
{{- end}}
{{- with .Param "account"}}
#SBATCH --account={{.}}
{{- end}}
#SBATCH --output={{.Dir}}/job-%j.out
#SBATCH --chdir={{.Dir}}
exec {{.Command}}
`
}

func (Slurm) SubmitCommand(path string) ([]string, bool) {
	return []string{"sbatch", "--parsable", path}, false
}

var slurmJobID = regexp.MustCompile(`^(\d+)(;\S+)?$`)

// ParseSubmit reads "123" or "123;cluster" (sbatch --parsable).
func (Slurm) ParseSubmit(out string) (string, error) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := slurmJobID.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("sbatch printed no job id: %q", strings.TrimSpace(out))
}

func (Slurm) CancelCommand(jobID string) []string { return []string{"scancel", jobID} }

func (s Slurm) State(ctx context.Context, run Exec, jobID string) (JobState, error) {
	out, err := run(ctx, []string{"squeue", "-h", "-j", jobID, "-o", "%T|%r|%N"}, "")
	if err == nil {
		if st, ok := parseSqueue(out); ok {
			return st, nil
		}
	} else if !strings.Contains(err.Error(), "Invalid job id") {
		return JobState{}, fmt.Errorf("squeue: %w", err)
	}
	// The job left the queue: its end is in the accounting, or, without
	// accounting, in slurmctld's memory for a few minutes.
	if out, err := run(ctx, []string{"sacct", "-X", "-n", "-P", "-j", jobID, "-o", "State,ExitCode,Reason,NodeList"}, ""); err == nil {
		if st, ok := parseSacct(out); ok && st.Phase == runner.Ended {
			return st, nil
		}
	}
	out, err = run(ctx, []string{"scontrol", "-o", "show", "job", jobID}, "")
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return JobState{}, nil
		}
		return JobState{}, fmt.Errorf("scontrol show job: %w", err)
	}
	return parseScontrol(out), nil
}

// parseSqueue reads "RUNNING|None|node1" (squeue -h -o '%T|%r|%N').
func parseSqueue(out string) (JobState, bool) {
	line := firstLine(out)
	if line == "" {
		return JobState{}, false
	}
	f := strings.Split(line, "|")
	for len(f) < 3 {
		f = append(f, "")
	}
	st := slurmState(f[0], "0:0")
	if st.Phase == runner.Pending && f[1] != "None" {
		st.Reason = f[1]
	}
	st.Node = f[2]
	return st, true
}

// parseSacct reads "COMPLETED|0:0|None|node1" (sacct -X -n -P -o
// State,ExitCode,Reason,NodeList).
func parseSacct(out string) (JobState, bool) {
	line := firstLine(out)
	if line == "" {
		return JobState{}, false
	}
	f := strings.Split(line, "|")
	for len(f) < 4 {
		f = append(f, "")
	}
	st := slurmState(f[0], f[1])
	if f[2] != "" && f[2] != "None" {
		st.Reason = f[2]
	}
	st.Node = f[3]
	return st, true
}

var scontrolField = regexp.MustCompile(`(\w+)=(\S*)`)

// parseScontrol reads `scontrol -o show job`: JobState=, ExitCode=,
// Reason=, NodeList=.
func parseScontrol(out string) JobState {
	kv := map[string]string{}
	for _, m := range scontrolField.FindAllStringSubmatch(firstLine(out), -1) {
		if _, seen := kv[m[1]]; !seen {
			kv[m[1]] = m[2]
		}
	}
	if kv["JobState"] == "" {
		return JobState{}
	}
	st := slurmState(kv["JobState"], kv["ExitCode"])
	if r := kv["Reason"]; r != "" && r != "None" {
		st.Reason = r
	}
	if n := kv["NodeList"]; n != "(null)" {
		st.Node = n
	}
	return st
}

// slurmState maps a Slurm job state and its "code:signal" exit code.
func slurmState(state, exit string) JobState {
	word := strings.Fields(state + " ")[0] // "CANCELLED by 0" → CANCELLED
	word = strings.TrimSuffix(word, "+")
	st := JobState{Known: true, State: word}
	switch word {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED":
		st.Phase = runner.Pending
	case "RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING":
		st.Phase = runner.Running
	default: // COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE
		st.Phase = runner.Ended
		code, sig, _ := strings.Cut(exit, ":")
		st.ExitCode = atoiOr(code, 0)
		if s := atoiOr(sig, 0); s > 0 {
			st.ExitCode = 128 + s
		}
		st.OOM = word == "OUT_OF_MEMORY"
		if word != "COMPLETED" && st.ExitCode == 0 {
			st.ExitCode = 1
		}
	}
	return st
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}
