package hpc

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/klique-ai/klique/agents/runner"
)

// LSF submits with `bsub < script` (so the #BSUB lines are read), reads
// state with `bjobs -o`, and cancels with bkill.
type LSF struct{}

func (LSF) Name() string  { return "lsf" }
func (LSF) Title() string { return "LSF" }

func (LSF) DefaultTemplate() string {
	return `#!/bin/bash
#BSUB -J {{.JobName}}
#BSUB -n {{.Nodes}}
#BSUB -R "span[ptile=1]"
{{- if .GPUsPerNode}}
#BSUB -gpu "num={{.GPUsPerNode}}"
{{- end}}
{{- with .Param "time_limit"}}
#BSUB -W {{.}}
{{- end}}
{{- with .Param "queue"}}
#BSUB -q {{.}}
{{- end}}
#BSUB -o {{.Dir}}/job-%J.out
#BSUB -cwd {{.Dir}}
exec {{.Command}}
`
}

func (LSF) SubmitCommand(string) ([]string, bool) { return []string{"bsub"}, true }

var lsfJobID = regexp.MustCompile(`Job <(\d+)> is submitted`)

// ParseSubmit reads "Job <1234> is submitted to queue <normal>."
func (LSF) ParseSubmit(out string) (string, error) {
	m := lsfJobID.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("bsub printed no job id: %q", strings.TrimSpace(out))
	}
	return m[1], nil
}

func (LSF) CancelCommand(jobID string) []string { return []string{"bkill", jobID} }

func (LSF) State(ctx context.Context, run Exec, jobID string) (JobState, error) {
	out, err := run(ctx, []string{"bjobs", "-noheader", "-o", "stat exit_code pend_reason exec_host delimiter='|'", jobID}, "")
	if strings.Contains(out, "is not found") || (err != nil && strings.Contains(err.Error(), "is not found")) {
		return JobState{}, nil
	}
	if err != nil {
		return JobState{}, fmt.Errorf("bjobs: %w", err)
	}
	return parseBjobs(out), nil
}

// parseBjobs reads "RUN|-|-|host1" (bjobs -noheader -o "stat exit_code
// pend_reason exec_host delimiter='|'").
func parseBjobs(out string) JobState {
	line := firstLine(out)
	if line == "" {
		return JobState{}
	}
	f := strings.Split(line, "|")
	for len(f) < 4 {
		f = append(f, "-")
	}
	dash := func(s string) string {
		if s = strings.TrimSpace(s); s == "-" {
			return ""
		}
		return s
	}
	st := JobState{Known: true, State: f[0], Node: dash(f[3])}
	switch f[0] {
	case "PEND", "PSUSP", "WAIT":
		st.Phase = runner.Pending
		st.Reason = dash(f[2])
	case "RUN", "USUSP", "SSUSP", "PROV":
		st.Phase = runner.Running
	case "DONE":
		st.Phase = runner.Ended
	default: // EXIT, ZOMBI, UNKWN
		st.Phase = runner.Ended
		st.ExitCode = atoiOr(dash(f[1]), 1)
		if st.ExitCode == 0 {
			st.ExitCode = 1
		}
	}
	return st
}
