package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/klique-ai/klique/internal/client"
)

// Config is what `klique login` keeps, in a file only its owner can
// read: the server, the API key it signed in with, and the current access
// token. Commands use the token and renew it from the key when it expires.
type Config struct {
	Server       string    `json:"server"`
	APIKey       string    `json:"apiKey,omitempty"`
	AccessToken  string    `json:"accessToken,omitempty"`
	TokenExpires time.Time `json:"tokenExpires,omitempty"`
}

// ConfigPath is $KLIQUE_CONFIG, or klique/config.json in the user's config
// directory.
func ConfigPath() (string, error) {
	if p := os.Getenv("KLIQUE_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory (set KLIQUE_CONFIG to a file path): %w", err)
	}
	return filepath.Join(dir, "klique", "config.json"), nil
}

func LoadConfig() (*Config, error) {
	path, err := ConfigPath()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s is not valid: %w (delete it and run klique login again)", path, err)
	}
	return &cfg, nil
}

func SaveConfig(cfg *Config) error {
	path, err := ConfigPath()
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

// Client returns a client for the configured server with a usable
// credential: $KLIQUE_TOKEN or $KLIQUE_API_KEY when set, otherwise the
// stored access token, renewed from the stored key when it has expired.
func (c *CLI) Client(ctx context.Context) (*client.Client, error) {
	cfg, err := LoadConfig()
	if err != nil {
		return nil, err
	}
	server := FirstNonEmpty(c.Server, os.Getenv("KLIQUE_SERVER"), cfg.Server)
	if server == "" {
		return nil, Usagef("no server: run 'klique login --server URL --key-file FILE' or set KLIQUE_SERVER")
	}
	if cred := FirstNonEmpty(os.Getenv("KLIQUE_TOKEN"), os.Getenv("KLIQUE_API_KEY")); cred != "" {
		return Named(client.New(server, cred)), nil
	}
	if server != cfg.Server {
		return nil, Usagef("not signed in to %s: run 'klique login --server %s --key-file FILE'", server, server)
	}
	if cfg.AccessToken != "" && time.Until(cfg.TokenExpires) > time.Minute {
		return Named(client.New(server, cfg.AccessToken)), nil
	}
	if cfg.APIKey == "" {
		return nil, Usagef("not signed in: run 'klique login --server URL --key-file FILE'")
	}
	tok, exp, err := client.New(server, cfg.APIKey).Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("renew the access token: %w (run klique login again)", err)
	}
	cfg.AccessToken, cfg.TokenExpires = tok, exp
	if err := SaveConfig(cfg); err != nil {
		return nil, err
	}
	return Named(client.New(server, tok)), nil
}

func Named(cl *client.Client) *client.Client {
	cl.Name = "cli"
	return cl
}

func FirstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
