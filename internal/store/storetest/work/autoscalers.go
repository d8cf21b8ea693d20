package work

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Autoscalers checks autoscalers, one a pool, and the reason they give
// placed tasks.
func Autoscalers(t *testing.T, setup harness.Setup) {
	spec := model.AutoscalerSpec{Provider: model.ProviderAWS, Region: "eu-west-1", MaxInstances: 4,
		InstanceTypes: []model.InstanceType{{Name: "g5.xlarge", GPUs: 1}, {Name: "g5.12xlarge", GPUs: 4}},
		IdleTimeout:   10 * time.Minute, SpinUpTimeout: 15 * time.Minute, Market: model.MarketSpot, SpotFallback: true,
		SpotTimeout: 2 * time.Minute, SpotBlackout: 30 * time.Minute, CredentialSecrets: []string{"AWS_ACCESS_KEY_ID"}}

	setup.Run(t, "an autoscaler round-trips, one per pool, and stays in its tenant", func(t *testing.T, b *harness.Bundle) {
		pool := b.Pool(t)
		a := &model.Autoscaler{TenantID: b.Tenant.ID, PoolID: pool.ID, Name: "burst", Spec: spec, CreatedBy: "ada", CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.CreateAutoscaler(b.Ctx, a))
		got, err := b.Store.GetAutoscaler(b.Ctx, b.Tenant.ID, a.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "spec", got.Spec, spec)
		if got.LastHeartbeatAt != nil || got.PoolID != pool.ID || !got.CreatedAt.Equal(harness.Norm(b.Now)) {
			t.Fatalf("autoscaler %s", harness.Show(got))
		}
		_, err = b.Store.GetAutoscaler(b.Ctx, b.Other.ID, a.ID)
		harness.WantErr(t, err, store.ErrNotFound)
		dup := &model.Autoscaler{TenantID: b.Tenant.ID, PoolID: pool.ID, Name: "second", Spec: spec, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateAutoscaler(b.Ctx, dup), store.ErrConflict)
		if dup.ID != "" {
			t.Fatalf("a failed create keeps the id it was given (none), got %s", dup.ID)
		}
		foreign := &model.Autoscaler{TenantID: b.Other.ID, PoolID: pool.ID, Name: "x", Spec: spec, CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.WantErr(t, b.Store.CreateAutoscaler(b.Ctx, foreign), store.ErrNotFound)

		byPool, err := b.Store.GetAutoscalerByPool(b.Ctx, b.Tenant.ID, pool.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "by pool", byPool.ID, a.ID)

		a.Spec.MaxInstances = 8
		a.UpdatedAt = b.At(1)
		harness.Must(t, b.Store.UpdateAutoscaler(b.Ctx, a))
		harness.WantErr(t, b.Store.UpdateAutoscaler(b.Ctx, &model.Autoscaler{TenantID: b.Other.ID, ID: a.ID, Name: "x"}), store.ErrNotFound)

		st := model.AutoscalerStatus{Message: "no spot capacity", Instances: []model.AutoscalerInstance{
			{ID: "i-1", Worker: "burst-1", Type: "g5.xlarge", GPUs: 1, Market: model.MarketOnDemand, State: "pending", LaunchedAt: harness.Norm(b.At(2))}}}
		harness.Must(t, b.Store.ReportAutoscaler(b.Ctx, b.Tenant.ID, a.ID, st, b.At(3)))
		harness.WantErr(t, b.Store.ReportAutoscaler(b.Ctx, b.Other.ID, a.ID, st, b.At(3)), store.ErrNotFound)
		list, err := b.Store.ListAutoscalers(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(list) != 1 || list[0].Spec.MaxInstances != 8 || list[0].LastHeartbeatAt == nil || !list[0].LastHeartbeatAt.Equal(harness.Norm(b.At(3))) {
			t.Fatalf("list %s", harness.Show(list))
		}
		harness.CheckEqual(t, "status", list[0].Status, st)
		other, err := b.Store.ListAutoscalers(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "the other tenant's autoscalers", len(other), 0)

		harness.WantErr(t, b.Store.DeleteAutoscaler(b.Ctx, b.Other.ID, a.ID), store.ErrNotFound)
		harness.Must(t, b.Store.DeleteAutoscaler(b.Ctx, b.Tenant.ID, a.ID))
		_, err = b.Store.GetAutoscalerByPool(b.Ctx, b.Tenant.ID, pool.ID)
		harness.WantErr(t, err, store.ErrNotFound)
	})

	setup.Run(t, "the reason of placed tasks changes only while they are placed on the pool", func(t *testing.T, b *harness.Bundle) {
		pool, elsewhere := b.Pool(t), b.Pool(t)
		owner := b.User(t)
		q := b.Queue(t)
		one := model.Size{Nodes: 1, PerNode: 1000}
		waiting := placedTask(t, b, q, owner, pool.ID, one, b.Now)
		other := placedTask(t, b, q, owner, elsewhere.ID, one, b.Now)
		queued := b.Task(t, q, owner)
		reason := "waiting for a node: the autoscaler is at its maximum of 4 instances"
		n, err := b.Store.SetPlacedReason(b.Ctx, b.Tenant.ID, pool.ID, []string{waiting.ID, other.ID, queued.ID}, reason)
		harness.Must(t, err)
		harness.CheckEqual(t, "changed", n, 1)
		n, err = b.Store.SetPlacedReason(b.Ctx, b.Other.ID, pool.ID, []string{waiting.ID}, "other tenant")
		harness.Must(t, err)
		harness.CheckEqual(t, "changed from another tenant", n, 0)
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, waiting.ID)
		harness.Must(t, err)
		harness.CheckEqual(t, "reason", got.Reason, reason)
		got, err = b.Store.GetTask(b.Ctx, b.Tenant.ID, other.ID)
		harness.Must(t, err)
		if got.Reason == reason {
			t.Fatal("a task placed on another pool took the reason")
		}
	})
}
