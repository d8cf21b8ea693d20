package apps

import (
	"context"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// The router's reads: who may open an instance through /apps/{id}/, and
// which ready instances stand behind a static route at /routes/{route}/.
// Opening follows the rule for seeing (SeesInstance): whoever may see an
// instance may open it, and nobody else learns that it exists. Reads are
// not audited on this platform, so neither is opening.

// OpenAppInstance returns an instance the caller may open: its owner,
// whom its launch shared it with, and admins. Any other caller, in this
// tenant or another, is told there is no such instance.
func (s *Apps) OpenAppInstance(ctx context.Context, id string) (*model.AppInstance, error) {
	return s.AppInstance(ctx, id)
}

// RouteInstances returns the ready instances behind a static route that the
// caller may open: those launched with the route, and those of the app the
// route names (Route.App). A route that neither the estate nor any of the
// caller's running instances knows is not found; a known route with no
// ready instance the caller may open gives an empty list.
func (s *Apps) RouteInstances(ctx context.Context, route string) ([]*model.AppInstance, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	route = strings.TrimSpace(route)
	if route == "" {
		return nil, kernel.Invalid("name the route: /routes/{route}/")
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	known, app := false, ""
	for _, r := range e.Gateway.Routes {
		if r.Name == route {
			known, app = true, r.App
			break
		}
	}
	tf := store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}
	if !p.IsAdmin() {
		tf.GroupIDs, tf.VisibleToUserID, tf.RestrictToGroups = p.GroupIDs(), p.UserID, true
	}
	tasks, err := s.k.Store.ListTasks(ctx, p.TenantID, tf, store.Page{Limit: 1000}, true)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out := []*model.AppInstance{}
	for _, t := range tasks {
		if !SeesInstance(p, t) || !(t.Spec.App.Route == route || (app != "" && t.Spec.App.App == app)) {
			continue
		}
		known = true
		if in := s.instance(t); in.State == "ready" {
			out = append(out, in)
		}
	}
	if !known {
		return nil, kernel.NotFound("no route %s: no static route of the gateway has that name, and no app instance you may open was launched with it; check the name", kernel.Quote(route))
	}
	return out, nil
}
