package estatecmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Khan/genqlient/graphql"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"
)

// A kind `klique get` lists: its header, its list query with each item
// as a table row, and, when set, the query that shows one by name or id.
type getKind struct {
	names  []string
	header []string
	list   func(ctx context.Context, cl graphql.Client, f *gql.TaskFilter) (items any, rows [][]string, err error)
	one    func(ctx context.Context, cl graphql.Client, id string) (any, error)
}

// listing is a getKind's list: the items op reads, and each as a row. An
// empty list is nil, printed as null in -o json.
func listing[R, T any](op func(context.Context, graphql.Client, *gql.TaskFilter) (R, error), items func(R) []T, row func(T) []string) func(context.Context, graphql.Client, *gql.TaskFilter) (any, [][]string, error) {
	return func(ctx context.Context, cl graphql.Client, f *gql.TaskFilter) (any, [][]string, error) {
		r, err := op(ctx, cl, f)
		if err != nil {
			return nil, nil, err
		}
		list := items(r)
		var rows [][]string
		for _, it := range list {
			rows = append(rows, row(it))
		}
		if len(list) == 0 {
			list = nil
		}
		return list, rows, nil
	}
}

// unfiltered is a list query of a kind without a filter.
func unfiltered[R any](op func(context.Context, graphql.Client) (R, error)) func(context.Context, graphql.Client, *gql.TaskFilter) (R, error) {
	return func(ctx context.Context, cl graphql.Client, _ *gql.TaskFilter) (R, error) { return op(ctx, cl) }
}

// nodes takes the items of a connection's edges.
func nodes[T, E any, PE interface {
	*E
	GetNode() T
}](edges []E) []T {
	out := make([]T, 0, len(edges))
	for i := range edges {
		out = append(out, PE(&edges[i]).GetNode())
	}
	return out
}

// memberNames lists a group's members or a user's groups, a lead marked.
func memberNames(n int, at func(int) (name string, role gql.GroupRole)) string {
	var out []string
	for i := range n {
		name, role := at(i)
		if role == gql.GroupRoleLead {
			name += " (lead)"
		}
		out = append(out, name)
	}
	return cli.OrDash(strings.Join(out, ", "))
}

