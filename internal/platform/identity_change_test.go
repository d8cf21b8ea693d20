package platform_test

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/platformtest"
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
		b.ApplyExample(t)
		ps := b.people(t)
		for i := 0; i < 5; i++ {
			before := b.Svc.IdentityGeneration()
			platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
			if b.Svc.IdentityGeneration() == before {
				t.Fatal("removing a member returned before subscribers were told to re-check")
			}
			before = b.Svc.IdentityGeneration()
			_, err := b.Svc.SetGroupMember(b.Admin, "ml-research", "rita", model.GroupRoleMember)
			platformtest.Must(t, err)
			if b.Svc.IdentityGeneration() == before {
				t.Fatal("adding a member returned before subscribers were told to re-check")
			}
		}
		// A change that is not to identities tells nobody.
		before := b.Svc.IdentityGeneration()
		enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
		if b.Svc.IdentityGeneration() != before {
			t.Error("enqueueing a task made every subscriber re-check its credential")
		}
	})
}
