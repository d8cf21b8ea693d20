package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseProjects(t *testing.T, setup setupFunc) {
	t.Run("CreateProject then GetProject and GetProjectByName return every field, with and without a group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		restricted := &model.Project{ID: model.NewID(), TenantID: b.tenant.ID, Name: "detector", Description: "d",
			GroupID: g.ID, OutputDestination: "/data/out", CreatedAt: b.at(1), UpdatedAt: b.at(2)}
		open := &model.Project{ID: model.NewID(), TenantID: b.tenant.ID, Name: "shared", CreatedAt: b.at(3), UpdatedAt: b.at(4)}
		for _, in := range []*model.Project{restricted, open} {
			must(t, b.store.CreateProject(b.ctx, in))
			want := *in
			want.CreatedAt, want.UpdatedAt = norm(in.CreatedAt), norm(in.UpdatedAt)
			got, err := b.store.GetProject(b.ctx, b.tenant.ID, in.ID)
			must(t, err)
			checkEqual(t, "GetProject", got, &want)
			got, err = b.store.GetProjectByName(b.ctx, b.tenant.ID, in.Name)
			must(t, err)
			checkEqual(t, "GetProjectByName", got, &want)
		}
	})

	t.Run("UpdateProject writes every mutable field and can clear the group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.group(t)
		p := b.project(t)
		upd := &model.Project{ID: p.ID, TenantID: p.TenantID, Name: "renamed", Description: "d2", GroupID: g.ID,
			OutputDestination: "gs://b", CreatedAt: b.at(30), UpdatedAt: b.at(5)}
		must(t, b.store.UpdateProject(b.ctx, upd))
		want := *upd
		want.CreatedAt, want.UpdatedAt = norm(p.CreatedAt), norm(upd.UpdatedAt)
		got, err := b.store.GetProject(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		checkEqual(t, "after UpdateProject", got, &want)

		upd.GroupID = ""
		must(t, b.store.UpdateProject(b.ctx, upd))
		got, err = b.store.GetProject(b.ctx, b.tenant.ID, p.ID)
		must(t, err)
		checkEqual(t, "GroupID after clearing", got.GroupID, "")
		must(t, b.store.DeleteGroup(b.ctx, b.tenant.ID, g.ID))
	})

	t.Run("UpdateProject returns ErrNotFound for a missing project, another tenant's, or a missing group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		wantErr(t, b.store.UpdateProject(b.ctx, &model.Project{ID: model.NewID(), TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		theirs := b.project(t, func(p *model.Project) { p.TenantID = b.other.ID })
		wantErr(t, b.store.UpdateProject(b.ctx, &model.Project{ID: theirs.ID, TenantID: b.tenant.ID, Name: "x"}), store.ErrNotFound)
		p := b.project(t)
		p.GroupID = model.NewID()
		wantErr(t, b.store.UpdateProject(b.ctx, p), store.ErrNotFound)
	})

	t.Run("CreateProject and UpdateProject return ErrConflict for a name taken in the tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p1 := b.project(t)
		wantErr(t, b.store.CreateProject(b.ctx, &model.Project{TenantID: b.tenant.ID, Name: p1.Name}), store.ErrConflict)
		p2 := b.project(t)
		p2.Name = p1.Name
		wantErr(t, b.store.UpdateProject(b.ctx, p2), store.ErrConflict)
		b.project(t, func(p *model.Project) { p.TenantID = b.other.ID; p.Name = p1.Name })
	})

	t.Run("CreateProject returns ErrNotFound for a missing group or another tenant's group", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.group(t, func(g *model.Group) { g.TenantID = b.other.ID })
		wantErr(t, b.store.CreateProject(b.ctx, &model.Project{TenantID: b.tenant.ID, Name: "a", GroupID: model.NewID()}), store.ErrNotFound)
		wantErr(t, b.store.CreateProject(b.ctx, &model.Project{TenantID: b.tenant.ID, Name: "b", GroupID: theirs.ID}), store.ErrNotFound)
	})

	t.Run("GetProject and GetProjectByName return ErrNotFound for another tenant's project", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		theirs := b.project(t, func(p *model.Project) { p.TenantID = b.other.ID })
		_, err := b.store.GetProject(b.ctx, b.tenant.ID, theirs.ID)
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetProjectByName(b.ctx, b.tenant.ID, theirs.Name)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("DeleteProject deletes an unused project and returns ErrNotFound for a missing one", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.project(t)
		theirs := b.project(t, func(p *model.Project) { p.TenantID = b.other.ID })
		wantErr(t, b.store.DeleteProject(b.ctx, b.tenant.ID, theirs.ID), store.ErrNotFound)
		must(t, b.store.DeleteProject(b.ctx, b.tenant.ID, p.ID))
		_, err := b.store.GetProject(b.ctx, b.tenant.ID, p.ID)
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.DeleteProject(b.ctx, b.tenant.ID, p.ID), store.ErrNotFound)
	})

	t.Run("DeleteProject returns ErrConflict while a task names the project", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.project(t)
		b.task(t, b.queue(t), b.user(t), func(tk *model.Task) { tk.ProjectID = p.ID })
		wantErr(t, b.store.DeleteProject(b.ctx, b.tenant.ID, p.ID), store.ErrConflict)
	})

	t.Run("DeleteProject deletes the API keys scoped to the project with it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := b.project(t)
		u := b.user(t)
		scoped := b.apiKey(t, u.ID, func(k *model.APIKey) { k.ProjectID = p.ID })
		unscoped := b.apiKey(t, u.ID)
		must(t, b.store.DeleteProject(b.ctx, b.tenant.ID, p.ID))
		_, err := b.store.GetAPIKey(b.ctx, b.tenant.ID, scoped.ID)
		wantErr(t, err, store.ErrNotFound)
		_, err = b.store.GetAPIKey(b.ctx, b.tenant.ID, unscoped.ID)
		must(t, err)
	})

	t.Run("ListProjects pages through a tenant's projects by name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		want := []string{"p-3", "P-1", "p-2", "p-10", "x"}
		for _, n := range want {
			b.project(t, func(p *model.Project) { p.Name = n })
		}
		b.project(t, func(p *model.Project) { p.TenantID = b.other.ID; p.Name = "p-4" })
		checkNamePaging(t, want, func(p store.Page) ([]*model.Project, error) {
			return b.store.ListProjects(b.ctx, b.tenant.ID, p)
		}, func(p *model.Project) string { return p.Name })
	})
}
