package live

import (
	"context"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
)

// ObjectUpdate is an object another domain owns (a study, a pipeline
// run) as it is after a change; Missed counts the updates a slow
// subscriber lost before it (the object is whole in each, so it loses
// nothing by that).
type ObjectUpdate struct {
	Object any
	Missed int
}

// FollowObject follows one object another domain owns, for its
// subscription (studyChanged): first at once, then what read returns
// after each batch of events on the object (its kind and id, in the
// tenant). read runs on the platform's own behalf, once per batch for all
// subscribers of the object; each payload is delivered only while sees
// holds for the subscriber as they are now, so a member removed from the
// object's group stops seeing it at once, as with every subscription.
func (s *Live) FollowObject(ctx context.Context, tenantID, kind, id string, first any,
	read func(ctx context.Context) (any, error), sees func(p *identity.Principal, obj any) bool) (<-chan *ObjectUpdate, error) {
	release, err := s.startSubscription(ctx)
	if err != nil {
		return nil, err
	}
	r := s.subs.objects.Join("object|"+kind+"|"+tenantID+"|"+id, s.subscriptionLimits().Buffer, feed(s,
		func(e events.Event) bool { return e.TenantID == tenantID && e.ObjectKind == kind && e.ObjectID == id },
		func(ctx context.Context, _ []events.Event) []*ObjectUpdate {
			obj, err := read(ctx)
			if err != nil || obj == nil {
				return nil
			}
			return []*ObjectUpdate{{Object: obj}}
		}, 0, nil))
	return pump(ctx, s, r, release, []*ObjectUpdate{{Object: first}},
		func(p *identity.Principal, u *ObjectUpdate) (*ObjectUpdate, bool) {
			return u, p.TenantID == tenantID && sees(p, u.Object)
		}), nil
}
