package estate

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Projects checks projects: round trips, their group, uniqueness, deletion
// with their API keys, paging.
func Projects(t *testing.T, setup harness.Setup) {
	project.CheckRefusals(t, setup)
	projectWritesAndRefusals(t, setup)
	projectDeletesAndLists(t, setup)
}

// projectWritesAndRefusals checks that a project is stored and updated
// whole, with and without a group, and the writes refused for its group.
func projectWritesAndRefusals(t *testing.T, setup harness.Setup) {
	setup.Run(t, "CreateProject then GetProject and GetProjectByName return every field, with and without a group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		restricted := &model.Project{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "detector", Description: "d",
			GroupID: g.ID, OutputDestination: "/data/out", CreatedAt: b.At(1), UpdatedAt: b.At(2)}
		open := &model.Project{ID: model.NewID(), TenantID: b.Tenant.ID, Name: "shared", CreatedAt: b.At(3), UpdatedAt: b.At(4)}
		for _, in := range []*model.Project{restricted, open} {
			project.CheckCreate(t, b, in)
		}
	})

	setup.Run(t, "UpdateProject writes every mutable field and can clear the group", func(t *testing.T, b *harness.Bundle) {
		g := b.Group(t)
		p := b.Project(t)
		upd := &model.Project{ID: p.ID, TenantID: p.TenantID, Name: "renamed", Description: "d2", GroupID: g.ID,
			OutputDestination: "gs://b", CreatedAt: b.At(30), UpdatedAt: b.At(5)}
		project.CheckUpdate(t, b, p, upd)

		upd.GroupID = ""
		harness.Must(t, b.Store.UpdateProject(b.Ctx, upd))
		got, err := b.Store.GetProject(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "GroupID after clearing", got.GroupID, "")
		harness.Must(t, b.Store.DeleteGroup(b.Ctx, b.Tenant.ID, g.ID))
	})

	setup.Run(t, "UpdateProject returns ErrNotFound for a missing group", func(t *testing.T, b *harness.Bundle) {
		p := b.Project(t)
		p.GroupID = model.NewID()
		harness.WantErr(t, b.Store.UpdateProject(b.Ctx, p), store.ErrNotFound)
	})

	setup.Run(t, "CreateProject returns ErrNotFound for a missing group or another tenant's group", func(t *testing.T, b *harness.Bundle) {
		theirs := b.Group(t, func(g *model.Group) { g.TenantID = b.Other.ID })
		harness.WantErr(t, b.Store.CreateProject(b.Ctx, &model.Project{TenantID: b.Tenant.ID, Name: "a", GroupID: model.NewID()}), store.ErrNotFound)
		harness.WantErr(t, b.Store.CreateProject(b.Ctx, &model.Project{TenantID: b.Tenant.ID, Name: "b", GroupID: theirs.ID}), store.ErrNotFound)
	})

}

// projectDeletesAndLists checks DeleteProject, which a task naming the
// project holds back and which takes the project's API keys with it, and
// ListProjects.
func projectDeletesAndLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "DeleteProject returns ErrConflict while a task names the project", func(t *testing.T, b *harness.Bundle) {
		p := b.Project(t)
		b.Task(t, b.Queue(t), b.User(t), func(tk *model.Task) { tk.ProjectID = p.ID })
		harness.WantErr(t, b.Store.DeleteProject(b.Ctx, b.Tenant.ID, p.ID), store.ErrConflict)
	})

	setup.Run(t, "DeleteProject deletes the API keys scoped to the project with it", func(t *testing.T, b *harness.Bundle) {
		p := b.Project(t)
		u := b.User(t)
		scoped := b.APIKey(t, u.ID, func(k *model.APIKey) { k.ProjectID = p.ID })
		unscoped := b.APIKey(t, u.ID)
		harness.Must(t, b.Store.DeleteProject(b.Ctx, b.Tenant.ID, p.ID))
		_, err := b.Store.GetAPIKey(b.Ctx, b.Tenant.ID, scoped.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetAPIKey(b.Ctx, b.Tenant.ID, unscoped.ID)
		harness.Must(t, err)
	})

	setup.Run(t, "ListProjects pages through a tenant's projects by name", func(t *testing.T, b *harness.Bundle) {
		want := []string{"p-3", "P-1", "p-2", "p-10", "x"}
		for _, n := range want {
			b.Project(t, func(p *model.Project) { p.Name = n })
		}
		b.Project(t, func(p *model.Project) { p.TenantID = b.Other.ID; p.Name = "p-4" })
		harness.CheckNamePaging(t, want, func(p store.Page) ([]*model.Project, error) {
			return b.Store.ListProjects(b.Ctx, b.Tenant.ID, p)
		}, func(p *model.Project) string { return p.Name })
	})
}

// project describes projects for the checks every kind a tenant owns
// passes.
var project = harness.Owned[model.Project]{Kind: "Project", Noun: "project", Make: (*harness.Bundle).Project,
	Fields: func(p *model.Project) harness.Fields {
		return harness.Fields{ID: &p.ID, TenantID: &p.TenantID, Name: &p.Name, CreatedAt: &p.CreatedAt, UpdatedAt: &p.UpdatedAt}
	},
	Create: store.Store.CreateProject, Get: store.Store.GetProject, GetByName: store.Store.GetProjectByName,
	Update: store.Store.UpdateProject, Delete: store.Store.DeleteProject}
