package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// The access rules of authz.go, one principal at a time.

func principal(role model.Role, project string, groups ...identity.GroupGrant) *identity.Principal {
	return &identity.Principal{TenantID: "t1", UserID: "u1", Role: role, ProjectID: project, Groups: groups}
}

var (
	memberOfA = identity.GroupGrant{GroupID: "ga", GroupName: "alpha", Role: model.GroupRoleMember}
	leadOfA   = identity.GroupGrant{GroupID: "ga", GroupName: "alpha", Role: model.GroupRoleLead}
	memberOfB = identity.GroupGrant{GroupID: "gb", GroupName: "beta", Role: model.GroupRoleMember}
)

func TestRequireRightsRefuseWhoMayNot(t *testing.T) {
	cases := []struct {
		name                      string
		p                         *identity.Principal
		admin, platformAdmin, wrt bool
	}{
		{"platform admin", principal(model.RolePlatformAdmin, ""), true, true, true},
		{"tenant admin", principal(model.RoleTenantAdmin, ""), true, false, true},
		{"project-scoped tenant admin", principal(model.RoleTenantAdmin, "p1"), false, false, true},
		{"project-scoped platform admin", principal(model.RolePlatformAdmin, "p1"), false, false, true},
		{"member", principal(model.RoleMember, "", memberOfA), false, false, true},
		{"viewer", principal(model.RoleViewer, ""), false, false, false},
		{"unknown role", principal(model.Role("owner"), ""), false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := func(rule string, err error, allowed bool) {
				t.Helper()
				if allowed && err != nil {
					t.Errorf("%s refused: %v", rule, err)
				}
				if !allowed && kernel.ErrorCode(err) != kernel.CodeForbidden {
					t.Errorf("%s allowed or not FORBIDDEN: %v", rule, err)
				}
			}
			check("RequireAdmin", kernel.RequireAdmin(c.p, "edit the estate"), c.admin)
			check("RequirePlatformAdmin", kernel.RequirePlatformAdmin(c.p, "create tenants"), c.platformAdmin)
			check("RequireWrite", kernel.RequireWrite(c.p, "enqueue"), c.wrt)
		})
	}
}

func TestRefusalsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{kernel.RequireAdmin(principal(model.RoleMember, ""), "edit the estate"), "only a tenant admin can edit the estate"},
		{kernel.RequireAdmin(principal(model.RoleTenantAdmin, "p1"), "edit the estate"), "use an unscoped API key"},
		{kernel.RequirePlatformAdmin(principal(model.RoleTenantAdmin, ""), "create tenants"), "only a platform admin can create tenants"},
		{kernel.RequireWrite(principal(model.RoleViewer, ""), "enqueue tasks"), "a viewer cannot enqueue tasks"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("refusal %v; want it to say %q", c.err, c.want)
		}
	}
}

func TestCallerNeedsAPrincipal(t *testing.T) {
	if _, err := kernel.Caller(context.Background()); kernel.ErrorCode(err) != kernel.CodeUnauthenticated ||
		!strings.Contains(err.Error(), "Authorization: Bearer") {
		t.Errorf("no principal: %v", err)
	}
	p := principal(model.RoleMember, "")
	got, err := kernel.Caller(identity.WithPrincipal(context.Background(), p))
	if err != nil || got != p {
		t.Errorf("Caller = %v, %v; want the context's principal", got, err)
	}
}

