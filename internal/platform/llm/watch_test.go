package llm

import (
	"slices"
	"testing"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// TestWhoSeesAModelCall checks the one rule of which ledger calls a caller
// sees (the gateway's live traffic and its refusals), for a call in hand
// (seesModelCall) and as a ledger query (scopeCalls), which must agree on
// every call: admins see the tenant's, members their groups', a member in
// no group their own, and a project-scoped credential only its project's.
func TestWhoSeesAModelCall(t *testing.T) {
	inGroup := func(ids ...string) []identity.GroupGrant {
		var out []identity.GroupGrant
		for _, id := range ids {
			out = append(out, identity.GroupGrant{GroupID: id})
		}
		return out
	}
	type call struct{ group, project, user string }
	calls := map[string]call{
		"alice in ml": {"ml", "fraud", "alice"}, "victor in vision": {"vision", "detect", "victor"},
		"alice in vision": {"vision", "detect", "alice"}, "lone user": {"", "shared", "lone"},
		"alice in ml, other project": {"ml", "eval", "alice"},
	}
	cases := []struct {
		name string
		p    *identity.Principal
		sees []string
	}{
		{"an admin sees every call", &identity.Principal{UserID: "admin", Role: model.RoleTenantAdmin},
			[]string{"alice in ml", "victor in vision", "alice in vision", "lone user", "alice in ml, other project"}},
		{"an admin's project-scoped key sees its project's calls", &identity.Principal{UserID: "admin", Role: model.RoleTenantAdmin, ProjectID: "fraud"},
			[]string{"alice in ml"}},
		{"a member sees their group's calls, by anyone", &identity.Principal{UserID: "bob", Role: model.RoleMember, Groups: inGroup("ml")},
			[]string{"alice in ml", "alice in ml, other project"}},
		{"a member does not see their own calls charged to another group", &identity.Principal{UserID: "alice", Role: model.RoleMember, Groups: inGroup("ml")},
			[]string{"alice in ml", "alice in ml, other project"}},
		{"a member's project-scoped key sees its project's calls", &identity.Principal{UserID: "alice", Role: model.RoleMember, Groups: inGroup("ml"), ProjectID: "fraud"},
			[]string{"alice in ml"}},
		{"a member of two groups sees both", &identity.Principal{UserID: "x", Role: model.RoleMember, Groups: inGroup("ml", "vision")},
			[]string{"alice in ml", "victor in vision", "alice in vision", "alice in ml, other project"}},
		{"a member in no group sees their own calls", &identity.Principal{UserID: "lone", Role: model.RoleMember},
			[]string{"lone user"}},
		{"a viewer in a group sees the group's calls", &identity.Principal{UserID: "v", Role: model.RoleViewer, Groups: inGroup("vision")},
			[]string{"victor in vision", "alice in vision"}},
		{"no principal sees nothing", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var q store.ModelUsageQuery
			if c.p != nil {
				scopeCalls(c.p, &q)
			}
			for name, k := range calls {
				want := slices.Contains(c.sees, name)
				if got := seesModelCall(c.p, k.group, k.project, k.user); got != want {
					t.Errorf("sees %q: %v, want %v", name, got, want)
				}
				if c.p == nil {
					continue
				}
				// The query's filters, applied as the store applies them.
				match := (q.UserID == "" || q.UserID == k.user) && (q.ProjectID == "" || q.ProjectID == k.project) &&
					(len(q.GroupIDs) == 0 || slices.Contains(q.GroupIDs, k.group))
				if match != want {
					t.Errorf("the ledger query %+v matches %q: %v, want %v", q, name, match, want)
				}
			}
		})
	}
}
