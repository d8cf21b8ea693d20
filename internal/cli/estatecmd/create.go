package estatecmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/taskcmd"

	"github.com/spf13/cobra"
)

func newCreateCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create users, API keys, groups, projects, worker credentials and tasks",
	}
	cmd.AddCommand(newCreateUserCmd(c), newCreateAPIKeyCmd(c), newCreateGroupCmd(c), newCreateProjectCmd(c),
		newCreateWorkerCredentialCmd(c), newCreateTaskCmd(c))
	return cmd
}

// newCreateTaskCmd is `klique enqueue` under the name people who know
// kubectl try first; the same flags, checks and output.
func newCreateTaskCmd(c *cli.CLI) *cobra.Command {
	cmd := taskcmd.NewEnqueueCmd(c)
	cmd.Use = "task --resource NAME --project NAME [flags] [-- COMMAND...]"
	cmd.Short = "Send a task to a compute resource (the same as klique enqueue)"
	cmd.Example = strings.ReplaceAll(cmd.Example, "klique enqueue", "klique create task")
	return cmd
}

func newCreateUserCmd(c *cli.CLI) *cobra.Command {
	var role, email, displayName string
	var groups []string
	var service bool
	cmd := &cobra.Command{
		Use:   "user NAME",
		Short: "Create a user (admins)",
		Example: `  klique create user alice --group ml-research
  klique create user bob --group vision:lead
  klique create user ci-bot --service --group ml-research`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := map[string]any{"name": args[0], "role": strings.ToUpper(role), "service": service}
			if email != "" {
				in["email"] = email
			}
			if displayName != "" {
				in["displayName"] = displayName
			}
			var grants []map[string]any
			for _, g := range groups {
				name, r, _ := strings.Cut(g, ":")
				if r == "" {
					r = "member"
				}
				grants = append(grants, map[string]any{"group": name, "role": strings.ToUpper(r)})
			}
			if grants != nil {
				in["groups"] = grants
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ CreateUser map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($in: CreateUserInput!) { createUser(input: $in) { id name role groups { group { name } role } } }`,
				map[string]any{"in": in}, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.CreateUser)
			}
			fmt.Fprintf(c.Out, "created user %s (%s)\n", cli.Str(out.CreateUser, "name"), strings.ToLower(cli.Str(out.CreateUser, "role")))
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "member", "tenant role: member, viewer or tenant_admin")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "group to join, as NAME or NAME:lead (repeatable)")
	cmd.Flags().BoolVar(&service, "service", false, "a service user, for automation (API keys only)")
	cmd.Flags().StringVar(&email, "email", "", "email address")
	cmd.Flags().StringVar(&displayName, "display-name", "", "display name")
	return cmd
}

func newCreateAPIKeyCmd(c *cli.CLI) *cobra.Command {
	var user, project, name string
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "apikey",
		Short: "Create an API key; the key is printed once, on standard output",
		Example: `  klique create apikey --name laptop > my.key
  klique create apikey --user alice > alice.key      # admins, for another user
  klique create apikey --project fraud-models --expires 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := map[string]any{}
			if name != "" {
				in["name"] = name
			}
			if user != "" {
				in["user"] = user
			}
			if project != "" {
				in["project"] = project
			}
			if expires > 0 {
				in["expiresAt"] = time.Now().Add(expires).UTC().Format(time.RFC3339)
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				CreateAPIKey struct {
					Secret string
					APIKey struct {
						Name, Prefix string
						User         struct{ Name string }
					} `json:"apiKey"`
				} `json:"createAPIKey"`
			}
			if err := cl.Do(cmd.Context(), `mutation($in: CreateAPIKeyInput!) { createAPIKey(input: $in) { secret apiKey { name prefix user { name } } } }`,
				map[string]any{"in": in}, &out); err != nil {
				return err
			}
			k := out.CreateAPIKey
			fmt.Fprintf(c.Err, "created API key %q for %s; it is shown once, below: store it now\n", k.APIKey.Name, k.APIKey.User.Name)
			fmt.Fprintln(c.Out, k.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "whose key (default: yours; another user's for admins)")
	cmd.Flags().StringVar(&project, "project", "", "scope the key to one project")
	cmd.Flags().StringVar(&name, "name", "", "a name to tell the key apart")
	cmd.Flags().DurationVar(&expires, "expires", 0, "expire the key after this long (e.g. 720h)")
	return cmd
}

func newCreateGroupCmd(c *cli.CLI) *cobra.Command {
	var description string
	cmd := &cobra.Command{
		Use:   "group NAME",
		Short: "Create a group (admins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				CreateGroup struct{ Group struct{ Name string } }
			}
			if err := cl.Do(cmd.Context(), `mutation($in: GroupInput!) { createGroup(input: $in) { group { name } } }`,
				map[string]any{"in": map[string]any{"name": args[0], "description": description}}, &out); err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "created group %s\n", out.CreateGroup.Group.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the group is")
	return cmd
}

func newCreateProjectCmd(c *cli.CLI) *cobra.Command {
	var description, group, output string
	cmd := &cobra.Command{
		Use:   "project NAME",
		Short: "Create a project (admins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := map[string]any{"name": args[0], "description": description, "outputDestination": output}
			if group != "" {
				in["group"] = group
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				CreateProject struct{ Project struct{ Name string } }
			}
			if err := cl.Do(cmd.Context(), `mutation($in: ProjectInput!) { createProject(input: $in) { project { name } } }`,
				map[string]any{"in": in}, &out); err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "created project %s\n", out.CreateProject.Project.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the project is")
	cmd.Flags().StringVar(&group, "group", "", "restrict the project to one group")
	cmd.Flags().StringVar(&output, "output-destination", "", "where tasks write outputs (directory or bucket URL)")
	return cmd
}