func TestWhoSeesAndStopsATask(t *testing.T) {
	task := &model.Task{OwnerID: "owner", GroupID: "ga", ProjectID: "p1"}
	cases := []struct {
		name        string
		p           *identity.Principal
		sees, abort bool
	}{
		{"admin", principal(model.RoleTenantAdmin, ""), true, true},
		{"admin scoped to another project", principal(model.RoleTenantAdmin, "p2"), false, false},
		{"admin scoped to the task's project", principal(model.RoleTenantAdmin, "p1"), true, true},
		{"owner outside the group", &identity.Principal{UserID: "owner", Role: model.RoleMember}, true, true},
		{"owning viewer", &identity.Principal{UserID: "owner", Role: model.RoleViewer}, true, false},
		{"member of the group", principal(model.RoleMember, "", memberOfA), true, false},
		{"lead of the group", principal(model.RoleMember, "", leadOfA), true, true},
		{"viewer in the group", principal(model.RoleViewer, "", leadOfA), true, false},
		{"member of another group", principal(model.RoleMember, "", memberOfB), false, false},
		{"lead scoped to another project", principal(model.RoleMember, "p2", leadOfA), false, false},
	}
	for _, c := range cases {
		if got := kernel.SeesTask(c.p, task); got != c.sees {
			t.Errorf("%s: SeesTask = %v, want %v", c.name, got, c.sees)
		}
		if got := kernel.MayAbort(c.p, task); got != c.abort {
			t.Errorf("%s: MayAbort = %v, want %v", c.name, got, c.abort)
		}
	}
}

func TestWhoUsesAProjectAndManagesAGroup(t *testing.T) {
	inA := &model.Project{ID: "p1", GroupID: "ga"}
	open := &model.Project{ID: "p2"}
	cases := []struct {
		name              string
		p                 *identity.Principal
		usesA, usesOpen   bool
		managesA, seesA   bool
		managesB, seesB   bool
		groupNamesMessage string
	}{
		{"admin", principal(model.RoleTenantAdmin, ""), true, true, true, true, true, true, "you (you are in no group"},
		{"scoped admin", principal(model.RoleTenantAdmin, "p1"), true, false, false, true, false, true, "you (you are in no group"},
		{"member of a", principal(model.RoleMember, "", memberOfA), true, true, false, true, false, false, "group alpha"},
		{"lead of a", principal(model.RoleMember, "", leadOfA, memberOfB), true, true, true, true, false, true, "groups alpha, beta"},
		{"viewing lead of a", principal(model.RoleViewer, "", leadOfA), true, true, false, true, false, false, "group alpha"},
		{"member of b", principal(model.RoleMember, "", memberOfB), false, true, false, false, false, true, "group beta"},
	}
	for _, c := range cases {
		if got := kernel.UsesProject(c.p, inA); got != c.usesA {
			t.Errorf("%s: UsesProject(group a's) = %v", c.name, got)
		}
		if got := kernel.UsesProject(c.p, open); got != c.usesOpen {
			t.Errorf("%s: UsesProject(no group's) = %v", c.name, got)
		}
		if got := kernel.ManagesGroup(c.p, "ga"); got != c.managesA {
			t.Errorf("%s: ManagesGroup(a) = %v", c.name, got)
		}
		if got := kernel.ManagesGroup(c.p, "gb"); got != c.managesB {
			t.Errorf("%s: ManagesGroup(b) = %v", c.name, got)
		}
		if got := kernel.SeesGroup(c.p, "ga"); got != c.seesA {
			t.Errorf("%s: SeesGroup(a) = %v", c.name, got)
		}
		if got := kernel.SeesGroup(c.p, "gb"); got != c.seesB {
			t.Errorf("%s: SeesGroup(b) = %v", c.name, got)
		}
		if got := kernel.GroupNames(c.p); !strings.HasPrefix(got, c.groupNamesMessage) {
			t.Errorf("%s: GroupNames = %q, want it to start %q", c.name, got, c.groupNamesMessage)
		}
	}
}

// Errors: what a person sees, and the code every channel maps.

