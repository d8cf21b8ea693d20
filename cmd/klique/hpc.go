package main

import (
	"os"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/agents/runner/hpc"
	"github.com/klique-ai/klique/internal/version"
)

func newHPCSubmitterCmd(c *cli.CLI) *cobra.Command {
	var o hpc.SubmitterOptions
	var configFile, tokenFile, asUser string
	var logs logFlags
	var params []string
	cmd := &cobra.Command{
		Use:   "hpc-submitter --scheduler slurm|pbs|lsf --pool NAME --token-file FILE --user-map FILE --gpus N",
		Short: "Run the HPC submitter of a pool on a cluster's login node",
		Long: `Run the HPC submitter on a login node of a Slurm, PBS or LSF cluster. It
connects out to the control plane with the pool's worker credential, pulls the
tasks placed on its pool, and turns each into a batch job (sbatch, qsub, bsub)
submitted as the Linux account the user map gives the task's owner. It tracks
the job (squeue/sacct, qstat, bjobs), writes its job id and state in the task's
log, and cancels it (scancel, qdel, bkill) when the task is aborted or
preempted. Inside the job, 'klique task-run' reports the task's logs, metrics
and end with a credential for that task attempt only, over outbound HTTPS.

The user map is read again whenever it changes. See docs/hpc.md.`,
		Example: `  klique hpc-submitter --scheduler slurm --pool hpc --server https://klique.corp \
      --token-file /etc/klique/worker.token --user-map /etc/klique/users.yaml --gpus 32 \
      --work-dir /shared/klique --klique /shared/bin/klique
  klique hpc-submitter --config /etc/klique/hpc.yaml --pool hpc --token-file worker.token --gpus 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile != "" {
				cfg, err := hpc.ReadConfig(configFile)
				if err != nil {
					return cli.Usage(err)
				}
				f := cmd.Flags()
				merge := func(flag string, dst *string, v string) {
					if !f.Changed(flag) && v != "" {
						*dst = v
					}
				}
				merge("scheduler", &o.Scheduler, cfg.Scheduler)
				merge("user-map", &o.UserMap, cfg.UserMap)
				merge("klique", &o.Klique, cfg.Klique)
				merge("job-server", &o.JobServer, cfg.JobServer)
				merge("container", &o.Container, cfg.Container)
				merge("template", &o.Template, cfg.Template)
				if !f.Changed("as-user") && len(cfg.AsUser) > 0 {
					o.AsUser = cfg.AsUser
				}
				o.Parameters, o.Templates = cfg.Parameters, cfg.Templates
			}
			if asUser != "" {
				o.AsUser = strings.Fields(asUser)
			}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return cli.Usagef("--param %q: write name=value", p)
				}
				if o.Parameters == nil {
					o.Parameters = map[string]string{}
				}
				o.Parameters[k] = v
			}
			server, token, err := agentEndpoint(c, tokenFile)
			if err != nil {
				return err
			}
			o.Server, o.Token = server, token
			if o.Log, err = logs.logger(c.Err); err != nil {
				return err
			}
			o.Version = version.String()
			w, err := hpc.NewSubmitter(cmd.Context(), o)
			if err != nil {
				return optionError(err)
			}
			return runDaemon(cmd.Context(), "hpc-submitter", w.Run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "configuration file (YAML: scheduler, userMap, klique, jobServer, asUser, container, parameters, template, templates)")
	f.StringVar(&o.Scheduler, "scheduler", "slurm", "the cluster's batch scheduler: slurm, pbs or lsf")
	f.StringVar(&o.Pool, "pool", "", "the pool this submitter serves (checked against the credential's pool)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the pool's worker credential (or $KLIQUE_WORKER_TOKEN)")
	f.StringVar(&o.UserMap, "user-map", "", "YAML file mapping platform users to Linux accounts (users: {alice: alice}, default: ACCOUNT); re-read when it changes")
	f.IntVar(&o.Slots, "gpus", 0, "how many GPUs of the cluster this submitter may keep submitted at once")
	f.StringVar(&o.WorkDir, "work-dir", "klique-hpc", "directory for job directories and the log spool; on a filesystem compute nodes share")
	f.StringVar(&o.Klique, "klique", "", "the klique executable as compute nodes see it (default: this one)")
	f.StringVar(&o.JobServer, "job-server", "", "the control plane's URL as compute nodes reach it (default: --server)")
	f.StringVar(&asUser, "as-user", "", `command prefix that runs sbatch/qsub/bsub as the job's account, {account} replaced (default as root: "runuser -u {account} --"; else "sudo -n -u {account} --")`)
	f.StringVar(&o.Container, "container", "apptainer", "how a task with an image runs: apptainer, singularity, pyxis or none")
	f.StringVar(&o.Template, "template", "", "file with the default batch template (Go text/template; default: the scheduler's built-in)")
	f.StringArrayVar(&params, "param", nil, "template parameter default, name=value (time_limit, partition, queue, account), repeatable")
	f.StringVar(&o.Name, "name", "", "name of this submitter (default: the host name)")
	f.DurationVar(&o.Grace, "grace", 30*time.Second, "time a cancelled job is given to end before it is reported")
	logs.add(f, false)
	return cmd
}

func newTaskRunCmd(c *cli.CLI) *cobra.Command {
	var jobFile string
	cmd := &cobra.Command{
		Use:    "task-run --job FILE",
		Short:  "Run a task inside its batch job and report on it (started by the HPC submitter's batch script)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := hpc.ReadJobSpec(jobFile)
			if err != nil {
				return err
			}
			// The job ends with the task's exit code, so the scheduler's
			// accounting shows it too.
			if code := hpc.RunTask(cmd.Context(), spec, hpc.TaskRunOptions{Stderr: c.Err}); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&jobFile, "job", "", "the job description the submitter wrote (job.json)")
	return cmd
}
