package estatecmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
)

// newSecretCmd is `klique secret`: set, list and delete the secrets of
// one vault, which each subcommand names with exactly one of --project,
// --group or --tenant.
func newSecretCmd(c *cli.CLI) *cobra.Command {
	v := &vaultFlags{}
	cmd := &cobra.Command{
		Use:   "secret set|list|delete",
		Short: "Keep credentials in vaults; tasks name them and get them at start",
	}
	set, list, del := newSecretSetCmd(c, v), newSecretListCmd(c, v), newSecretDeleteCmd(c, v)
	for _, sub := range []*cobra.Command{set, list, del} {
		sub.Flags().StringVar(&v.project, "project", "", "the vault of this project")
		sub.Flags().StringVar(&v.group, "group", "", "the vault of this group")
		sub.Flags().BoolVar(&v.tenant, "tenant", false, "the tenant's vault (admins)")
	}
	cmd.AddCommand(set, list, del)
	return cmd
}

// vaultFlags are the flags that name a vault; the secret subcommands
// share them.
type vaultFlags struct {
	project, group string
	tenant         bool
}

// scope is the vault the flags name, as the API's SecretScope and owner,
// or a usage error unless exactly one is given.
func (f *vaultFlags) scope() (gql.SecretScope, *string, error) {
	n := 0
	var scope gql.SecretScope
	var owner *string
	if f.project != "" {
		n, scope, owner = n+1, gql.SecretScopeProject, &f.project
	}
	if f.group != "" {
		n, scope, owner = n+1, gql.SecretScopeGroup, &f.group
	}
	if f.tenant {
		n, scope = n+1, gql.SecretScopeTenant
	}
	if n != 1 {
		return "", nil, cli.Usagef("say which vault with exactly one of --project P, --group G or --tenant")
	}
	return scope, owner, nil
}

// newSecretSetCmd is `klique secret set`: the value comes on standard
// input, so that it shows in no process list or shell history.
func newSecretSetCmd(c *cli.CLI, f *vaultFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "set NAME",
		Short: "Put a secret in a vault; the value is read from standard input",
		Example: `  printf %s "$HF_TOKEN" | klique secret set HF_TOKEN --project fraud-models
  klique enqueue --resource "1 GPU" --project fraud-models --secret HF_TOKEN -- python train.py`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, owner, err := f.scope()
			if err != nil {
				return err
			}
			value, err := io.ReadAll(io.LimitReader(c.In, 1<<20))
			if err != nil {
				return err
			}
			v := strings.TrimRight(string(value), "\r\n")
			if v == "" {
				return cli.Usagef("give the value on standard input, e.g. printf %%s \"$VALUE\" | klique secret set %s ...", args[0])
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.SetSecret(cmd.Context(), cl, scope, owner, args[0], v)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "set secret %s in the vault of %s %s\n", out.SetSecret.Name, strings.ToLower(string(scope)), out.SetSecret.Owner)
			return nil
		},
	}
}

// newSecretListCmd is `klique secret list`: the names in a vault, never
// the values.
func newSecretListCmd(c *cli.CLI, f *vaultFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the secrets of a vault (names only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, owner, err := f.scope()
			if err != nil {
				return err
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.Secrets(cmd.Context(), cl, scope, owner)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(out.Secrets)
			}
			var rows [][]string
			for _, s := range out.Secrets {
				rows = append(rows, []string{s.Name, s.Owner, s.UpdatedBy, s.UpdatedAt})
			}
			c.Table([]string{"NAME", "VAULT OF", "UPDATED BY", "UPDATED AT"}, rows)
			return nil
		},
	}
}

// newSecretDeleteCmd is `klique secret delete`.
func newSecretDeleteCmd(c *cli.CLI, f *vaultFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret from a vault",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, owner, err := f.scope()
			if err != nil {
				return err
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := gql.DeleteSecret(cmd.Context(), cl, scope, owner, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "deleted secret %s\n", args[0])
			return nil
		},
	}
}

func newCreateWorkerCredentialCmd(c *cli.CLI) *cobra.Command {
	var pool, name string
	cmd := &cobra.Command{
		Use:     "worker-credential --pool POOL",
		Short:   "Create the credential a pool's worker daemons connect with; it is printed once, on standard output",
		Example: `  klique create worker-credential --pool bare-metal > worker.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pool == "" {
				return cli.Usagef("say which pool with --pool")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateWorkerCredential(cmd.Context(), cl, pool, cli.Ptr(name))
			if err != nil {
				return err
			}
			fmt.Fprintf(c.Err, "created worker credential %q for pool %s; it is shown once, below: store it now\n", out.CreateWorkerCredential.Credential.Name, pool)
			fmt.Fprintln(c.Out, out.CreateWorkerCredential.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "the pool whose workers use it")
	cmd.Flags().StringVar(&name, "name", "", "a name to tell credentials apart")
	return cmd
}