func TestPublicMessageHidesInternalDetails(t *testing.T) {
	internal := fmt.Errorf("insert into tasks: %w", errors.New("pq: duplicate key value violates unique constraint \"tasks_pkey\""))
	for _, c := range []struct {
		err  error
		code kernel.Code
		msg  string
	}{
		{kernel.Invalid("a task needs a name"), kernel.CodeInvalid, "a task needs a name"},
		{fmt.Errorf("enqueue: %w", kernel.NotFound("no pool %s", kernel.Quote("gpu"))), kernel.CodeNotFound, "no pool 'gpu'"},
		{kernel.Forbidden("a viewer cannot %s", "enqueue"), kernel.CodeForbidden, "a viewer cannot enqueue"},
		{kernel.Conflict("taken"), kernel.CodeConflict, "taken"},
		{kernel.Unavailable("no vault"), kernel.CodeUnavailable, "no vault"},
		{identity.ErrUnauthenticated, kernel.CodeUnauthenticated, identity.ErrUnauthenticated.Error()},
		{internal, kernel.CodeInternal, "internal error; the server log has the details"},
	} {
		if got := kernel.ErrorCode(c.err); got != c.code {
			t.Errorf("ErrorCode(%v) = %s, want %s", c.err, got, c.code)
		}
		if got := kernel.PublicMessage(c.err); got != c.msg {
			t.Errorf("PublicMessage(%v) = %q, want %q", c.err, got, c.msg)
		}
	}
	if kernel.ErrorCode(nil) != "" {
		t.Error("nil has a code")
	}
	if strings.Contains(kernel.PublicMessage(internal), "pq") {
		t.Error("an internal error's text reached the caller")
	}
}

func TestInvalidEstateListsEveryProblem(t *testing.T) {
	ve := &estate.ValidationError{Problems: []basis.Problem{{Object: `pool "gpu"`, Message: "a pool needs a name"}, {Object: `group "ml"`, Message: "unknown group"}}}
	err := kernel.InvalidEstate(fmt.Errorf("apply: %w", ve))
	var pe *kernel.Error
	if !errors.As(err, &pe) || pe.Code != kernel.CodeInvalid || len(pe.Problems) != 2 {
		t.Fatalf("InvalidEstate = %#v", err)
	}
	if !errors.Is(err, ve) {
		t.Error("the estate error is not kept in the chain")
	}
	other := errors.New("disk full")
	if kernel.InvalidEstate(other) != other {
		t.Error("an error that is not an estate validation error was changed")
	}
}

// Idempotency keys: which keys are taken, and what makes two requests the
// same.

