package apps

import (
	"context"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Apps lists the catalogue the caller's tenant sees: the built-ins (or the
// tenant's overrides of them) and the tenant's own entries, by name.
func (s *Apps) Apps(ctx context.Context) ([]*model.App, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	return appconf.Catalogue(&e.Apps), nil
}

// App returns one entry of the catalogue.
func (s *Apps) App(ctx context.Context, name string) (*model.App, error) {
	all, err := s.Apps(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, noApp(name)
}

func noApp(name string) error {
	return kernel.NotFound("no app %s in the catalogue; list them with 'klique app ls'", kernel.Quote(name))
}

// AppSettings returns the tenant's launch rules (admins only).
func (s *Apps) AppSettings(ctx context.Context) (*model.AppSettings, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read the launch rules of apps"); err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	c := appconf.Clone(&e.Apps)
	return &c.Settings, nil
}

// PutApp creates or replaces the tenant's entry named a.Name; an entry
// named as a built-in overrides it. The entry is checked whole with the
// estate (appconf.ValidateApp): its form must be a valid JSON Schema and
// its templates may refer only to its form's fields and the values every
// launch has.
func (s *Apps) PutApp(ctx context.Context, a model.App) (*kernel.EstateResult, error) {
	a.Name = strings.TrimSpace(a.Name)
	a.BuiltIn = false
	a.Run.Args = slices.Clone(a.Run.Args)
	return s.k.ChangeCallerEstate(ctx, "change the app catalogue", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		x := a
		appconf.Put(&next.Apps, &x)
		return a.Name, nil
	})
}

// SetAppLocked locks or unlocks an app: a locked app cannot be launched.
// Locking a built-in the tenant has not overridden stores a copy of it,
// locked.
func (s *Apps) SetAppLocked(ctx context.Context, name string, locked bool) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "lock or unlock apps", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		a := appconf.Find(&next.Apps, name)
		if a == nil {
			if a = appconf.BuiltIn(name); a == nil {
				return "", noApp(name)
			}
			a.BuiltIn = false
			appconf.Put(&next.Apps, a)
		}
		a.Locked = locked
		return name, nil
	})
}

// DeleteApp removes the tenant's entry. Removing an override of a built-in
// brings the built-in back; a built-in itself cannot be removed, only
// locked. Running instances are left running.
func (s *Apps) DeleteApp(ctx context.Context, name string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "delete apps", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if !appconf.Remove(&next.Apps, name) {
			if appconf.BuiltIn(name) != nil {
				return "", kernel.Invalid("app %s is built in and cannot be deleted; lock it instead ('klique app lock %s') to stop launches", kernel.Quote(name), name)
			}
			return "", noApp(name)
		}
		return name, nil
	})
}

// SetAppLaunches switches every launch of the tenant on or off. Instances
// already running are left running.
func (s *Apps) SetAppLaunches(ctx context.Context, enabled bool) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "switch app launches on or off", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		next.Apps.Settings.LaunchesDisabled = !enabled
		return "apps", nil
	})
}

// SetAppQuota sets the running-apps quota of the company (group empty) or
// of a group; 0 removes it.
func (s *Apps) SetAppQuota(ctx context.Context, group string, running int) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "set running-apps quotas", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		st := &next.Apps.Settings
		if group == "" {
			st.Running = running
			return "apps", nil
		}
		if _, err := kernel.FindGroup(next, group); err != nil {
			return "", err
		}
		g := next.GroupByName(group)
		if g == nil {
			g = next.Group(group)
		}
		st.Groups = slices.DeleteFunc(st.Groups, func(q *model.AppGroupQuota) bool { return q.Group == g.Name })
		if running != 0 {
			st.Groups = append(st.Groups, &model.AppGroupQuota{Group: g.Name, Running: running})
		}
		return "apps", nil
	})
}
