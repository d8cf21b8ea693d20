package graph_test

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"testing"

	"github.com/klique-ai/klique/graph"
	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// These tests call the resolvers directly, over a real platform service
// (platformtest, on SQLite) and without HTTP: what they check is the
// resolvers' own work (pagination, cursors, input mapping, field
// resolvers) and that they pass the caller through to the service's
// rules. internal/server checks the same through the whole HTTP stack.

// resolvers is the example estate behind the root resolver.
func resolvers(t *testing.T) (*platformtest.Bundle, graph.ResolverRoot) {
	t.Helper()
	b := platformtest.SQLite(t)
	b.ApplyExample(t)
	return b, graph.NewResolver(b.Svc)
}

func ptr[T any](v T) *T { return &v }

// computeResources pages through the computeResources query, first at a
// time, and returns each as "group/name".
func computeResources(t *testing.T, r graph.ResolverRoot, ctx context.Context, first int) []string {
	t.Helper()
	var out []string
	var after *string
	for page := 0; page < 50; page++ {
		conn, err := r.Query().ComputeResources(ctx, &first, after)
		platformtest.Must(t, err)
		if len(conn.Edges) > first {
			t.Fatalf("a page of %d holds %d compute resources", first, len(conn.Edges))
		}
		for _, e := range conn.Edges {
			g, err := r.ComputeResource().Group(ctx, e.Node)
			platformtest.Must(t, err)
			out = append(out, g.Name+"/"+e.Node.Name)
		}
		if !conn.PageInfo.HasNextPage {
			return out
		}
		after = conn.PageInfo.EndCursor
	}
	t.Fatalf("computeResources never reached its last page: %v", out)
	return nil
}

func TestResolversShowAMemberOnlyTheirGroupsComputeResources(t *testing.T) {
	b, r := resolvers(t)
	vic := b.User(t, "vic", model.RoleMember, "vision")
	bo := b.User(t, "bo", model.RoleMember, "ml-research", "vision")

	got := computeResources(t, r, vic, 50)
	want := []string{"vision/1 GPU", "vision/8 GPUs", "vision/half GPU"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("a member of vision sees %v, want %v", got, want)
	}

	// "1 GPU" and others exist in both of bo's groups: a page of one at a
	// time must still give each exactly once.
	got = computeResources(t, r, bo, 1)
	sort.Strings(got)
	want = []string{
		"ml-research/1 A100", "ml-research/1 GPU", "ml-research/8 GPUs", "ml-research/GPU eighth",
		"ml-research/half GPU", "ml-research/multi-node training", "vision/1 GPU", "vision/8 GPUs", "vision/half GPU",
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("a member of ml-research and vision, a page at a time, sees %v, want %v", got, want)
	}

	if n := len(computeResources(t, r, b.Admin, 50)); n != 12 {
		t.Errorf("the admin sees %d compute resources, want all 12", n)
	}

	// Another group's compute resource, asked for by id, is not found.
	var other string
	conn, err := r.Query().ComputeResources(b.Admin, ptr(50), nil)
	platformtest.Must(t, err)
	for _, e := range conn.Edges {
		if g, _ := r.ComputeResource().Group(b.Admin, e.Node); g.Name == "ml-research" {
			other = e.Node.ID
		}
	}
	_, err = r.Query().ComputeResource(vic, other)
	platformtest.WantError(t, err, platform.CodeNotFound)
}

func TestResolversRefuseANonAdminsCreatePoolAndChangeNothing(t *testing.T) {
	b, r := resolvers(t)
	lead := b.User(t, "lena", model.RoleMember, "lead:ml-research")
	in := platform.PoolInput{Name: ptr("new-pool"), Kind: ptr(model.PoolKubernetes), CapacityGPUs: ptr(8), GPUClass: ptr("h100")}
	poolNames := func() string {
		conn, err := r.Query().Pools(b.Admin, nil, nil)
		platformtest.Must(t, err)
		var names []string
		for _, e := range conn.Edges {
			names = append(names, e.Node.Name)
		}
		return strings.Join(names, ",")
	}
	before, audit := poolNames(), len(b.AuditLog(t))

	payload, err := r.Mutation().CreatePool(lead, in)
	platformtest.WantError(t, err, platform.CodeForbidden)
	if payload != nil {
		t.Errorf("a refused createPool returned %+v", payload)
	}
	if after := poolNames(); after != before {
		t.Errorf("a refused createPool changed the pools from %s to %s", before, after)
	}
	if n := len(b.AuditLog(t)); n != audit {
		t.Errorf("a refused createPool wrote %d audit entries", n-audit)
	}

	payload, err = r.Mutation().CreatePool(b.Admin, in)
	platformtest.Must(t, err)
	if payload.Pool == nil || payload.Pool.Name != "new-pool" || payload.Pool.CapacityGPUs != 8 || len(payload.Changes) == 0 {
		t.Fatalf("createPool as the admin = %+v", payload)
	}
	class, err := r.Pool().GpuClass(b.Admin, payload.Pool)
	platformtest.Must(t, err)
	if class.Name != "h100" {
		t.Errorf("the new pool's gpuClass is %s, want h100", class.Name)
	}
	if after := poolNames(); after != "bare-metal,cloud-burst,new-pool,onprem-k8s,slurm-a100" {
		t.Errorf("after createPool the pools are %s", after)
	}
}