func TestIdempotencyKeyRules(t *testing.T) {
	p := principal(model.RoleMember, "")
	ctx := context.Background()
	for _, c := range []struct {
		name, key string
		ok        bool
	}{
		{"uuid", "0b6f3c1e-8a0e-4a43-9a55-3f1e4b6a7c2d", true},
		{"longest", strings.Repeat("k", kernel.MaxIdempotencyKey), true},
		{"too long", strings.Repeat("k", kernel.MaxIdempotencyKey+1), false},
		{"space", "two words", false},
		{"tab", "a\tb", false},
		{"non-ascii", "clé", false},
		{"delete", "a\x7fb", false},
	} {
		i, err := kernel.Idempotency(ctx, p, "enqueueTask", c.key, "req")
		if c.ok && (err != nil || i == nil) {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && kernel.ErrorCode(err) != kernel.CodeInvalid {
			t.Errorf("%s: key %q taken: %v", c.name, c.key, err)
		}
	}
	if i, err := kernel.Idempotency(ctx, p, "enqueueTask", "", "req"); i != nil || err != nil {
		t.Errorf("no key gave %v, %v; want none", i, err)
	}
	if i, err := kernel.Idempotency(kernel.WithIdempotencyKey(ctx, "from-header"), p, "enqueueTask", "", "req"); i == nil || err != nil {
		t.Errorf("the request's header key was not used: %v, %v", i, err)
	}
}

func TestReplayTellsARetryFromAnotherRequest(t *testing.T) {
	w := newWorld(t, model.RoleMember)
	p, _ := kernel.Caller(w.ctx)
	first, err := kernel.Idempotency(w.ctx, p, "op", "key-1", map[string]int{"gpus": 1})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := w.k.Replay(w.ctx, first); id != "" || err != nil {
		t.Fatalf("a new key replays %q, %v", id, err)
	}
	err = w.k.Write(w.ctx, p, func(tx *kernel.Txn) error { return tx.RecordIdempotency(first, "obj-1") })
	if err != nil {
		t.Fatal(err)
	}
	retry, _ := kernel.Idempotency(w.ctx, p, "op", "key-1", map[string]int{"gpus": 1})
	if id, err := w.k.Replay(w.ctx, retry); id != "obj-1" || err != nil {
		t.Errorf("a retry replays %q, %v; want obj-1", id, err)
	}
	other, _ := kernel.Idempotency(w.ctx, p, "op", "key-1", map[string]int{"gpus": 2})
	if _, err := w.k.Replay(w.ctx, other); kernel.ErrorCode(err) != kernel.CodeConflict || !strings.Contains(err.Error(), "send a new key") {
		t.Errorf("the key reused for another request: %v", err)
	}
	// Another operation, or another user, with the same key is a new request.
	elsewhere, _ := kernel.Idempotency(w.ctx, p, "other-op", "key-1", map[string]int{"gpus": 2})
	if id, err := w.k.Replay(w.ctx, elsewhere); id != "" || err != nil {
		t.Errorf("the key of another operation replays %q, %v", id, err)
	}
	bob := &identity.Principal{TenantID: "t1", UserID: "u2", Role: model.RoleMember}
	theirs, _ := kernel.Idempotency(w.ctx, bob, "op", "key-1", map[string]int{"gpus": 2})
	if id, err := w.k.Replay(w.ctx, theirs); id != "" || err != nil {
		t.Errorf("another user's key replays %q, %v", id, err)
	}
	// The second record of a key loses the race.
	err = w.k.Write(w.ctx, p, func(tx *kernel.Txn) error { return tx.RecordIdempotency(retry, "obj-2") })
	if !errors.Is(err, kernel.ErrIdempotencyRace) {
		t.Errorf("a second record of one key: %v", err)
	}
}

// The small input rules.

func TestInputHelpers(t *testing.T) {
	blank, name := "  ", "gpu"
	if kernel.ErrorCode(kernel.RequireName("pool", nil)) != kernel.CodeInvalid ||
		kernel.ErrorCode(kernel.RequireName("pool", &blank)) != kernel.CodeInvalid ||
		kernel.RequireName("pool", &name) != nil {
		t.Error("RequireName must refuse a missing or blank name and take a real one")
	}
	if err := kernel.RequireName("pool", nil); err.Error() != "a pool needs a name" {
		t.Errorf("RequireName says %q", err)
	}
	s := "old"
	kernel.SetString(&s, nil)
	kernel.SetString(&s, &name)
	n := 1
	three := 3
	kernel.SetInt(&n, nil)
	kernel.SetInt(&n, &three)
	if s != "gpu" || n != 3 {
		t.Errorf("SetString/SetInt: %q %d", s, n)
	}
	list := []string{"a", "b", "a", "c"}
	if got := kernel.Remove(list, "a"); strings.Join(got, ",") != "b,c" || strings.Join(list, ",") != "a,b,a,c" {
		t.Errorf("Remove = %v (the original is now %v)", got, list)
	}
	if got := kernel.Names([]int{3, 1, 2}, func(i int) string { return fmt.Sprint(i) }); got != "1, 2, 3" {
		t.Errorf("Names = %q", got)
	}
	if got := kernel.SortedKeys(map[string]string{"b": "", "a": "", "c": ""}); strings.Join(got, "") != "abc" {
		t.Errorf("SortedKeys = %v", got)
	}
	for after, ok := range map[string]bool{"": true, "42": true, "-1": true, "abc": false, "1.5": false} {
		err := kernel.CheckSeqCursor(model.Page{After: after})
		if ok != (err == nil) || (!ok && kernel.ErrorCode(err) != kernel.CodeInvalid) {
			t.Errorf("cursor %q: %v", after, err)
		}
	}
	if !kernel.IdentityKind("user.created") || !kernel.IdentityKind("api_key.revoked") || kernel.IdentityKind("task.enqueued") || kernel.IdentityKind("user") {
		t.Error("IdentityKind must match the identity event kinds only")
	}
}
