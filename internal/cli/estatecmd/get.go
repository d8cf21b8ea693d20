package estatecmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"
)

// A kind `klique get` lists: its query, and how to turn each item into a
// table row.
type getKind struct {
	names  []string
	query  string
	field  string
	header []string
	row    func(map[string]any) []string
	// one, when set, reads a single item by name or id.
	one string
}

var kinds = []getKind{
	{
		names: []string{"pools", "pool"},
		query: `{ pools(first: 500) { edges { node { id name kind capacityGpus gpuMemoryGb region gpuClass { name } executionPriority { name } } } } }`,
		field: "pools", header: []string{"NAME", "KIND", "CAPACITY", "GPU CLASS", "GPU MEMORY", "REGION", "EXECUTION PRIORITY"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "name"), strings.ToLower(cli.Str(m, "kind")), cli.Str(m, "capacityGpus"), cli.Str(m, "gpuClass", "name"),
				cli.Str(m, "gpuMemoryGb") + " GB", cli.OrDash(cli.Str(m, "region")), cli.Names(m, "executionPriority")}
		},
		one: `query($id: ID!) { item: pool(id: $id) { id name description kind capacityGpus gpuClass { name } gpuMemoryGb region labels executionPriority { name } createdAt updatedAt } }`,
	},
	{
		names: []string{"gpuclasses", "gpuclass", "classes"},
		query: `{ gpuClasses(first: 500) { edges { node { id name memoryGb pricePerGpuHour currency } } } }`,
		field: "gpuClasses", header: []string{"NAME", "MEMORY", "PRICE PER GPU-HOUR"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "name"), cli.Str(m, "memoryGb") + " GB", cli.Str(m, "pricePerGpuHour") + " " + cli.Str(m, "currency")}
		},
		one: `query($id: ID!) { item: gpuClass(id: $id) { id name description memoryGb pricePerGpuHour currency createdAt updatedAt } }`,
	},
	{
		names: []string{"profiles", "profile"},
		query: `{ profiles(first: 500) { edges { node { id name size { text } sizeParameter timeWeight gpuClass { name } minGpuMemoryGb pools { name } } } } }`,
		field: "profiles", header: []string{"NAME", "SIZE", "TIME WEIGHT", "NEEDS", "POOLS (IN ORDER)"},
		row: func(m map[string]any) []string {
			size := cli.Str(m, "size", "text")
			if p := cli.Str(m, "sizeParameter"); p != "" {
				size = "from " + p + " (default " + size + ")"
			}
			needs := "-"
			if c := cli.Str(m, "gpuClass", "name"); c != "" {
				needs = c
			} else if mem := cli.Str(m, "minGpuMemoryGb"); mem != "0" && mem != "" {
				needs = ">= " + mem + " GB"
			}
			return []string{cli.Str(m, "name"), size, cli.Str(m, "timeWeight"), needs, cli.Names(m, "pools")}
		},
		one: `query($id: ID!) { item: profile(id: $id) { id name description size { text nodes gpusPerNode totalGpus } sizeParameter gpuClass { name } minGpuMemoryGb timeWeight pools { name } queuingPriority { name group { name } } createdAt updatedAt } }`,
	},
	{
		names: []string{"policies", "policy", "resourcepolicies"},
		query: `{ resourcePolicies(first: 500) { edges { node { id group { name } reservationGpus limitGpus timeBudget { hours period } computeResources { name } } } } }`,
		field: "resourcePolicies", header: []string{"GROUP", "RESERVATION", "LIMIT", "TIME BUDGET", "COMPUTE RESOURCES"},
		row: func(m map[string]any) []string {
			budget := "-"
			if b, ok := m["timeBudget"].(map[string]any); ok {
				budget = cli.Str(b, "hours") + " h per " + strings.ToLower(cli.Str(b, "period"))
			}
			return []string{cli.Str(m, "group", "name"), cli.Str(m, "reservationGpus"), cli.Str(m, "limitGpus"), budget, cli.Names(m, "computeResources")}
		},
		one: `query($id: ID!) { item: resourcePolicy(id: $id) { id group { name } reservationGpus limitGpus timeBudget { hours period } lowWatermarkMinutes alertThresholdPercent computeResources { name profile { name } } createdAt updatedAt } }`,
	},
	{
		names: []string{"computeresources", "computeresource", "cr", "crs", "queues"},
		query: `{ computeResources(first: 500) { edges { node { id name group { name } profile { name } size { text } queuedTasks } } } }`,
		field: "computeResources", header: []string{"NAME", "GROUP", "PROFILE", "SIZE", "QUEUED"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "name"), cli.Str(m, "group", "name"), cli.Str(m, "profile", "name"), cli.Str(m, "size", "text"), cli.Str(m, "queuedTasks")}
		},
		one: `query($id: ID!) { item: computeResource(id: $id) { id name description group { name } profile { name pools { name } } size { text } queuedTasks createdAt } }`,
	},
	{
		names: []string{"projects", "project"},
		query: `{ projects(first: 500) { edges { node { id name group { name } outputDestination } } } }`,
		field: "projects", header: []string{"NAME", "GROUP", "OUTPUT DESTINATION"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "name"), cli.OrDash(cli.Str(m, "group", "name")), cli.OrDash(cli.Str(m, "outputDestination"))}
		},
		one: `query($id: ID!) { item: project(id: $id) { id name description group { name } outputDestination createdAt updatedAt } }`,
	},
	{
		names: []string{"groups", "group"},
		query: `{ groups(first: 500) { edges { node { id name description policy { reservationGpus limitGpus } members { user { name } role } } } } }`,
		field: "groups", header: []string{"NAME", "RESERVATION", "LIMIT", "MEMBERS"},
		row: func(m map[string]any) []string {
			var members []string
			list, _ := m["members"].([]any)
			for _, x := range list {
				mm, _ := x.(map[string]any)
				name := cli.Str(mm, "user", "name")
				if cli.Str(mm, "role") == "LEAD" {
					name += " (lead)"
				}
				members = append(members, name)
			}
			return []string{cli.Str(m, "name"), cli.OrDash(cli.Str(m, "policy", "reservationGpus")), cli.OrDash(cli.Str(m, "policy", "limitGpus")), cli.OrDash(strings.Join(members, ", "))}
		},
		one: `query($id: ID!) { item: group(id: $id) { id name description policy { reservationGpus limitGpus } members { user { name } role } createdAt } }`,
	},
	{
		names: []string{"users", "user"},
		query: `{ users(first: 500) { edges { node { id name role service disabled groups { group { name } role } } } } }`,
		field: "users", header: []string{"NAME", "ROLE", "GROUPS", "STATE"},
		row: func(m map[string]any) []string {
			var groups []string
			list, _ := m["groups"].([]any)
			for _, x := range list {
				mm, _ := x.(map[string]any)
				g := cli.Str(mm, "group", "name")
				if cli.Str(mm, "role") == "LEAD" {
					g += " (lead)"
				}
				groups = append(groups, g)
			}
			state := "active"
			if m["disabled"] == true {
				state = "disabled"
			}
			role := strings.ToLower(cli.Str(m, "role"))
			if m["service"] == true {
				role += ", service"
			}
			return []string{cli.Str(m, "name"), role, cli.OrDash(strings.Join(groups, ", ")), state}
		},
		one: `query($id: ID!) { item: user(id: $id) { id name displayName email role service disabled groups { group { name } role } createdAt } }`,
	},
	{
		names: []string{"tasks", "task"},
		query: `query($f: TaskFilter) { tasks(filter: $f, first: 200) { edges { node { id name status position reason computeResource { name } group { name } owner { name } size { text } createdAt } } } }`,
		field: "tasks", header: []string{"ID", "NAME", "STATUS", "POSITION", "COMPUTE RESOURCE", "GROUP", "OWNER", "SIZE", "REASON"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "id"), cli.Str(m, "name"), strings.ToLower(cli.Str(m, "status")), cli.OrDash(cli.Str(m, "position")),
				cli.OrDash(cli.Str(m, "computeResource", "name")), cli.OrDash(cli.Str(m, "group", "name")), cli.Str(m, "owner", "name"), cli.Str(m, "size", "text"), cli.Str(m, "reason")}
		},
		one: `query($id: ID!) { item: task(id: $id) { id name status reason position project { name } owner { name } computeResource { name } group { name } size { text }
			spec { command repository commit entryPoint workingDir packages image parameters env secrets inputs { name taskId artifact } } pool { name } worker { hostname } attempt retries
			exitCode outputs clonedFrom { id name } tags scheduledBy { id name } createdAt updatedAt placedAt startedAt finishedAt } }`,
	},
	{
		names: []string{"apikeys", "apikey", "keys"},
		query: `{ apiKeys(first: 500) { edges { node { id name prefix project { name } createdAt expiresAt lastUsedAt active } } } }`,
		field: "apiKeys", header: []string{"ID", "NAME", "PREFIX", "PROJECT", "CREATED", "EXPIRES", "LAST USED", "ACTIVE"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "id"), cli.Str(m, "name"), cli.Str(m, "prefix") + "…", cli.OrDash(cli.Str(m, "project", "name")), cli.Str(m, "createdAt"),
				cli.OrDash(cli.Str(m, "expiresAt")), cli.OrDash(cli.Str(m, "lastUsedAt")), cli.Str(m, "active")}
		},
	},
	{
		names: []string{"workers", "worker"},
		query: `{ workers { id hostname pool { name } mode gpus { index } online lastHeartbeatAt tasks { id } } }`,
		field: "workers", header: []string{"HOSTNAME", "POOL", "MODE", "GPUS", "STATE", "LAST HEARTBEAT", "TASKS"},
		row: func(m map[string]any) []string {
			state := "online"
			if m["online"] != true {
				state = "lost"
			}
			return []string{cli.Str(m, "hostname"), cli.Str(m, "pool", "name"), cli.Str(m, "mode"), fmt.Sprint(len(cli.AsList(m["gpus"]))),
				state, cli.Str(m, "lastHeartbeatAt"), fmt.Sprint(len(cli.AsList(m["tasks"])))}
		},
	},
	{
		names: []string{"warnings"},
		query: `{ estateWarnings { code object message } }`,
		field: "estateWarnings", header: []string{"OBJECT", "WARNING"},
		row: func(m map[string]any) []string { return []string{cli.Str(m, "object"), cli.Str(m, "message")} },
	},
	{
		names: []string{"audit"},
		query: `{ auditLog(first: 100) { edges { node { at actor channel action objectKind objectName detail } } } }`,
		field: "auditLog", header: []string{"AT", "ACTOR", "CHANNEL", "ACTION", "OBJECT", "DETAIL"},
		row: func(m map[string]any) []string {
			return []string{cli.Str(m, "at"), cli.Str(m, "actor"), cli.Str(m, "channel"), cli.Str(m, "action"), cli.Str(m, "objectKind") + " " + cli.Str(m, "objectName"), cli.Str(m, "detail")}
		},
	},
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
				if k.one == "" {
					return cli.Usagef("%s are only listed; drop %q", k.names[0], args[1])
				}
				var out struct{ Item map[string]any }
				if err := cl.Do(cmd.Context(), k.one, map[string]any{"id": args[1]}, &out); err != nil {
					return err
				}
				if c.Output == "table" {
					c.Output = "yaml"
				}
				return c.Print(out.Item)
			}
			vars := map[string]any{}
			if k.field == "tasks" {
				f := map[string]any{"mine": mine}
				for _, s := range statuses {
					f["status"] = append(cli.AsList(f["status"]), strings.ToUpper(s))
				}
				if resource != "" {
					f["computeResource"] = resource
				}
				if project != "" {
					f["project"] = project
				}
				vars["f"] = f
			}
			var out map[string]any
			if err := cl.Do(cmd.Context(), k.query, vars, &out); err != nil {
				return err
			}
			items := cli.Nodes(out[k.field])
			if c.Output != "table" {
				return c.Print(items)
			}
			var rows [][]string
			for _, it := range items {
				rows = append(rows, k.row(it))
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
