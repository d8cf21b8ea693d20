// Package artifactcmd is the 'klique artifact' command group and the
// --input flag of 'klique enqueue' and 'klique run' (docs/experiments.md,
// "Artifacts and output destinations"). Listing and pointers go through
// GraphQL; the bytes through the artifact endpoint, with the same
// credential. The binary (cmd/klique) gives it its client and output.
package artifactcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
	"github.com/klique-ai/klique/internal/client"
)

// CLI is what the commands need of the binary.
type CLI struct {
	// Client is the signed-in client of the command's server.
	Client func(ctx context.Context) (*client.Client, error)
	Out    io.Writer
	Err    io.Writer
	// Output is the -o flag's value (table, json or yaml), read when a
	// command runs.
	Output func() string
	// Print writes v as -o json or yaml asks; Table writes rows.
	Print func(v any) error
	Table func(header []string, rows [][]string)
	// Usage makes a usage error (exit status 2).
	Usage func(format string, args ...any) error
}

// New returns 'klique artifact'.
func New(c *CLI) *cobra.Command {
	cmd := &cobra.Command{Use: "artifact", Short: "List, download and publish the artifacts of runs"}
	cmd.AddCommand(newLsCmd(c), newGetCmd(c), newPutCmd(c))
	return cmd
}

func newLsCmd(c *CLI) *cobra.Command {
	return &cobra.Command{
		Use: "ls RUN", Short: "List a run's artifacts", Args: c.exactArgs(1, "give the run's ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.TaskArtifacts(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			if out.Task == nil {
				return fmt.Errorf("no task '%s'", args[0])
			}
			list := listed(out.Task.Artifacts)
			if c.Output() != "table" {
				return c.Print(list)
			}
			rows := [][]string{}
			for _, a := range list {
				where := "stored"
				if a.Pointer != nil {
					where = *a.Pointer
				}
				sum := "-"
				if a.Sha256 != nil {
					sum = (*a.Sha256)[:min(12, len(*a.Sha256))]
				}
				rows = append(rows, []string{a.Name, strconv.FormatInt(a.Size, 10), sum, where})
			}
			c.Table([]string{"NAME", "BYTES", "SHA256", "WHERE"}, rows)
			return nil
		},
	}
}

// artifact is an artifact as 'klique artifact ls -o json' prints it.
type artifact struct {
	Name, ContentType, CreatedAt string
	Size                         int64
	Sha256, Pointer, DownloadURL *string
}

func listed(list []gql.TaskArtifactsTaskArtifactsArtifact) []artifact {
	out := make([]artifact, 0, len(list))
	for _, a := range list {
		out = append(out, artifact{Name: a.Name, ContentType: a.ContentType, CreatedAt: a.CreatedAt, Size: int64(a.Size),
			Sha256: a.Sha256, Pointer: a.Pointer, DownloadURL: a.DownloadUrl})
	}
	return out
}

// artifactURL is the artifact endpoint of a run's artifact.
func artifactURL(base, run, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(base, "/") + "/api/v1/tasks/" + url.PathEscape(run) + "/artifacts/" + strings.Join(segs, "/")
}

// artifactHTTP sends a request to the artifact endpoint with the CLI's
// credential; an answer of 4xx or 5xx is the server's error.
func artifactHTTP(cl *client.Client, req *http.Request) (*http.Response, error) {
	if cl.Credential != "" {
		req.Header.Set("Authorization", "Bearer "+cl.Credential)
	}
	req.Header.Set("X-Klique-Client", "cli")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("could not reach %s: %w", cl.BaseURL, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code, Message string }
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
			return nil, &client.Error{Status: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
		}
		return nil, &client.Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(raw))}
	}
	return resp, nil
}

