package storetest

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func exerciseAutoscalers(t *testing.T, setup setupFunc) {
	spec := model.AutoscalerSpec{Provider: model.ProviderAWS, Region: "eu-west-1", MaxInstances: 4,
		InstanceTypes: []model.InstanceType{{Name: "g5.xlarge", GPUs: 1}, {Name: "g5.12xlarge", GPUs: 4}},
		IdleTimeout:   10 * time.Minute, SpinUpTimeout: 15 * time.Minute, Market: model.MarketSpot, SpotFallback: true,
		SpotTimeout: 2 * time.Minute, SpotBlackout: 30 * time.Minute, CredentialSecrets: []string{"AWS_ACCESS_KEY_ID"}}

	t.Run("an autoscaler round-trips, one per pool, and stays in its tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pool := b.pool(t)
		a := &model.Autoscaler{TenantID: b.tenant.ID, PoolID: pool.ID, Name: "burst", Spec: spec, CreatedBy: "ada", CreatedAt: b.now, UpdatedAt: b.now}
		must(t, b.store.CreateAutoscaler(b.ctx, a))
		got, err := b.store.GetAutoscaler(b.ctx, b.tenant.ID, a.ID)
		must(t, err)
		checkEqual(t, "spec", got.Spec, spec)
		if got.LastHeartbeatAt != nil || got.PoolID != pool.ID || !got.CreatedAt.Equal(norm(b.now)) {
			t.Fatalf("autoscaler %s", show(got))
		}
		_, err = b.store.GetAutoscaler(b.ctx, b.other.ID, a.ID)
		wantErr(t, err, store.ErrNotFound)
		dup := &model.Autoscaler{TenantID: b.tenant.ID, PoolID: pool.ID, Name: "second", Spec: spec, CreatedAt: b.now, UpdatedAt: b.now}
		wantErr(t, b.store.CreateAutoscaler(b.ctx, dup), store.ErrConflict)
		if dup.ID != "" {
			t.Fatalf("a failed create keeps the id it was given (none), got %s", dup.ID)
		}
		foreign := &model.Autoscaler{TenantID: b.other.ID, PoolID: pool.ID, Name: "x", Spec: spec, CreatedAt: b.now, UpdatedAt: b.now}
		wantErr(t, b.store.CreateAutoscaler(b.ctx, foreign), store.ErrNotFound)

		byPool, err := b.store.GetAutoscalerByPool(b.ctx, b.tenant.ID, pool.ID)
		must(t, err)
		checkEqual(t, "by pool", byPool.ID, a.ID)

		a.Spec.MaxInstances = 8
		a.UpdatedAt = b.at(1)
		must(t, b.store.UpdateAutoscaler(b.ctx, a))
		wantErr(t, b.store.UpdateAutoscaler(b.ctx, &model.Autoscaler{TenantID: b.other.ID, ID: a.ID, Name: "x"}), store.ErrNotFound)

		st := model.AutoscalerStatus{Message: "no spot capacity", Instances: []model.AutoscalerInstance{
			{ID: "i-1", Worker: "burst-1", Type: "g5.xlarge", GPUs: 1, Market: model.MarketOnDemand, State: "pending", LaunchedAt: norm(b.at(2))}}}
		must(t, b.store.ReportAutoscaler(b.ctx, b.tenant.ID, a.ID, st, b.at(3)))
		wantErr(t, b.store.ReportAutoscaler(b.ctx, b.other.ID, a.ID, st, b.at(3)), store.ErrNotFound)
		list, err := b.store.ListAutoscalers(b.ctx, b.tenant.ID)
		must(t, err)
		if len(list) != 1 || list[0].Spec.MaxInstances != 8 || list[0].LastHeartbeatAt == nil || !list[0].LastHeartbeatAt.Equal(norm(b.at(3))) {
			t.Fatalf("list %s", show(list))
		}
		checkEqual(t, "status", list[0].Status, st)
		other, err := b.store.ListAutoscalers(b.ctx, b.other.ID)
		must(t, err)
		checkEqual(t, "the other tenant's autoscalers", len(other), 0)

		wantErr(t, b.store.DeleteAutoscaler(b.ctx, b.other.ID, a.ID), store.ErrNotFound)
		must(t, b.store.DeleteAutoscaler(b.ctx, b.tenant.ID, a.ID))
		_, err = b.store.GetAutoscalerByPool(b.ctx, b.tenant.ID, pool.ID)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("the reason of placed tasks changes only while they are placed on the pool", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pool, elsewhere := b.pool(t), b.pool(t)
		owner := b.user(t)
		q := b.queue(t)
		one := model.Size{Nodes: 1, PerNode: 1000}
		waiting := placedTask(t, b, q, owner, pool.ID, one, b.now)
		other := placedTask(t, b, q, owner, elsewhere.ID, one, b.now)
		queued := b.task(t, q, owner)
		reason := "waiting for a node: the autoscaler is at its maximum of 4 instances"
		n, err := b.store.SetPlacedReason(b.ctx, b.tenant.ID, pool.ID, []string{waiting.ID, other.ID, queued.ID}, reason)
		must(t, err)
		checkEqual(t, "changed", n, 1)
		n, err = b.store.SetPlacedReason(b.ctx, b.other.ID, pool.ID, []string{waiting.ID}, "other tenant")
		must(t, err)
		checkEqual(t, "changed from another tenant", n, 0)
		got, err := b.store.GetTask(b.ctx, b.tenant.ID, waiting.ID)
		must(t, err)
		checkEqual(t, "reason", got.Reason, reason)
		got, err = b.store.GetTask(b.ctx, b.tenant.ID, other.ID)
		must(t, err)
		if got.Reason == reason {
			t.Fatal("a task placed on another pool took the reason")
		}
	})
}
