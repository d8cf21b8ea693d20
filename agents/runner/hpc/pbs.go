package hpc

import (
	"context"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/agents/runner"
)

// PBS (PBS Pro and OpenPBS) submits with qsub, reads state with
// `qstat -f -x` (which keeps finished jobs), and cancels with qdel.
type PBS struct{}

func (PBS) Name() string  { return "pbs" }
func (PBS) Title() string { return "PBS" }

func (PBS) DefaultTemplate() string {
	return `#!/bin/bash
#PBS -N {{.JobName}}
#PBS -l select={{.Nodes}}{{if .GPUsPerNode}}:ngpus={{.GPUsPerNode}}{{end}}
{{- with .Param "time_limit"}}
#PBS -l walltime={{.}}
{{- end}}
{{- with .Param "queue"}}
#PBS -q {{.}}
{{- end}}
#PBS -j oe
#PBS -o {{.Dir}}/job.out
cd {{.Dir}}
exec {{.Command}}
`
}

func (PBS) SubmitCommand(path string) ([]string, bool) { return []string{"qsub", path}, false }

// ParseSubmit reads "1234.server" (qsub prints the job id alone).
func (PBS) ParseSubmit(out string) (string, error) {
	id := firstLine(out)
	if id == "" || strings.ContainsAny(id, " \t") || id[0] < '0' || id[0] > '9' {
		return "", fmt.Errorf("qsub printed no job id: %q", strings.TrimSpace(out))
	}
	return id, nil
}

func (PBS) CancelCommand(jobID string) []string { return []string{"qdel", jobID} }

func (PBS) State(ctx context.Context, run Exec, jobID string) (JobState, error) {
	out, err := run(ctx, []string{"qstat", "-f", "-x", jobID}, "")
	if err != nil {
		if strings.Contains(err.Error(), "Unknown Job Id") {
			return JobState{}, nil
		}
		return JobState{}, fmt.Errorf("qstat: %w", err)
	}
	return parseQstat(out), nil
}

// parseQstat reads `qstat -f`: "    key = value" lines, long values
// continued on lines that start with a tab.
func parseQstat(out string) JobState {
	kv := map[string]string{}
	last := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "\t") && last != "" {
			kv[last] += strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		last = strings.TrimSpace(k)
		kv[last] = strings.TrimSpace(v)
	}
	state := kv["job_state"]
	if state == "" {
		return JobState{}
	}
	st := JobState{Known: true, State: state, Node: strings.Split(kv["exec_host"], "/")[0]}
	switch state {
	case "Q", "H", "W", "T", "S", "U", "M", "B":
		st.Phase = runner.Pending
		st.Reason = kv["comment"]
	case "R", "E":
		st.Phase = runner.Running
	default: // F (finished), X (subjob finished)
		st.Phase = runner.Ended
		code := atoiOr(kv["Exit_status"], 1)
		switch {
		case code >= 256: // killed by signal code-256 (PBS Pro)
			st.ExitCode = 128 + code - 256
		case code < 0: // PBS could not run the job (JOB_EXEC_*)
			st.ExitCode = 1
			st.Reason = fmt.Sprintf("PBS could not run the job (Exit_status %d)", code)
		default:
			st.ExitCode = code
		}
		if st.Reason == "" {
			st.Reason = kv["comment"]
		}
	}
	return st
}
