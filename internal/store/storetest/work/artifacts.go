package work

import (
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Artifacts checks the artifacts of runs: one per name in a run, listed by
// name, and never visible from another tenant.
func Artifacts(t *testing.T, setup harness.Setup) {
	setup.Run(t, "an artifact round-trips, its name is unique in the run, and it stays in its tenant", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		task := b.Task(t, q, b.User(t))
		a := &model.Artifact{TenantID: b.Tenant.ID, TaskID: task.ID, Name: "model/weights.bin", Size: 5,
			SHA256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", ContentType: "application/octet-stream",
			StorageKey: "t/x/1", CreatedBy: "ada", CreatedAt: b.Now}
		harness.Must(t, b.Store.CreateArtifact(b.Ctx, a))
		if a.ID == "" {
			t.Fatal("CreateArtifact assigns an id")
		}
		got, err := b.Store.GetArtifact(b.Ctx, b.Tenant.ID, task.ID, a.Name)
		harness.Must(t, err)
		want := *a
		want.CreatedAt = harness.Norm(b.Now)
		harness.CheckEqual(t, "artifact", *got, want)
		_, err = b.Store.GetArtifact(b.Ctx, b.Other.ID, task.ID, a.Name)
		harness.WantErr(t, err, store.ErrNotFound)

		dup := &model.Artifact{TenantID: b.Tenant.ID, TaskID: task.ID, Name: a.Name, Pointer: "s3://b/k", CreatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateArtifact(b.Ctx, dup), store.ErrConflict)
		if dup.ID != "" {
			t.Fatalf("a failed create keeps the id it was given (none), got %s", dup.ID)
		}
		missing := &model.Artifact{TenantID: b.Tenant.ID, TaskID: "no-such-task", Name: "x", CreatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateArtifact(b.Ctx, missing), store.ErrNotFound)

		ptr := &model.Artifact{TenantID: b.Tenant.ID, TaskID: task.ID, Name: "checkpoints", Pointer: "s3://bucket/run/ckpt", CreatedAt: b.At(1)}
		harness.Must(t, b.Store.CreateArtifact(b.Ctx, ptr))
		list, err := b.Store.ListArtifacts(b.Ctx, b.Tenant.ID, task.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "names", harness.Names(list, func(a *model.Artifact) string { return a.Name }), []string{"checkpoints", "model/weights.bin"})
		other, err := b.Store.ListArtifacts(b.Ctx, b.Other.ID, task.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "the other tenant's artifacts", len(other), 0)

		harness.WantErr(t, b.Store.DeleteArtifact(b.Ctx, b.Other.ID, a.ID), store.ErrNotFound)
		harness.Must(t, b.Store.DeleteArtifact(b.Ctx, b.Tenant.ID, a.ID))
		_, err = b.Store.GetArtifact(b.Ctx, b.Tenant.ID, task.ID, a.Name)
		harness.WantErr(t, err, store.ErrNotFound)
		harness.Must(t, b.Store.CreateArtifact(b.Ctx, dup))
	})

	setup.Run(t, "a pool's output destination round-trips", func(t *testing.T, b *harness.Bundle) {
		p := b.Pool(t, func(p *model.Pool) { p.OutputDestination = "s3://pool-bucket/out" })
		got, err := b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "destination", got.OutputDestination, "s3://pool-bucket/out")
		got.OutputDestination = ""
		harness.Must(t, b.Store.UpdatePool(b.Ctx, got))
		again, err := b.Store.GetPool(b.Ctx, b.Tenant.ID, p.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "destination cleared", again.OutputDestination, "")
	})
}
