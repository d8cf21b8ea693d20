package platform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// testBundle is platformtest's bundle, with the helpers of this package's
// tests (a cast of users, a snapshot of what a refused change must leave
// alone) as its methods.
type testBundle struct {
	*platformtest.Bundle
}

// forEachStore runs fn against SQLite and PostgreSQL, as
// platformtest.ForEachStore does.
func forEachStore(t *testing.T, fn func(t *testing.T, b *testBundle), opts ...platformtest.Option) {
	t.Helper()
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) { fn(t, &testBundle{b}) }, opts...)
}

// people is the cast of the access and task tests, over the example estate.
type people struct {
	rita   context.Context // member of ml-research
	lead   context.Context // lead of ml-research
	vic    context.Context // member of vision
	both   context.Context // member of ml-research and vision
	viewer context.Context // viewer in ml-research
	nobody context.Context // member of no group
}

func (b *testBundle) people(t *testing.T) people {
	t.Helper()
	return people{
		rita:   b.User(t, "rita", model.RoleMember, "ml-research"),
		lead:   b.User(t, "lena", model.RoleMember, "lead:ml-research"),
		vic:    b.User(t, "vic", model.RoleMember, "vision"),
		both:   b.User(t, "bo", model.RoleMember, "ml-research", "vision"),
		viewer: b.User(t, "val", model.RoleViewer, "ml-research"),
		nobody: b.User(t, "nod", model.RoleMember),
	}
}

func userID(ctx context.Context) string {
	p, _ := identity.PrincipalFrom(ctx)
	return p.UserID
}

// snapshot is what a refused change must leave as it was.
type snapshot struct {
	estate *estate.Estate
	audit  int
}

func (b *testBundle) snapshot(t *testing.T) snapshot {
	t.Helper()
	e, err := b.Svc.Estate(b.Admin)
	if err != nil {
		t.Fatalf("load estate: %v", err)
	}
	return snapshot{estate: e, audit: len(b.AuditLog(t))}
}

// unchanged fails the test if the allocation model or the audit trail moved
// since before.
func (b *testBundle) unchanged(t *testing.T, before snapshot) {
	t.Helper()
	after := b.snapshot(t)
	if cs := estate.Diff(before.estate, after.estate); len(cs) > 0 {
		var s []string
		for _, c := range cs {
			s = append(s, c.String())
		}
		t.Fatalf("a refused change changed the estate: %s", strings.Join(s, "; "))
	}
	if after.audit != before.audit {
		t.Fatalf("a refused change wrote %d audit entries", after.audit-before.audit)
	}
}

func ptr[T any](v T) *T { return &v }

// enqueue sends a small command task as ctx.
func enqueue(t *testing.T, b *testBundle, ctx context.Context, project, cr, group string, params map[string]string) *model.Task {
	t.Helper()
	task, err := b.Svc.EnqueueTask(ctx, platform.EnqueueInput{
		Name: "train", Project: project, ComputeResource: cr, Group: group,
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Parameters: params},
	})
	if err != nil {
		t.Fatalf("enqueue on %s: %v (code %s)", cr, err, platform.ErrorCode(err))
	}
	return task
}

// computeResource finds a group's compute resource by name, as the admin.
func (b *testBundle) computeResource(t *testing.T, group, name string) *model.ComputeResource {
	t.Helper()
	e, err := b.Svc.Estate(b.Admin)
	if err != nil {
		t.Fatal(err)
	}
	g := e.GroupByName(group)
	if g == nil {
		t.Fatalf("no group %s", group)
	}
	pol := e.PolicyOfGroup(g.ID)
	if pol == nil {
		t.Fatalf("group %s has no policy", group)
	}
	for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
		if cr.Name == name {
			return cr
		}
	}
	t.Fatalf("group %s has no compute resource %q", group, name)
	return nil
}
