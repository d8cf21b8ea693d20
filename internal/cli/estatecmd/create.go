package estatecmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
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
			r := gql.Role(strings.ToUpper(role))
			in := gql.CreateUserInput{Name: args[0], Role: &r, Service: &service, Email: cli.Ptr(email), DisplayName: cli.Ptr(displayName)}
			for _, g := range groups {
				name, r, _ := strings.Cut(g, ":")
				if r == "" {
					r = "member"
				}
				gr := gql.GroupRole(strings.ToUpper(r))
				in.Groups = append(in.Groups, gql.GroupGrantInput{Group: name, Role: &gr})
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateUser(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(out.CreateUser)
			}
			fmt.Fprintf(c.Out, "created user %s (%s)\n", out.CreateUser.Name, strings.ToLower(string(out.CreateUser.Role)))
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
			in := gql.CreateAPIKeyInput{Name: cli.Ptr(name), User: cli.Ptr(user), Project: cli.Ptr(project)}
			if expires > 0 {
				in.ExpiresAt = cli.Ptr(time.Now().Add(expires).UTC().Format(time.RFC3339))
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateAPIKey(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			k := out.CreateAPIKey
			fmt.Fprintf(c.Err, "created API key %q for %s; it is shown once, below: store it now\n", k.ApiKey.Name, k.ApiKey.User.Name)
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
	var description, department string
	cmd := &cobra.Command{
		Use:   "group NAME",
		Short: "Create a group (admins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateGroup(cmd.Context(), cl, gql.GroupInput{Name: &args[0], Description: &description, Department: cli.Ptr(department)})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.Out, "created group %s\n", out.CreateGroup.Group.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the group is")
	cmd.Flags().StringVar(&department, "department", "", "the department the group sits in (default: directly under the tenant)")
	return cmd
}

func newCreateProjectCmd(c *cli.CLI) *cobra.Command {
	var description, group, output string
	cmd := &cobra.Command{
		Use:   "project NAME",
		Short: "Create a project (admins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := gql.ProjectInput{Name: &args[0], Description: &description, OutputDestination: &output, Group: cli.Ptr(group)}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateProject(cmd.Context(), cl, in)
			if err != nil {
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
