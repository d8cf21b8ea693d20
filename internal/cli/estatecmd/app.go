package estatecmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
	"github.com/klique-ai/klique/internal/client"

	"github.com/spf13/cobra"
)

// launchDoc is a launch as `klique app export` writes it and `klique app
// launch --from` reads it: the LaunchAppInput of the GraphQL API, so a
// team keeps its standard endpoint in git.
type launchDoc struct {
	App             string         `json:"app"`
	ComputeResource string         `json:"computeResource,omitempty"`
	Group           string         `json:"group,omitempty"`
	Project         string         `json:"project,omitempty"`
	Values          map[string]any `json:"values"`
	Name            string         `json:"name,omitempty"`
	Route           string         `json:"route,omitempty"`
	ShareWithGroup  bool           `json:"shareWithGroup,omitempty"`
	ShareWithUsers  []string       `json:"shareWithUsers,omitempty"`
	// Shorter idle limits than the app's (minutes).
	IdleMinutes        *int `json:"idleMinutes,omitempty"`
	MaxLifetimeMinutes *int `json:"maxLifetimeMinutes,omitempty"`
}

// appInstanceOut is an app instance as -o json has always printed it.
type appInstanceOut struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	App     string `json:"app"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
	URL     string `json:"url"`
	Address string `json:"address"`
	// AddressRefused is why the router's address rule refused Address.
	AddressRefused string         `json:"addressRefused,omitempty"`
	Route          string         `json:"route"`
	Values         map[string]any `json:"values"`
}

// newAppCmd is `klique app`: the app catalogue and app instances. Every
// rule (the form's schema, locks, the launches switch, quotas) is the
// platform's; this only asks it.
func newAppCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{Use: "app", Short: "List, launch, export and stop apps: model servers and sessions on a compute resource"}
	cmd.AddCommand(newAppLsCmd(c), newAppLaunchCmd(c), newAppExportCmd(c), newAppOpenCmd(c), newAppStopCmd(c),
		newAppLockCmd(c, "lock", true), newAppLockCmd(c, "unlock", false))
	return cmd
}

func newAppLsCmd(c *cli.CLI) *cobra.Command {
	var instances, active bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the app catalogue, or with --instances the app instances you may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			if instances {
				var out struct{ AppInstances []appInstanceOut }
				r, err := gql.AppInstances(cmd.Context(), cl, &active)
				if err != nil {
					return err
				}
				if err := cli.Recast(r, &out); err != nil {
					return err
				}
				if c.Output != "table" {
					return c.Print(out.AppInstances)
				}
				var rows [][]string
				for _, i := range out.AppInstances {
					rows = append(rows, []string{i.ID, i.Name, i.App, i.State, i.URL})
				}
				c.Table([]string{"ID", "NAME", "APP", "STATE", "URL"}, rows)
				return nil
			}
			// As -o json has always printed it.
			var out struct {
				Apps []struct {
					Name, Description, Kind, Form string
					Locked, BuiltIn               bool
				}
			}
			r, err := gql.Apps(cmd.Context(), cl)
			if err != nil {
				return err
			}
			if err := cli.Recast(r, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.Apps)
			}
			var rows [][]string
			for _, a := range out.Apps {
				state := "open"
				if a.Locked {
					state = "locked"
				}
				rows = append(rows, []string{a.Name, a.Kind, state, a.Description})
			}
			c.Table([]string{"NAME", "KIND", "STATE", "DESCRIPTION"}, rows)
			return nil
		},
	}
	cmd.Flags().BoolVar(&instances, "instances", false, "list app instances instead of the catalogue")
	cmd.Flags().BoolVar(&active, "active", false, "with --instances: only those that have not ended")
	return cmd
}

// launchFlags are the flags launch and export share.
type launchFlags struct {
	resource, group, project, name, route, from string
	params, shareWith                           []string
	shareGroup                                  bool
	idleMinutes, maxLifetimeMinutes             int
}

func (f *launchFlags) add(cmd *cobra.Command, launch bool) {
	cmd.Flags().StringVar(&f.resource, "resource", "", "the compute resource, by name or id")
	cmd.Flags().StringVar(&f.group, "group", "", "whose compute resource, when its name is shared between your groups")
	cmd.Flags().StringVar(&f.project, "project", "", "the project the instance belongs to")
	cmd.Flags().StringArrayVar(&f.params, "param", nil, "a launch form value, k=v (v is read as JSON when it is JSON: 4096, true, [\"a\"]; else as text); repeatable")
	cmd.Flags().StringVar(&f.route, "route", "", "the static route the instance will serve")
	cmd.Flags().BoolVar(&f.shareGroup, "share-with-group", false, "let the members of the compute resource's group see and open it")
	cmd.Flags().StringArrayVar(&f.shareWith, "share-with", nil, "a user who may see and open it; repeatable")
	cmd.Flags().IntVar(&f.idleMinutes, "idle-minutes", 0, "stop it after this many idle minutes (at most the app's limit; default the app's)")
	cmd.Flags().IntVar(&f.maxLifetimeMinutes, "max-lifetime-minutes", 0, "stop it this many minutes after its start (at most the app's limit; default the app's)")
	if launch {
		cmd.Flags().StringVar(&f.name, "name", "", "the instance's name (default <app>-<user>-<n>)")
		cmd.Flags().StringVar(&f.from, "from", "", "a launch file written by 'klique app export' (flags override it)")
	}
}

// apply lays the flags over a launch document.
func (f *launchFlags) apply(d *launchDoc) error {
	for _, s := range []struct {
		v  string
		to *string
	}{{f.resource, &d.ComputeResource}, {f.group, &d.Group}, {f.project, &d.Project}, {f.name, &d.Name}, {f.route, &d.Route}} {
		if s.v != "" {
			*s.to = s.v
		}
	}
	if f.shareGroup {
		d.ShareWithGroup = true
	}
	if f.idleMinutes != 0 {
		d.IdleMinutes = &f.idleMinutes
	}
	if f.maxLifetimeMinutes != 0 {
		d.MaxLifetimeMinutes = &f.maxLifetimeMinutes
	}
	d.ShareWithUsers = append(d.ShareWithUsers, f.shareWith...)
	if d.Values == nil {
		d.Values = map[string]any{}
	}
	for _, p := range f.params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return cli.Usagef("--param %q: write it as name=value", p)
		}
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			x = v
		}
		d.Values[strings.TrimSpace(k)] = x
	}
	return nil
}

func newAppLaunchCmd(c *cli.CLI) *cobra.Command {
	var f launchFlags
	cmd := &cobra.Command{
		Use:   "launch [NAME]",
		Short: "Launch an app instance on a compute resource",
		Example: `  klique app launch vllm --resource "8 GPUs" --project fraud-models --param model=meta-llama/Llama-3.1-8B-Instruct --param context_length=8192
  klique app launch jupyterlab --resource "1 GPU" --share-with-group
  klique app launch --from launch.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d launchDoc
			if f.from != "" {
				b, err := os.ReadFile(f.from)
				if err != nil {
					return cli.Usagef("--from: %v", err)
				}
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&d); err != nil {
					return cli.Usagef("--from %s is not a launch file (%v); write one with 'klique app export NAME'", f.from, err)
				}
			}
			if len(args) == 1 {
				d.App = args[0]
			}
			if d.App == "" {
				return cli.Usagef("say which app to launch: klique app launch NAME (see 'klique app ls'), or --from FILE")
			}
			if err := f.apply(&d); err != nil {
				return err
			}
			if d.ComputeResource == "" {
				return cli.Usagef("say where to launch it: --resource NAME (see 'klique get computeresources')")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			// The launch file is LaunchAppInput's JSON.
			var in gql.LaunchAppInput
			if err := cli.Recast(d, &in); err != nil {
				return err
			}
			// An idempotency key makes a retry after a lost answer return
			// the instance the first request launched.
			r, err := gql.LaunchApp(client.WithIdempotencyKey(cmd.Context(), cli.NewIdempotencyKey()), cl, in)
			if err != nil {
				return err
			}
			var out struct{ LaunchApp appInstanceOut }
			if err := cli.Recast(r, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.LaunchApp)
			}
			i := out.LaunchApp
			fmt.Fprintf(c.Out, "%s\nlaunched %s (app %s): %s; it will be served at %s\n", i.ID, i.Name, i.App, i.State, i.URL)
			return nil
		},
	}
	f.add(cmd, true)
	return cmd
}

