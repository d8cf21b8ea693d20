package graph

import (
	"context"

	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// launchOf is an instance's launch; every instance the platform returns
// has one, and an empty one keeps a resolver from failing on a task that
// does not.
func launchOf(in *model.AppInstance) *model.AppLaunch {
	if in.Task != nil && in.Task.Spec.App != nil {
		return in.Task.Spec.App
	}
	return &model.AppLaunch{}
}

// appPayload answers a change to an app with the entry as the catalogue
// now shows it.
func (r *mutationResolver) appPayload(_ context.Context, name string) func(*platform.EstateResult, error) (*gqlmodel.AppPayload, error) {
	return func(res *platform.EstateResult, err error) (*gqlmodel.AppPayload, error) {
		if err != nil {
			return nil, err
		}
		a := appconf.Lookup(&res.Estate.Apps, name)
		if a == nil {
			a = &model.App{Name: name}
		}
		return &gqlmodel.AppPayload{App: a, Changes: changes(res), Warnings: warnings(res.Warnings)}, nil
	}
}

func appSettingsPayload(res *platform.EstateResult, err error) (*gqlmodel.AppSettingsPayload, error) {
	if err != nil {
		return nil, err
	}
	s := res.Estate.Apps.Settings
	return &gqlmodel.AppSettingsPayload{Settings: &s, Changes: changes(res), Warnings: warnings(res.Warnings)}, nil
}
