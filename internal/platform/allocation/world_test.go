package allocation_test

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/allocation"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
	"github.com/klique-ai/klique/internal/store"
)

// world is the allocation domain alone, on a kernel over a fresh SQLite
// store: no facade, no other domain.
type world struct {
	k     *kernel.Kernel
	st    store.Store
	alloc *allocation.Allocation
	admin context.Context
}

// The estate of these tests: group ml reserves 2 GPUs of a limit of 6 and
// has a weekly time budget; vision reserves none.
const testEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
  - {name: l4, memoryGb: 24}
pools:
  - {name: k8s, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [k8s]}
  - {name: two-gpus, size: 2, pools: [k8s]}
groups:
  - {name: ml}
  - {name: vision}
policies:
  - group: ml
    reservation: 2
    limit: 6
    timeBudget: {hours: 100, period: week}
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
      - {name: 2 GPUs, profile: two-gpus}
  - group: vision
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: ml-proj, group: ml}
`

func newWorld(t *testing.T) *world {
	t.Helper()
	st := kerneltest.Store(t)
	k := kernel.New(kernel.Options{Store: st})
	w := &world{k: k, st: st, alloc: allocation.New(k)}
	w.admin = w.as(t, "admin", model.RoleTenantAdmin, "")
	if _, err := w.alloc.ApplyEstate(w.admin, []byte(testEstate), false); err != nil {
		t.Fatalf("apply the test estate: %v", err)
	}
	return w
}

// as creates a user of role in the groups named and returns a context
// acting as them; project scopes their credential.
func (w *world) as(t *testing.T, name string, role model.Role, project string, groups ...string) context.Context {
	t.Helper()
	u := &model.User{ID: model.NewID(), TenantID: "t1", Name: name, Role: role}
	if err := w.st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	p := &identity.Principal{TenantID: "t1", UserID: u.ID, UserName: name, Role: role, ProjectID: project}
	if len(groups) > 0 {
		e, err := w.alloc.Estate(w.admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			p.Groups = append(p.Groups, identity.GroupGrant{GroupID: e.GroupByName(g).ID, GroupName: g, Role: model.GroupRoleMember})
		}
	}
	return identity.WithPrincipal(context.Background(), p)
}

// wantError fails unless err has code and says every word.
func wantError(t *testing.T, what string, err error, code kernel.Code, words ...string) {
	t.Helper()
	if kernel.ErrorCode(err) != code {
		t.Errorf("%s: %v (code %s), want %s", what, err, kernel.ErrorCode(err), code)
		return
	}
	for _, wd := range words {
		if !strings.Contains(err.Error(), wd) {
			t.Errorf("%s: %q does not say %q", what, err, wd)
		}
	}
}

// audits counts the audit entries of an action.
func (w *world) audits(t *testing.T, action string) int {
	t.Helper()
	es, err := w.st.ListAudit(context.Background(), "t1", store.AuditFilter{}, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.Action == action {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }
