package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
)

// clientConfig is what `klique login` keeps, in a file only its owner can
// read: the server, the API key it signed in with, and the current access
// token. Commands use the token and renew it from the key when it expires.
type clientConfig struct {
	Server       string    `json:"server"`
	APIKey       string    `json:"apiKey,omitempty"`
	AccessToken  string    `json:"accessToken,omitempty"`
	TokenExpires time.Time `json:"tokenExpires,omitempty"`
}

// configPath is $KLIQUE_CONFIG, or klique/config.json in the user's config
// directory.
func configPath() (string, error) {
	if p := os.Getenv("KLIQUE_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory (set KLIQUE_CONFIG to a file path): %w", err)
	}
	return filepath.Join(dir, "klique", "config.json"), nil
}

func loadConfig() (*clientConfig, error) {
	path, err := configPath()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &clientConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var cfg clientConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s is not valid: %w (delete it and run klique login again)", path, err)
	}
	return &cfg, nil
}

func saveConfig(cfg *clientConfig) error {
	path, err := configPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	data, _ := json.MarshalIndent(cfg, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// client returns a client for the configured server with a usable
// credential: $KLIQUE_TOKEN or $KLIQUE_API_KEY when set, otherwise the
// stored access token, renewed from the stored key when it has expired.
func (c *cli) client(ctx context.Context) (*client.Client, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	server := firstNonEmpty(c.server, os.Getenv("KLIQUE_SERVER"), cfg.Server)
	if server == "" {
		return nil, usagef("no server: run 'klique login --server URL --key-file FILE' or set KLIQUE_SERVER")
	}
	if cred := firstNonEmpty(os.Getenv("KLIQUE_TOKEN"), os.Getenv("KLIQUE_API_KEY")); cred != "" {
		return named(client.New(server, cred)), nil
	}
	if server != cfg.Server {
		return nil, usagef("not signed in to %s: run 'klique login --server %s --key-file FILE'", server, server)
	}
	if cfg.AccessToken != "" && time.Until(cfg.TokenExpires) > time.Minute {
		return named(client.New(server, cfg.AccessToken)), nil
	}
	if cfg.APIKey == "" {
		return nil, usagef("not signed in: run 'klique login --server URL --key-file FILE'")
	}
	tok, exp, err := client.New(server, cfg.APIKey).Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("renew the access token: %w (run klique login again)", err)
	}
	cfg.AccessToken, cfg.TokenExpires = tok, exp
	if err := saveConfig(cfg); err != nil {
		return nil, err
	}
	return named(client.New(server, tok)), nil
}

func named(cl *client.Client) *client.Client {
	cl.Name = "cli"
	return cl
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func newLoginCmd(c *cli) *cobra.Command {
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
			server := firstNonEmpty(c.server, os.Getenv("KLIQUE_SERVER"), "http://127.0.0.1:8080")
			secret, err := readKey(c.in, keyFile, key)
			if err != nil {
				return err
			}
			tok, exp, err := client.New(server, secret).Token(cmd.Context())
			if err != nil {
				return err
			}
			var me struct {
				Me struct {
					User   struct{ Name, Role string }
					Tenant struct{ Name string }
				}
			}
			if err := named(client.New(server, tok)).Do(cmd.Context(), `{ me { user { name role } tenant { name } } }`, nil, &me); err != nil {
				return err
			}
			if err := saveConfig(&clientConfig{Server: server, APIKey: secret, AccessToken: tok, TokenExpires: exp}); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "signed in to %s as %s (%s) in tenant %s\n", server, me.Me.User.Name, strings.ToLower(me.Me.User.Role), me.Me.Tenant.Name)
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
			return "", usagef("read the key file: %v", err)
		}
		key = string(b)
	case key == "":
		key = os.Getenv("KLIQUE_API_KEY")
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", usagef("give the API key with --key-file FILE (or - for standard input)")
	}
	return key, nil
}

func newLogoutCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the stored key and token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := configPath()
			if err != nil {
				return err
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fmt.Fprintln(c.out, "signed out")
			return nil
		},
	}
}

func newWhoamiCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who you are signed in as",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
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
			if err := cl.Do(cmd.Context(), `{ me { user { name role } tenant { name } groups { group { name } role } project { name } } }`, nil, &out); err != nil {
				return err
			}
			if c.output != "table" {
				return c.print(out.Me)
			}
			fmt.Fprintf(c.out, "user:   %s (%s)\ntenant: %s\n", out.Me.User.Name, strings.ToLower(out.Me.User.Role), out.Me.Tenant.Name)
			for _, g := range out.Me.Groups {
				fmt.Fprintf(c.out, "group:  %s (%s)\n", g.Group.Name, strings.ToLower(g.Role))
			}
			if out.Me.Project != nil {
				fmt.Fprintf(c.out, "scoped to project: %s\n", out.Me.Project.Name)
			}
			return nil
		},
	}
}
