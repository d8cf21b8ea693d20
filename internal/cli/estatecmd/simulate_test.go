package estatecmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/spf13/cobra"
)

// simulate runs `klique simulate` in-process with args and returns what it
// printed and its error.
func simulate(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli.CLI{Out: &out, Err: &errOut}
	root := &cobra.Command{Use: "klique", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVarP(&c.Output, "output", "o", "table", "output format")
	root.AddCommand(newSimulateCmd(c))
	root.SetArgs(append([]string{"simulate"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestSimulateCommand(t *testing.T) {
	example := []string{"--estate", "../../../examples/estate.yaml", "--workload", "../../../examples/workload.jsonl"}

	t.Run("the shipped example prints waits, preemptions, utilisation and the budget run-out", func(t *testing.T) {
		out, _, err := simulate(t, example...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Simulated Sun 2026-12-06 07:00:00 UTC to Mon 2026-12-07 04:22:30 UTC",
			"GROUP ", "WAIT P50", "WAIT P95", "PREEMPTED:RECLAIM", "BUDGET RUN-OUTS",
			"POOL ", "UTILISATION", "onprem-k8s", "slurm-a100",
			"vision          Sun 2026-12-06 11:37:30 UTC  2000 h per week  Mon 2026-12-07 00:00:00 UTC",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		again, _, _ := simulate(t, example...)
		if again != out {
			t.Fatalf("a second run printed something else:\n%s\n---\n%s", out, again)
		}
	})

	t.Run("-o json gives the figures to programs", func(t *testing.T) {
		out, _, err := simulate(t, append(example, "-o", "json", "--pass-interval", "1m")...)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			PassInterval string
			Groups       []struct {
				Group            string
				PreemptedReclaim int
				ReclaimedFor     int
				BudgetRunOuts    int
			}
			BudgetRunOuts []struct{ Group string }
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if res.PassInterval != "1m0s" || len(res.Groups) != 3 || len(res.BudgetRunOuts) != 1 || res.BudgetRunOuts[0].Group != "vision" {
			t.Fatalf("result %+v", res)
		}
		if res.Groups[0].Group != "ml-research" || res.Groups[0].PreemptedReclaim != 12 || res.Groups[2].ReclaimedFor != 12 {
			t.Fatalf("groups %+v: vision reclaims 12 GPUs from ml-research", res.Groups)
		}
	})

	t.Run("until cuts the run", func(t *testing.T) {
		out, _, err := simulate(t, append(example, "--until", "3h")...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "to Sun 2026-12-06 10:00:00 UTC (3h0m0s)") || strings.Contains(out, "BUDGET RUN-OUT ") {
			t.Fatalf("output:\n%s", out)
		}
	})

	t.Run("mistakes are refused with what to do", func(t *testing.T) {
		dir := t.TempDir()
		bad := filepath.Join(dir, "bad.jsonl")
		if err := os.WriteFile(bad, []byte(`{"at": "2026-12-06T07:00:00Z", "group": "nlp", "computeResource": "1 GPU", "duration": "1h"}`+"\n"+
			`{"at": "2026-12-06T07:00:00Z", "group": "nlp", "computeResource": "2 GPUs", "duration": "1h"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			args []string
			want string
		}{
			{nil, "give the estate file with --estate and the workload with --workload"},
			{[]string{"--estate", "../../../examples/estate.yaml", "--workload", bad}, `workload line 2: group "nlp" has no compute resource "2 GPUs"`},
			{[]string{"--estate", "../../../examples/estate.yaml", "--workload", filepath.Join(dir, "missing.jsonl")}, "read "},
			{append(example, "--start", "tomorrow"), "--start \"tomorrow\" is not an RFC 3339 time"},
			{append(example, "--pass-interval", "0s"), "--pass-interval must be more than 0"},
			{append(example, "--until", "soon"), "--until \"soon\" is neither"},
			{append(example, "-o", "xml"), "output format \"xml\" is not known"},
			{[]string{"--estate", "../../../examples/workload.jsonl", "--workload", bad}, "workload.jsonl"},
		}
		for _, c := range cases {
			_, _, err := simulate(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("simulate %v: error %v, want it to say %q", c.args, err, c.want)
			}
		}
	})
}