// names joins the names of a list of objects, or says "-".
func names[T interface{ GetName() string }](list []T) string {
	var out []string
	for _, x := range list {
		out = append(out, x.GetName())
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

var kinds = []getKind{
	{
		names:  []string{"pools", "pool"},
		header: []string{"NAME", "KIND", "CAPACITY", "GPU CLASS", "GPU MEMORY", "REGION", "EXECUTION PRIORITY"},
		list: listing(unfiltered(gql.Pools), func(r *gql.PoolsResponse) []gql.PoolRow { return nodes[gql.PoolRow](r.Pools.Edges) },
			func(p gql.PoolRow) []string {
				return []string{p.Name, strings.ToLower(string(p.Kind)), cli.Text(p.CapacityGpus), p.GpuClass.Name,
					cli.Text(p.GpuMemoryGb) + " GB", cli.OrDash(p.Region), names(pointers(p.ExecutionPriority))}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Pool(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"gpuclasses", "gpuclass", "classes"},
		header: []string{"NAME", "MEMORY", "PRICE PER GPU-HOUR"},
		list: listing(unfiltered(gql.GpuClasses), func(r *gql.GpuClassesResponse) []gql.GPUClassRow { return nodes[gql.GPUClassRow](r.GpuClasses.Edges) },
			func(g gql.GPUClassRow) []string {
				return []string{g.Name, cli.Text(g.MemoryGb) + " GB", cli.Text(g.PricePerGpuHour) + " " + g.Currency}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.GpuClass(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"profiles", "profile"},
		header: []string{"NAME", "SIZE", "TIME WEIGHT", "NEEDS", "POOLS (IN ORDER)"},
		list: listing(unfiltered(gql.Profiles), func(r *gql.ProfilesResponse) []gql.ProfileRow { return nodes[gql.ProfileRow](r.Profiles.Edges) },
			func(p gql.ProfileRow) []string {
				size := p.Size.Text
				if p.SizeParameter != "" {
					size = "from " + p.SizeParameter + " (default " + size + ")"
				}
				needs := "-"
				if p.GpuClass != nil && p.GpuClass.Name != "" {
					needs = p.GpuClass.Name
				} else if p.MinGpuMemoryGb != 0 {
					needs = ">= " + cli.Text(p.MinGpuMemoryGb) + " GB"
				}
				return []string{p.Name, size, cli.Text(p.TimeWeight), needs, names(pointers(p.Pools))}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Profile(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"policies", "policy", "resourcepolicies"},
		header: []string{"GROUP", "RESERVATION", "LIMIT", "TIME BUDGET", "COMPUTE RESOURCES"},
		list: listing(unfiltered(gql.ResourcePolicies), func(r *gql.ResourcePoliciesResponse) []gql.ResourcePolicyRow {
			return nodes[gql.ResourcePolicyRow](r.ResourcePolicies.Edges)
		}, func(p gql.ResourcePolicyRow) []string {
			budget := "-"
			if b := p.TimeBudget; b != nil {
				budget = cli.Text(b.Hours) + " h per " + strings.ToLower(string(b.Period))
			}
			return []string{p.Group.Name, cli.Text(p.ReservationGpus), cli.Text(p.LimitGpus), budget, names(pointers(p.ComputeResources))}
		}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.ResourcePolicy(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"computeresources", "computeresource", "cr", "crs", "queues"},
		header: []string{"NAME", "GROUP", "PROFILE", "SIZE", "QUEUED"},
		list: listing(unfiltered(gql.ComputeResources), func(r *gql.ComputeResourcesResponse) []gql.ComputeResourceRow {
			return nodes[gql.ComputeResourceRow](r.ComputeResources.Edges)
		}, func(c gql.ComputeResourceRow) []string {
			return []string{c.Name, c.Group.Name, c.Profile.Name, c.Size.Text, cli.Text(c.QueuedTasks)}
		}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.ComputeResource(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"projects", "project"},
		header: []string{"NAME", "GROUP", "OUTPUT DESTINATION"},
		list: listing(unfiltered(gql.Projects), func(r *gql.ProjectsResponse) []gql.ProjectRow { return nodes[gql.ProjectRow](r.Projects.Edges) },
			func(p gql.ProjectRow) []string {
				group := ""
				if p.Group != nil {
					group = p.Group.Name
				}
				return []string{p.Name, cli.OrDash(group), cli.OrDash(p.OutputDestination)}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Project(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"groups", "group"},
		header: []string{"NAME", "RESERVATION", "LIMIT", "MEMBERS"},
		list: listing(unfiltered(gql.Groups), func(r *gql.GroupsResponse) []gql.GroupRow { return nodes[gql.GroupRow](r.Groups.Edges) },
			func(g gql.GroupRow) []string {
				reservation, limit := "-", "-"
				if g.Policy != nil {
					reservation, limit = cli.Text(g.Policy.ReservationGpus), cli.Text(g.Policy.LimitGpus)
				}
				members := memberNames(len(g.Members), func(i int) (string, gql.GroupRole) { return g.Members[i].User.Name, g.Members[i].Role })
				return []string{g.Name, reservation, limit, members}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Group(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"departments", "department", "depts", "dept"},
		header: []string{"NAME", "PARENT", "RESERVATION", "LIMIT", "EFFECTIVE LIMIT", "WEIGHT", "HOLDS"},
		list: listing(unfiltered(gql.Departments), func(r *gql.DepartmentsResponse) []gql.DepartmentRow { return r.Departments },
			func(d gql.DepartmentRow) []string {
				parent, reservation, limit, weight, effective := "-", cli.Text(d.ReservedGpus), "-", "-", "-"
				if d.Parent != nil {
					parent = d.Parent.Name
				}
				if d.Policy != nil {
					limit, weight = cli.Text(d.Policy.LimitGpus), cli.Text(d.Policy.Weight)
				}
				if d.EffectiveLimitGpus != nil {
					effective = cli.Text(*d.EffectiveLimitGpus)
				}
				var holds []string
				for _, c := range d.Departments {
					holds = append(holds, c.Name+"/")
				}
				for _, g := range d.Groups {
					holds = append(holds, g.Name)
				}
				return []string{d.Name, parent, reservation, limit, effective, weight, cli.OrDash(strings.Join(holds, ", "))}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Department(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"users", "user"},
		header: []string{"NAME", "ROLE", "GROUPS", "STATE"},
		list: listing(unfiltered(gql.Users), func(r *gql.UsersResponse) []gql.UserRow { return nodes[gql.UserRow](r.Users.Edges) },
			func(u gql.UserRow) []string {
				groups := memberNames(len(u.Groups), func(i int) (string, gql.GroupRole) { return u.Groups[i].Group.Name, u.Groups[i].Role })
				state := "active"
				if u.Disabled {
					state = "disabled"
				}
				role := strings.ToLower(string(u.Role))
				if u.Service {
					role += ", service"
				}
				return []string{u.Name, role, groups, state}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.User(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"tasks", "task"},
		header: []string{"ID", "NAME", "STATUS", "POSITION", "COMPUTE RESOURCE", "GROUP", "OWNER", "SIZE", "REASON"},
		list: listing(gql.Tasks, func(r *gql.TasksResponse) []gql.TaskRow { return nodes[gql.TaskRow](r.Tasks.Edges) },
			func(t gql.TaskRow) []string {
				resource, group := "", ""
				if t.ComputeResource != nil {
					resource = t.ComputeResource.Name
				}
				if t.Group != nil {
					group = t.Group.Name
				}
				return []string{t.Id, t.Name, strings.ToLower(string(t.Status)), cli.OrDash(cli.Opt(t.Position)),
					cli.OrDash(resource), cli.OrDash(group), t.Owner.Name, t.Size.Text, t.Reason}
			}),
		one: func(ctx context.Context, cl graphql.Client, id string) (any, error) {
			r, err := gql.Task(ctx, cl, id)
			return r.GetItem(), err
		},
	},
	{
		names:  []string{"apikeys", "apikey", "keys"},
		header: []string{"ID", "NAME", "PREFIX", "PROJECT", "CREATED", "EXPIRES", "LAST USED", "ACTIVE"},
		list: listing(unfiltered(gql.APIKeys), func(r *gql.APIKeysResponse) []gql.APIKeyRow { return nodes[gql.APIKeyRow](r.ApiKeys.Edges) },
			func(k gql.APIKeyRow) []string {
				project := ""
				if k.Project != nil {
					project = k.Project.Name
				}
				return []string{k.Id, k.Name, k.Prefix + "…", cli.OrDash(project), k.CreatedAt,
					cli.OrDash(cli.Opt(k.ExpiresAt)), cli.OrDash(cli.Opt(k.LastUsedAt)), cli.Text(k.Active)}
			}),
	},
	{
		names:  []string{"workers", "worker"},
		header: []string{"HOSTNAME", "POOL", "MODE", "GPUS", "STATE", "LAST HEARTBEAT", "TASKS"},
		list: listing(unfiltered(gql.Workers), func(r *gql.WorkersResponse) []gql.WorkerRow { return r.Workers },
			func(w gql.WorkerRow) []string {
				state := "online"
				if !w.Online {
					state = "lost"
				}
				pool := ""
				if w.Pool != nil {
					pool = w.Pool.Name
				}
				return []string{w.Hostname, pool, w.Mode, fmt.Sprint(len(w.Gpus)), state, w.LastHeartbeatAt, fmt.Sprint(len(w.Tasks))}
			}),
	},
	{
		names:  []string{"warnings"},
		header: []string{"OBJECT", "WARNING"},
		list: listing(unfiltered(gql.EstateWarnings), func(r *gql.EstateWarningsResponse) []gql.WarningRow { return r.EstateWarnings },
			func(w gql.WarningRow) []string { return []string{w.Object, w.Message} }),
	},
	{
		names:  []string{"audit"},
		header: []string{"AT", "ACTOR", "CHANNEL", "ACTION", "OBJECT", "DETAIL"},
		list: listing(unfiltered(gql.AuditLog), func(r *gql.AuditLogResponse) []gql.AuditRow { return nodes[gql.AuditRow](r.AuditLog.Edges) },
			func(a gql.AuditRow) []string {
				return []string{a.At, a.Actor, a.Channel, a.Action, a.ObjectKind + " " + a.ObjectName, a.Detail}
			}),
	},
}

// pointers is a list as pointers, whose GetName methods names reads.
func pointers[T any](list []T) []*T {
	out := make([]*T, len(list))
	for i := range list {
		out[i] = &list[i]
	}
	return out
}

func findKind(name string) (*getKind, error) {
	name = strings.ToLower(strings.ReplaceAll(name, "-", ""))
	var every []string
	for i := range kinds {
		for _, n := range kinds[i].names {
			if n == name {
				return &kinds[i], nil
			}
		}
		every = append(every, kinds[i].names...)
	}
	msg := fmt.Sprintf("unknown kind %q: use one of %s", name, kindNames())
	if s := cli.Nearest(name, every); len(s) > 0 {
		msg += " (did you mean " + cli.OrList(s, "") + "?)"
	}
	return nil, cli.Usage(errors.New(msg))
}

// kindNames lists the kinds `klique get` knows, by their plural names, for
// its help and its errors: one list, so neither forgets a kind.
func kindNames() string {
	var all []string
	for _, k := range kinds {
		all = append(all, k.names[0])
	}
	return strings.Join(all, ", ")
}

func newGetCmd(c *cli.CLI) *cobra.Command {
	var statuses []string
	var mine bool
	var resource, project string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME|ID]",
		Short: "List or show objects: " + kindNames(),
		Example: `  klique get pools
  klique get workers
  klique get computeresources
  klique get tasks --mine --status queued
  klique get task 01930f2e-...`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.Usagef("say which kind to get: %s", kindNames())
			}
			return cobra.RangeArgs(1, 2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := findKind(args[0])
			if err != nil {
				return err
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 2 {
				if k.one == nil {
					return cli.Usagef("%s are only listed; drop %q", k.names[0], args[1])
				}
				item, err := k.one(cmd.Context(), cl, args[1])
				if err != nil {
					return err
				}
				if c.Output == "table" {
					c.Output = "yaml"
				}
				return c.PrintData(item)
			}
			f := &gql.TaskFilter{Mine: &mine, ComputeResource: cli.Ptr(resource), Project: cli.Ptr(project)}
			for _, s := range statuses {
				f.Status = append(f.Status, gql.TaskStatus(strings.ToUpper(s)))
			}
			items, rows, err := k.list(cmd.Context(), cl, f)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(items)
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.Err, "no %s\n", k.names[0])
				return nil
			}
			c.Table(k.header, rows)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "tasks: only these statuses (queued, placed, running, completed, failed, aborted)")
	cmd.Flags().BoolVar(&mine, "mine", false, "tasks: only your own")
	cmd.Flags().StringVar(&resource, "resource", "", "tasks: only this compute resource (id)")
	cmd.Flags().StringVar(&project, "project", "", "tasks: only this project")
	return cmd
}
