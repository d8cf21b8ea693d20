package platformtest_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// The bundle is what the tests of four packages stand on: these check that
// it is what its documentation says, on both stores.
func TestBundle(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) {
		if p, _ := identity.PrincipalFrom(b.SignIn(t, b.AdminSecret)); p.UserID != b.AdminID || p.TenantID != b.Tenant ||
			p.Role != model.RolePlatformAdmin {
			t.Fatalf("the admin secret signs in as %+v, want the admin %s of tenant %s", p, b.AdminID, b.Tenant)
		}

		sub := b.Bus.Subscribe(64, func(events.Event) bool { return true })
		defer sub.Close()
		res := b.ApplyExample(t)
		if len(res.Changes) == 0 {
			t.Fatal("applying the example estate changed nothing")
		}
		select {
		case <-sub.C:
		case <-time.After(5 * time.Second):
			t.Fatal("applying the example published nothing on the bundle's bus")
		}
		if log := b.AuditLog(t); len(log) == 0 || log[0].ActorID != b.AdminID {
			t.Fatalf("the audit trail after an apply: %+v", log)
		}

		lead := b.User(t, "lena", model.RoleMember, "lead:ml-research", "vision")
		me, err := b.Svc.Me(lead)
		platformtest.Must(t, err)
		roles := map[model.GroupRole]int{}
		for _, m := range me.Memberships {
			roles[m.Role]++
		}
		if me.User.Name != "lena" || me.User.Role != model.RoleMember || roles[model.GroupRoleLead] != 1 || roles[model.GroupRoleMember] != 1 {
			t.Fatalf("User made %+v with memberships %+v", me.User, me.Memberships)
		}
		scoped, err := b.Svc.Me(b.Key(t, "lena", "fraud-models"))
		platformtest.Must(t, err)
		if scoped.ProjectID == "" || scoped.User.ID != me.User.ID {
			t.Fatalf("a key scoped to fraud-models acts as %+v in project %q", scoped.User, scoped.ProjectID)
		}

		if got := b.Svc.Now(); !got.Equal(start) {
			t.Fatalf("the service's clock reads %v, want %v", got, start)
		}
		b.Clock.Add(time.Hour)
		if got := b.Svc.Now(); !got.Equal(start.Add(time.Hour)) {
			t.Fatalf("after an hour the service's clock reads %v", got)
		}

		_, err = b.Svc.CreatePool(lead, platform.PoolInput{Name: &me.User.Name})
		platformtest.WantError(t, err, platform.CodeForbidden)
	}, platformtest.WithEvents(), platformtest.WithClock(start), platformtest.NoErrorLogs())
}

// Without options the service has no bus and runs on the wall clock.
func TestBundleDefaults(t *testing.T) {
	b := platformtest.SQLite(t)
	if b.Bus != nil || b.Clock != nil {
		t.Fatalf("a bundle without options has bus %v and clock %v", b.Bus, b.Clock)
	}
	if d := time.Since(b.Svc.Now()); d < 0 || d > time.Minute {
		t.Fatalf("the service's clock is %v off the wall clock", d)
	}
	if !strings.Contains(string(platformtest.ExampleEstate(t)), "kind: Estate") {
		t.Fatal("ExampleEstate is not the example estate")
	}
}

func TestLogRecorderKeepsWarningsAndAbove(t *testing.T) {
	rec := &platformtest.LogRecorder{}
	log := slog.New(rec)
	log.Info("an info line")
	log.Warn("a warning", "pool", "lab")
	log.Error("an error", "n", 2)
	got := strings.Join(rec.All(), "|")
	if got != "WARN a warning pool=lab|ERROR an error n=2" {
		t.Fatalf("recorded %q", got)
	}
}
