package estatecmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/engine/sim"
	"github.com/klique-ai/klique/internal/estate"
)

func newSimulateCmd(c *cli.CLI) *cobra.Command {
	var estateFile, workloadFile, start, until string
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "simulate --estate estate.yaml --workload workload.jsonl",
		Short: "Run the compute policy engine over a workload on a virtual clock",
		Long: `Run the real compute policy engine over a workload on a virtual clock, with
no server, and print per group the wait from arrival to first placement (p50
and p95), preemptions by cause, budget run-outs and tasks finished, and per
pool the utilisation over the run. It answers "what if we change this
policy" before anyone changes it: edit a copy of the estate file and compare.

The estate file is the one "klique apply" reads. Passes run every
--pass-interval from the start; a pass that would decide nothing is skipped
up to the next arrival, finish, budget run-out or period reset, so a
coarser interval (1m) only matters for long simulations. Time budgets are
charged while tasks hold capacity (hours × the profile's time weight), by
the UTC calendar, with each policy's low watermark. A preempted task goes
back to its queue in its old order and later runs for the time it had left
(as work that checkpoints does).

` + sim.WorkloadFormat,
		Example: `  klique simulate --estate examples/estate.yaml --workload examples/workload.jsonl
  klique simulate --estate estate.yaml --workload week.jsonl --pass-interval 1m -o json
  klique simulate --estate estate.yaml --workload w.jsonl --start 2026-12-03T00:00:00Z --until 24h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if estateFile == "" || workloadFile == "" {
				return cli.Usagef("give the estate file with --estate and the workload with --workload")
			}
			if c.Output != "table" && c.Output != "json" && c.Output != "yaml" {
				return cli.Usagef("output format %q is not known: use table, json or yaml", c.Output)
			}
			if interval <= 0 {
				return cli.Usagef("--pass-interval must be more than 0")
			}
			opt := sim.Options{PassInterval: interval}
			if start != "" {
				t, err := time.Parse(time.RFC3339, start)
				if err != nil {
					return cli.Usagef("--start %q is not an RFC 3339 time such as 2026-12-03T00:00:00Z", start)
				}
				opt.Start = t.UTC()
			}
			e, err := loadSimEstate(c, estateFile)
			if err != nil {
				return err
			}
			f, err := os.Open(workloadFile)
			if err != nil {
				return cli.Usagef("read %s: %v", workloadFile, err)
			}
			defer f.Close()
			w, err := sim.ParseWorkload(f)
			if err != nil {
				return fmt.Errorf("%s: %w", workloadFile, err)
			}
			if until != "" {
				if opt.Until, err = simUntil(until, opt.Start, w); err != nil {
					return err
				}
			}
			res, err := sim.Run(e, w, opt)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(res)
			}
			printSimulation(c, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&estateFile, "estate", "", "estate file (YAML), as klique apply reads it")
	cmd.Flags().StringVar(&workloadFile, "workload", "", "workload file (JSON lines)")
	cmd.Flags().StringVar(&start, "start", "", "start of the virtual clock, RFC 3339 (default: the workload's earliest time)")
	cmd.Flags().StringVar(&until, "until", "", "stop at this RFC 3339 time, or this long after the start (24h) (default: when all work has finished)")
	cmd.Flags().DurationVar(&interval, "pass-interval", time.Second, "time between engine passes")
	return cmd
}

// loadSimEstate reads an estate file the way klique apply does (see
// sim.LoadEstate) and prints its warnings.
func loadSimEstate(c *cli.CLI, file string) (*estate.Estate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, cli.Usagef("read %s: %v", file, err)
	}
	e, warnings, err := sim.LoadEstate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(c.Err, "warning: %s\n", w)
	}
	return e, nil
}

// simUntil reads --until: a time, or a duration after the start.
func simUntil(text string, start time.Time, w *sim.Workload) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return time.Time{}, cli.Usagef("--until %q is neither an RFC 3339 time nor a duration such as 24h", text)
	}
	if start.IsZero() {
		for _, a := range w.Arrivals {
			if !a.At.IsZero() && (start.IsZero() || a.At.Before(start)) {
				start = a.At
			}
		}
		if start.IsZero() {
			return time.Time{}, cli.Usagef("--until %s counts from the start: give --start too", text)
		}
	}
	return start.Add(d), nil
}

func printSimulation(c *cli.CLI, r *sim.Result) {
	fmt.Fprintf(c.Out, "Simulated %s to %s (%s): %d passes, every %s while work changed, else at the next event.\n\n",
		simTime(r.Start), simTime(r.End), simDuration(r.End.Sub(r.Start)), r.Passes, r.PassInterval)
	var rows [][]string
	for _, g := range r.Groups {
		rows = append(rows, []string{g.Group, strconv.Itoa(g.Tasks), strconv.Itoa(g.Finished), strconv.Itoa(g.Running), strconv.Itoa(g.Waiting),
			simSeconds(g.WaitP50), simSeconds(g.WaitP95), simSeconds(g.WaitMax), strconv.Itoa(g.PreemptedReclaim), strconv.Itoa(g.PreemptedBudget),
			strconv.Itoa(g.ReclaimedFor), strconv.Itoa(g.BudgetRunOuts), simHours(g.GPUHours), simOptHours(g.BudgetHours)})
	}
	c.Table([]string{"GROUP", "TASKS", "FINISHED", "RUNNING", "WAITING", "WAIT P50", "WAIT P95", "WAIT MAX",
		"PREEMPTED:RECLAIM", "PREEMPTED:BUDGET", "RECLAIMED FOR IT", "BUDGET RUN-OUTS", "GPU-HOURS", "BUDGET HOURS"}, rows)
	fmt.Fprintln(c.Out)
	rows = nil
	for _, p := range r.Pools {
		rows = append(rows, []string{p.Pool, strconv.Itoa(p.CapacityGPUs), simHours(p.GPUHours),
			strconv.FormatFloat(p.Utilization*100, 'f', 1, 64) + "%", strconv.FormatFloat(p.PeakGPUs, 'f', -1, 64)})
	}
	c.Table([]string{"POOL", "CAPACITY", "GPU-HOURS", "UTILISATION", "PEAK GPUS"}, rows)
	if len(r.RunOuts) == 0 {
		return
	}
	fmt.Fprintln(c.Out)
	rows = nil
	for _, o := range r.RunOuts {
		rows = append(rows, []string{o.Group, simTime(o.At), fmt.Sprintf("%s h per %s", simHours(o.Hours), o.Period), simTime(o.ResetAt)})
	}
	c.Table([]string{"BUDGET RUN-OUT", "AT", "BUDGET", "RESETS"}, rows)
}

func simTime(t time.Time) string { return t.UTC().Format("Mon 2006-01-02 15:04:05 UTC") }

// simDuration writes a duration to the second: 1h30m0s, 45s.
func simDuration(d time.Duration) string { return d.Round(time.Second).String() }

func simSeconds(s *float64) string {
	if s == nil {
		return "-"
	}
	return simDuration(time.Duration(*s * float64(time.Second)))
}

func simOptHours(h *float64) string {
	if h == nil {
		return "-"
	}
	return simHours(*h)
}

func simHours(h float64) string {
	return strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(h, 'f', 2, 64), "0"), ".")
}