func newAppExportCmd(c *cli.CLI) *cobra.Command {
	var f launchFlags
	cmd := &cobra.Command{
		Use:   "export NAME",
		Short: "Write a launch file for an app: its form's defaults and the values given, as JSON",
		Example: `  klique app export vllm --resource "8 GPUs" --param model=meta-llama/Llama-3.1-8B-Instruct > launch.json
  klique app launch --from launch.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.AppForm(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			d := launchDoc{App: args[0], Values: map[string]any{}}
			var form struct {
				Properties map[string]struct {
					Default any `json:"default"`
				} `json:"properties"`
			}
			if err := json.Unmarshal([]byte(out.App.Form), &form); err == nil {
				for k, p := range form.Properties {
					if p.Default != nil {
						d.Values[k] = p.Default
					}
				}
			}
			if err := f.apply(&d); err != nil {
				return err
			}
			enc := json.NewEncoder(c.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(d)
		},
	}
	f.add(cmd, false)
	return cmd
}

// newAppOpenCmd is `klique app open ID`: the instance's URL on the control
// plane (the router serves it there) and its state, so a script can wait
// for ready before it opens it.
func newAppOpenCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "open ID",
		Short: "Print an app instance's URL and its state (ready once its health path answers)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.AppInstance(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			var out struct{ AppInstance appInstanceOut }
			if err := cli.Recast(r, &out); err != nil {
				return err
			}
			in := out.AppInstance
			if strings.HasPrefix(in.URL, "/") {
				in.URL = cl.BaseURL + in.URL // served by path on the control plane
			}
			if c.Output != "table" {
				return c.Print(in)
			}
			fmt.Fprintln(c.Out, in.URL)
			state := in.State
			if in.Address != "" {
				state += " at " + in.Address
			}
			if in.State != "ready" && in.Reason != "" {
				state += ": " + in.Reason
			}
			fmt.Fprintf(c.Out, "%s (%s): %s\n", in.Name, in.ID, state)
			if in.AddressRefused != "" {
				fmt.Fprintf(c.Out, "not dialled directly (reached through its worker's tunnel only): %s\n", in.AddressRefused)
			}
			return nil
		},
	}
}

func newAppStopCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "stop ID",
		Short: "Stop an app instance: its GPUs are released",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.StopApp(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			var out struct{ StopApp appInstanceOut }
			if err := cli.Recast(r, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.StopApp)
			}
			fmt.Fprintf(c.Out, "stopped %s (%s): %s\n", out.StopApp.Name, out.StopApp.ID, out.StopApp.Reason)
			return nil
		},
	}
}

func newAppLockCmd(c *cli.CLI, verb string, lock bool) *cobra.Command {
	short := "Lock an app (admins): it can no longer be launched"
	if !lock {
		short = "Unlock an app (admins)"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			if lock {
				_, err = gql.LockApp(cmd.Context(), cl, args[0])
			} else {
				_, err = gql.UnlockApp(cmd.Context(), cl, args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "app %s %sed\n", args[0], verb)
			return nil
		},
	}
}