func newGetCmd(c *CLI) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use: "get RUN NAME [-f FILE]", Short: "Download a stored artifact, checking its SHA-256", Args: c.exactArgs(2, "give the run's ID and the artifact's name"),
		Long: `Download a stored artifact into FILE (default: its name's last part in
the current directory; '-' writes to standard output). The SHA-256 the
server stored it with is checked; a file whose bytes differ is removed and
the command fails. A pointer artifact is not downloaded: its URL is printed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, artifactURL(cl.BaseURL, args[0], args[1]), nil)
			if err != nil {
				return err
			}
			resp, err := artifactHTTP(cl, req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				fmt.Fprintf(c.Out, "%s is a pointer: %s\n", args[1], resp.Header.Get("X-Klique-Pointer"))
				return nil
			}
			want := resp.Header.Get("X-Klique-SHA256")
			h := sha256.New()
			if out == "-" {
				if _, err := io.Copy(io.MultiWriter(c.Out, h), resp.Body); err != nil {
					return err
				}
				if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
					return fmt.Errorf("artifact %s arrived with SHA-256 %s, not the %s it was stored with", args[1], got, want)
				}
				return nil
			}
			if out == "" {
				out = path.Base(args[1])
			}
			tmp, err := os.CreateTemp(filepath.Dir(out), ".klique-get-*")
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("download %s: %w", args[1], err)
			}
			if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
				return fmt.Errorf("artifact %s arrived with SHA-256 %s, not the %s it was stored with; nothing was written", args[1], got, want)
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return err
			}
			fmt.Fprintf(c.Err, "%s: %d bytes, sha256 %s (verified)\n", out, n, want)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "file", "f", "", "where to write it ('-': standard output)")
	return cmd
}

func newPutCmd(c *CLI) *cobra.Command {
	var pointer, contentType string
	var size int64
	cmd := &cobra.Command{
		Use:   "put RUN NAME FILE | put RUN NAME --pointer URL",
		Short: "Publish an artifact on a run of yours: a file, or a pointer to where it is",
		Long: `Publish FILE as the artifact NAME of a run of yours (its SHA-256 is sent
and checked by the server), or, with --pointer, register where an output
larger than the control plane's limit stays. A second publication of the
same name replaces the first.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if pointer != "" {
				return c.exactArgs(2, "give the run's ID and the artifact's name (with --pointer, no file)")(cmd, args)
			}
			return c.exactArgs(3, "give the run's ID, the artifact's name and the file (or --pointer URL)")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			if pointer != "" {
				in := gql.PublishArtifactPointerInput{Task: args[0], Name: args[1], Url: pointer}
				if size > 0 {
					n := int(size)
					in.Size = &n
				}
				if _, err := gql.PublishArtifactPointer(cmd.Context(), cl, in); err != nil {
					return err
				}
				fmt.Fprintf(c.Out, "pointer %s published: %s\n", args[1], pointer)
				return nil
			}
			f, err := os.Open(args[2])
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			n, err := io.Copy(h, f)
			if err != nil {
				return fmt.Errorf("read %s: %w", args[2], err)
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPut, artifactURL(cl.BaseURL, args[0], args[1]), f)
			if err != nil {
				return err
			}
			req.ContentLength = n
			sum := hex.EncodeToString(h.Sum(nil))
			req.Header.Set("X-Klique-SHA256", sum)
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			resp, err := artifactHTTP(cl, req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			fmt.Fprintf(c.Out, "artifact %s published: %d bytes, sha256 %s\n", args[1], n, sum)
			return nil
		},
	}
	cmd.Flags().StringVar(&pointer, "pointer", "", "publish a pointer to this URL or path instead of a file")
	cmd.Flags().Int64Var(&size, "size", 0, "with --pointer: the output's size in bytes, when known")
	cmd.Flags().StringVar(&contentType, "content-type", "", "the file's media type (default application/octet-stream)")
	return cmd
}

// InputRefs reads --input NAME=RUN/ARTIFACT flags (the artifact's name
// may hold '/') as the inputs of EnqueueTaskInput.
func (c *CLI) InputRefs(flags []string) ([]gql.TaskInputRef, error) {
	var out []gql.TaskInputRef
	for _, f := range flags {
		name, ref, ok := strings.Cut(f, "=")
		run, artifact, ok2 := strings.Cut(ref, "/")
		if !ok || !ok2 || name == "" || run == "" || artifact == "" {
			return nil, c.Usage("--input %q: write it NAME=RUN/ARTIFACT, such as weights=01930f2e-.../model/weights.bin", f)
		}
		out = append(out, gql.TaskInputRef{Name: name, TaskId: run, Artifact: artifact})
	}
	return out, nil
}

// exactArgs refuses another number of arguments than n as a usage error
// (exit status 2), saying what to give.
func (c *CLI) exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return c.Usage("%s", msg)
		}
		return nil
	}
}

// SetInputs puts --input flags, when there are any, in an
// EnqueueTaskInput's inputs.
func (c *CLI) SetInputs(in *gql.EnqueueTaskInput, flags []string) error {
	if len(flags) == 0 {
		return nil
	}
	refs, err := c.InputRefs(flags)
	if err == nil {
		in.Inputs = refs
	}
	return err
}

// From gives the commands the binary's client and output.
func From(c *cli.CLI) *CLI {
	return &CLI{Client: c.Client, Out: c.Out, Err: c.Err, Output: func() string { return c.Output },
		Print: c.Print, Table: c.Table, Usage: cli.Usagef}
}

// Commands is the artifact command group, for the binary's root.
func Commands(c *cli.CLI) []*cobra.Command { return []*cobra.Command{New(From(c))} }
