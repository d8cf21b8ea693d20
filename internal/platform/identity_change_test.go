package platform_test

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// A member who leaves a group must see none of its updates published after
// the change returns: subscribers re-check their credential before their
// next payload only if they have been told of the change by then. Telling
// them from a goroutine that watches the bus let a task enqueued right
// after the removal reach the former member (caught by TestSubscriptions
// in internal/server, under load). The change itself now tells them,
// before it returns and before its events are published.
func TestAnIdentityChangeIsToldToSubscribersBeforeItReturns(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.applyExample(t)
		ps := b.people(t)
		for i := 0; i < 5; i++ {
			before := b.svc.IdentityGeneration()
			must(t, b.svc.RemoveGroupMember(b.admin, "ml-research", "rita"))
			if b.svc.IdentityGeneration() == before {
				t.Fatal("removing a member returned before subscribers were told to re-check")
			}
			before = b.svc.IdentityGeneration()
			_, err := b.svc.SetGroupMember(b.admin, "ml-research", "rita", model.GroupRoleMember)
			must(t, err)
			if b.svc.IdentityGeneration() == before {
				t.Fatal("adding a member returned before subscribers were told to re-check")
			}
		}
		// A change that is not to identities tells nobody.
		before := b.svc.IdentityGeneration()
		enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
		if b.svc.IdentityGeneration() != before {
			t.Error("enqueueing a task made every subscriber re-check its credential")
		}
	})
}
