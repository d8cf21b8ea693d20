package logincmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
)

func newLoginCmd(c *cli.CLI) *cobra.Command {
	var keyFile, key string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in to a control plane with an API key",
		Long: `Exchange an API key for a short-lived access token and remember both, in a
file only you can read ($KLIQUE_CONFIG or ~/.config/klique/config.json).
The key is read from --key-file (- for standard input), --key, or $KLIQUE_API_KEY.`,
		Example: `  klique login --server http://127.0.0.1:8080 --key-file klique-data/admin.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server := cli.FirstNonEmpty(c.Server, os.Getenv("KLIQUE_SERVER"), "http://127.0.0.1:8080")
			secret, err := readKey(c.In, keyFile, key)
			if err != nil {
				return err
			}
			tok, exp, err := client.New(server, secret).Token(cmd.Context())
			if err != nil {
				return err
			}
			me, err := gql.SignedIn(cmd.Context(), cli.Named(client.New(server, tok)))
			if err != nil {
				return err
			}
			if err := cli.SaveConfig(&cli.Config{Server: server, APIKey: secret, AccessToken: tok, TokenExpires: exp}); err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "signed in to %s as %s (%s) in tenant %s\n", server, me.Me.User.Name, strings.ToLower(string(me.Me.User.Role)), me.Me.Tenant.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "file holding the API key (- for standard input)")
	cmd.Flags().StringVar(&key, "key", "", "the API key (prefer --key-file: command lines are visible to other users)")
	return cmd
}

func readKey(in io.Reader, file, key string) (string, error) {
	switch {
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(in, 8<<10))
		if err != nil {
			return "", fmt.Errorf("read the key from standard input: %w", err)
		}
		key = string(b)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", cli.Usagef("read the key file: %v", err)
		}
		key = string(b)
	case key == "":
		key = os.Getenv("KLIQUE_API_KEY")
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", cli.Usagef("give the API key with --key-file FILE (or - for standard input)")
	}
	return key, nil
}

func newLogoutCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the stored key and token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := cli.ConfigPath()
			if err != nil {
				return err
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fmt.Fprintln(c.Out, "signed out")
			return nil
		},
	}
}

func newWhoamiCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who you are signed in as",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				// As -o json has always printed it: Go's field names.
				Me struct {
					User struct {
						Name, Role string
					}
					Tenant struct{ Name string }
					Groups []struct {
						Group struct{ Name string }
						Role  string
					}
					Project *struct{ Name string }
				}
			}
			me, err := gql.Me(cmd.Context(), cl)
			if err != nil {
				return err
			}
			if err := cli.Recast(me, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.Me)
			}
			fmt.Fprintf(c.Out, "user:   %s (%s)\ntenant: %s\n", out.Me.User.Name, strings.ToLower(out.Me.User.Role), out.Me.Tenant.Name)
			for _, g := range out.Me.Groups {
				fmt.Fprintf(c.Out, "group:  %s (%s)\n", g.Group.Name, strings.ToLower(g.Role))
			}
			if out.Me.Project != nil {
				fmt.Fprintf(c.Out, "scoped to project: %s\n", out.Me.Project.Name)
			}
			return nil
		},
	}
}
