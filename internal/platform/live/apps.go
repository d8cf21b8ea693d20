package live

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// AppInstanceUpdate is an app instance after it changed: its state (a
// task lifecycle event), its readiness (app.readiness), or its idle
// warning (app.idle_warning, app.idle_cleared).
type AppInstanceUpdate struct {
	Kind     string
	At       time.Time
	Instance *model.AppInstance
	Missed   int
}

// appEvent reports whether an event may change an app instance.
func appEvent(kind string) bool {
	switch kind {
	case "app.readiness", "app.idle_warning", "app.idle_cleared":
		return true
	}
	return taskLifecycle(kind)
}

// SubscribeAppInstances follows the changes of the tenant's app instances
// (one app's with app set, one instance with id set): each change is
// delivered only to subscribers who may see the instance (the apps
// domain's rule, checked per subscriber per payload).
func (s *Live) SubscribeAppInstances(ctx context.Context, app, id string) (<-chan *AppInstanceUpdate, error) {
	if id != "" {
		// An instance the caller may not see is refused as a read is.
		if _, err := s.reads.AppInstance(ctx, id); err != nil {
			return nil, err
		}
	}
	tenantID, release, err := s.startTenantSubscription(ctx)
	if err != nil {
		return nil, err
	}
	r := s.subs.apps.Join("apps|"+tenantID, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool { return e.TenantID == tenantID && e.ObjectKind == "task" && appEvent(e.Kind) },
		func(ctx context.Context, batch []events.Event) []*AppInstanceUpdate {
			var out []*AppInstanceUpdate
			for _, e := range batch {
				in, err := s.reads.TenantAppInstance(ctx, tenantID, e.ObjectID)
				if err != nil || in == nil {
					continue // not an app instance, or gone
				}
				out = append(out, &AppInstanceUpdate{Kind: eventKind(e.Kind), At: e.At, Instance: in})
			}
			return out
		}, 0, nil))
	return pump(ctx, s, r, release, nil,
		func(p *identity.Principal, u *AppInstanceUpdate) (*AppInstanceUpdate, bool) {
			t := u.Instance.Task
			return u, (id == "" || t.ID == id) && (app == "" || t.Spec.App.App == app) && s.reads.SeesAppInstance(p, t)
		}), nil
}