func TestResolversEnqueueThenListTasks(t *testing.T) {
	b, r := resolvers(t)
	rita := b.User(t, "rita", model.RoleMember, "ml-research")
	vic := b.User(t, "vic", model.RoleMember, "vision")

	var ids []string
	for _, name := range []string{"first", "second", "third"} {
		task, err := r.Mutation().EnqueueTask(rita, gqlmodel.EnqueueTaskInput{
			Name: name, Project: ptr("fraud-models"), ComputeResource: "1 GPU",
			Command: []string{"python", "train.py"}, Parameters: map[string]string{"lr": "0.1"},
		})
		platformtest.Must(t, err)
		if task.Status != model.TaskQueued || task.Spec.Parameters["lr"] != "0.1" || task.Spec.Command[0] != "python" {
			t.Fatalf("enqueued %+v", task)
		}
		ids = append(ids, task.ID)
	}

	// Newest first, two to a page.
	var got []string
	var after *string
	for page := 0; page < 5; page++ {
		conn, err := r.Query().Tasks(rita, &gqlmodel.TaskFilter{Mine: ptr(true)}, ptr(2), after)
		platformtest.Must(t, err)
		for _, e := range conn.Edges {
			got = append(got, e.Node.Name)
		}
		if !conn.PageInfo.HasNextPage {
			break
		}
		after = conn.PageInfo.EndCursor
	}
	if strings.Join(got, ",") != "third,second,first" {
		t.Errorf("tasks in pages of two: %v, want third,second,first", got)
	}

	task, err := r.Query().Task(rita, ids[0])
	platformtest.Must(t, err)
	tr := r.Task()
	owner, err := tr.Owner(rita, task)
	platformtest.Must(t, err)
	cr, err := tr.ComputeResource(rita, task)
	platformtest.Must(t, err)
	group, err := tr.Group(rita, task)
	platformtest.Must(t, err)
	pos, err := tr.Position(rita, task)
	platformtest.Must(t, err)
	reason, err := tr.Reason(rita, task)
	platformtest.Must(t, err)
	if owner.Name != "rita" || cr.Name != "1 GPU" || group.Name != "ml-research" || pos == nil || *pos != 1 || reason == "" {
		t.Errorf("the first task: owner %s, compute resource %s, group %s, position %v, reason %q",
			owner.Name, cr.Name, group.Name, pos, reason)
	}

	// Another group's member sees none of them.
	conn, err := r.Query().Tasks(vic, nil, nil, nil)
	platformtest.Must(t, err)
	if len(conn.Edges) != 0 {
		t.Errorf("a member of vision lists %d of ml-research's tasks", len(conn.Edges))
	}
	_, err = r.Query().Task(vic, ids[0])
	platformtest.WantError(t, err, platform.CodeNotFound)
}

func TestResolversAnswerBadPagingWithBadUserInput(t *testing.T) {
	b, r := resolvers(t)
	q := r.Query()
	notACursor := ptr("not a cursor!")
	notASequence := ptr(base64.RawURLEncoding.EncodeToString([]byte("foo")))
	for name, call := range map[string]func() error{
		"pools after a cursor that is not base64": func() error {
			_, err := q.Pools(b.Admin, nil, notACursor)
			return err
		},
		"compute resources after a cursor that is not base64": func() error {
			_, err := q.ComputeResources(b.Admin, nil, notACursor)
			return err
		},
		"tasks after a cursor that is not base64": func() error {
			_, err := q.Tasks(b.Admin, nil, nil, notACursor)
			return err
		},
		"tasks after a cursor that is not a sequence number": func() error {
			_, err := q.Tasks(b.Admin, nil, nil, notASequence)
			return err
		},
		"audit log after a cursor that is not a sequence number": func() error {
			_, err := q.AuditLog(b.Admin, nil, nil, notASequence)
			return err
		},
		"a negative page of pools": func() error {
			_, err := q.Pools(b.Admin, ptr(-1), nil)
			return err
		},
		"a page of tasks over the largest": func() error {
			_, err := q.Tasks(b.Admin, nil, ptr(100000), nil)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			platformtest.WantError(t, call(), platform.CodeInvalid)
		})
	}
}

func TestResolversMeIsTheCallerAndTheirScope(t *testing.T) {
	b, r := resolvers(t)
	b.CreateUser(t, "rita", model.RoleMember, "lead:ml-research", "vision")
	for _, tc := range []struct {
		project, wantProject string
	}{{"", ""}, {"fraud-models", "fraud-models"}} {
		me, err := r.Query().Me(b.Key(t, "rita", tc.project))
		platformtest.Must(t, err)
		var groups []string
		for _, m := range me.Groups {
			g, err := b.Svc.Group(b.Admin, m.GroupID)
			platformtest.Must(t, err)
			groups = append(groups, g.Name+":"+string(m.Role))
		}
		sort.Strings(groups)
		project := ""
		if me.Project != nil {
			project = me.Project.Name
		}
		if me.User.Name != "rita" || me.Tenant.ID != b.Tenant || project != tc.wantProject ||
			strings.Join(groups, ",") != "ml-research:"+string(model.GroupRoleLead)+",vision:"+string(model.GroupRoleMember) {
			t.Errorf("me with a key scoped to %q: user %s, tenant %s, project %q, groups %v",
				tc.project, me.User.Name, me.Tenant.ID, project, groups)
		}
	}
	_, err := r.Query().Me(context.Background())
	platformtest.WantError(t, err, platform.CodeUnauthenticated)
}
