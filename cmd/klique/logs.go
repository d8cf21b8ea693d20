package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newTaskCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Read a task's logs and metrics, or wait for it to end"}
	cmd.AddCommand(newLogsCmd(c), newMetricsCmd(c), newWaitCmd(c))
	return cmd
}

func newLogsCmd(c *cli) *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs TASK_ID",
		Short: "Print a task's log; -f follows it until the task ends",
		Example: `  klique task logs 01930f2e-...
  klique task logs -f --tail 50 01930f2e-...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			after := 0
			first := true
			for {
				vars := map[string]any{"id": args[0], "after": after}
				if first && tail > 0 {
					vars["tail"] = tail
				}
				first = false
				var out struct {
					Task *struct {
						Status string
						Logs   struct {
							Lines []struct {
								Seq    int
								At     time.Time
								Stream string
								Line   string
							}
							LastSeq   int
							Truncated bool
						}
					}
				}
				if err := cl.Do(cmd.Context(), `query($id: ID!, $after: Int, $tail: Int) { task(id: $id) { status logs(after: $after, first: 1000, tail: $tail) {
					lines { seq at stream line } lastSeq truncated } } }`, vars, &out); err != nil {
					return err
				}
				if out.Task == nil {
					return fmt.Errorf("no task %s", args[0])
				}
				for _, l := range out.Task.Logs.Lines {
					w := c.out
					if l.Stream == "stderr" {
						w = c.err
					}
					prefix := ""
					if l.Stream == "worker" {
						prefix = "[worker] "
					}
					fmt.Fprintf(w, "%s%s\n", prefix, l.Line)
				}
				after = out.Task.Logs.LastSeq
				more := len(out.Task.Logs.Lines) == 1000
				ended := out.Task.Status == "COMPLETED" || out.Task.Status == "FAILED" || out.Task.Status == "ABORTED"
				switch {
				case more:
					continue
				case !follow || ended:
					if follow {
						fmt.Fprintf(c.err, "task %s %s\n", args[0], strings.ToLower(out.Task.Status))
					}
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task ends")
	cmd.Flags().IntVar(&tail, "tail", 0, "start with the last N lines")
	return cmd
}

func newMetricsCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics TASK_ID",
		Short: "Print the latest value of each metric a task reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				Task *struct{ LastMetrics []map[string]any }
			}
			if err := cl.Do(cmd.Context(), `query($id: ID!) { task(id: $id) { lastMetrics { name value step at } } }`, map[string]any{"id": args[0]}, &out); err != nil {
				return err
			}
			if out.Task == nil {
				return fmt.Errorf("no task %s", args[0])
			}
			if c.output != "table" {
				return c.print(out.Task.LastMetrics)
			}
			var rows [][]string
			for _, m := range out.Task.LastMetrics {
				rows = append(rows, []string{str(m, "name"), str(m, "value"), str(m, "step"), str(m, "at")})
			}
			c.table([]string{"METRIC", "VALUE", "STEP", "AT"}, rows)
			return nil
		},
	}
}

func newSecretCmd(c *cli) *cobra.Command {
	var project, group string
	var tenant bool
	scopeOf := func() (string, string, error) {
		n := 0
		scope, owner := "", ""
		if project != "" {
			n, scope, owner = n+1, "PROJECT", project
		}
		if group != "" {
			n, scope, owner = n+1, "GROUP", group
		}
		if tenant {
			n, scope = n+1, "TENANT"
		}
		if n != 1 {
			return "", "", usagef("say which vault with exactly one of --project P, --group G or --tenant")
		}
		return scope, owner, nil
	}
	cmd := &cobra.Command{
		Use:   "secret set|list|delete",
		Short: "Keep credentials in vaults; tasks name them and get them at start",
	}
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Put a secret in a vault; the value is read from standard input",
		Example: `  printf %s "$HF_TOKEN" | klique secret set HF_TOKEN --project fraud-models
  klique enqueue --resource "1 GPU" --project fraud-models --secret HF_TOKEN -- python train.py`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, owner, err := scopeOf()
			if err != nil {
				return err
			}
			value, err := io.ReadAll(io.LimitReader(c.in, 1<<20))
			if err != nil {
				return err
			}
			v := strings.TrimRight(string(value), "\r\n")
			if v == "" {
				return usagef("give the value on standard input, e.g. printf %%s \"$VALUE\" | klique secret set %s ...", args[0])
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			vars := map[string]any{"scope": scope, "name": args[0], "value": v}
			if owner != "" {
				vars["owner"] = owner
			}
			var out struct{ SetSecret struct{ Name, Owner string } }
			if err := cl.Do(cmd.Context(), `mutation($scope: SecretScope!, $owner: ID, $name: String!, $value: String!) {
				setSecret(scope: $scope, owner: $owner, name: $name, value: $value) { name owner } }`, vars, &out); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "set secret %s in the vault of %s %s\n", out.SetSecret.Name, strings.ToLower(scope), out.SetSecret.Owner)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the secrets of a vault (names only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, owner, err := scopeOf()
			if err != nil {
				return err
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			vars := map[string]any{"scope": scope}
			if owner != "" {
				vars["owner"] = owner
			}
			var out struct{ Secrets []map[string]any }
			if err := cl.Do(cmd.Context(), `query($scope: SecretScope!, $owner: ID) { secrets(scope: $scope, owner: $owner) { name owner updatedBy updatedAt } }`, vars, &out); err != nil {
				return err
			}
			if c.output != "table" {
				return c.print(out.Secrets)
			}
			var rows [][]string
			for _, s := range out.Secrets {
				rows = append(rows, []string{str(s, "name"), str(s, "owner"), str(s, "updatedBy"), str(s, "updatedAt")})
			}
			c.table([]string{"NAME", "VAULT OF", "UPDATED BY", "UPDATED AT"}, rows)
			return nil
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret from a vault",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, owner, err := scopeOf()
			if err != nil {
				return err
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			vars := map[string]any{"scope": scope, "name": args[0]}
			if owner != "" {
				vars["owner"] = owner
			}
			if err := cl.Do(cmd.Context(), `mutation($scope: SecretScope!, $owner: ID, $name: String!) { deleteSecret(scope: $scope, owner: $owner, name: $name) }`, vars, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "deleted secret %s\n", args[0])
			return nil
		},
	}
	for _, sub := range []*cobra.Command{set, list, del} {
		sub.Flags().StringVar(&project, "project", "", "the vault of this project")
		sub.Flags().StringVar(&group, "group", "", "the vault of this group")
		sub.Flags().BoolVar(&tenant, "tenant", false, "the tenant's vault (admins)")
	}
	cmd.AddCommand(set, list, del)
	return cmd
}

func newCreateWorkerCredentialCmd(c *cli) *cobra.Command {
	var pool, name string
	cmd := &cobra.Command{
		Use:     "worker-credential --pool POOL",
		Short:   "Create the credential a pool's worker daemons connect with; it is printed once, on standard output",
		Example: `  klique create worker-credential --pool bare-metal > worker.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pool == "" {
				return usagef("say which pool with --pool")
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			vars := map[string]any{"pool": pool}
			if name != "" {
				vars["name"] = name
			}
			var out struct {
				CreateWorkerCredential struct {
					Secret     string
					Credential struct{ Name string }
				}
			}
			if err := cl.Do(cmd.Context(), `mutation($pool: ID!, $name: String) { createWorkerCredential(pool: $pool, name: $name) { secret credential { name } } }`, vars, &out); err != nil {
				return err
			}
			fmt.Fprintf(c.err, "created worker credential %q for pool %s; it is shown once, below: store it now\n", out.CreateWorkerCredential.Credential.Name, pool)
			fmt.Fprintln(c.out, out.CreateWorkerCredential.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "the pool whose workers use it")
	cmd.Flags().StringVar(&name, "name", "", "a name to tell credentials apart")
	return cmd
}
