package fleet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// An app instance's readiness and use, as its worker (or, for an HPC job,
// its own process) reports them.

// appReadiness records an app instance's readiness as its worker reports
// it in a heartbeat (st nil: not reported, left as it is): its address
// while its health path answers, none when it stops answering. Only a
// change is written, and published as app.readiness, for the
// appInstanceChanged subscription of a later slice.
//
// A reported address is held to the router's address rule
// (appnet/rule.go) here, where it is accepted: the rule's verdict (the
// networks a direct dial may reach, or why the address is refused) is
// recorded with it. A refused address keeps the instance ready (its
// worker's tunnel still reaches it) but is never dialled directly, and
// its reason is shown where the instance's state is.
func (s *Fleet) appReadiness(ctx context.Context, tenantID, poolID, workerID string, t *model.Task, st *agentapi.AppStatus) error {
	if st == nil || t.Spec.Kind != model.TaskKindApplication {
		return nil
	}
	addr := ""
	if st.Ready {
		addr = strings.TrimSpace(st.Address)
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || len(addr) > 255 {
			// Refusing the heartbeat would cost every task its lease; the
			// instance stays as it was, and the worker's log says why.
			return nil
		}
	}
	// An address recorded before the rule existed (no verdict) is judged
	// again at the next report.
	if addr == t.Run.AppAddress && (addr == "" || t.Run.AppAllow != "" || t.Run.AppRefused != "") {
		return nil
	}
	rec, err := s.judgeAddress(ctx, tenantID, poolID, addr)
	if err != nil {
		return err
	}
	if err := s.k.Store.SetAppAddress(ctx, tenantID, workerID, t.ID, t.Run.Attempt, rec); err != nil {
		return s.k.Internal(ctx, err)
	}
	if rec.Refused != "" {
		s.k.Log.WarnContext(ctx, "refused an app instance's reported address (the router's address rule)",
			"task", t.ID, "address", addr, "reason", rec.Refused)
	}
	t.Run.AppAddress, t.Run.AppAllow, t.Run.AppRefused = rec.Address, rec.Allow, rec.Refused
	s.k.Events.Publish(events.Event{TenantID: tenantID, Kind: "app.readiness", ObjectKind: "task", ObjectID: t.ID, GroupID: t.GroupID, At: s.k.Now()})
	return nil
}

// judgeAddress applies the router's address rule to an address reported
// from the request's peer by a worker of the pool.
func (s *Fleet) judgeAddress(ctx context.Context, tenantID, poolID, addr string) (model.AppAddress, error) {
	if addr == "" {
		return model.AppAddress{}, nil
	}
	pool, err := s.k.Store.GetPool(ctx, tenantID, poolID)
	if err != nil {
		return model.AppAddress{}, s.k.Internal(ctx, fmt.Errorf("read pool %s for the address rule: %w", poolID, err))
	}
	allow := appnet.NewAllow(pool.Local, identity.PeerFrom(ctx), pool.AppNetworks)
	rec := model.AppAddress{Address: addr, Allow: allow.String()}
	if why := appnet.CheckAddress(ctx, net.DefaultResolver, allow, s.agent.Own, addr); why != "" {
		rec.Refused = fmt.Sprintf("the address %s was refused: %s", addr, why)
	}
	return rec, nil
}

// ReportAppStatus records an app instance's readiness reported from where
// it runs rather than in its worker's heartbeat: an HPC job's in-job
// process probes the health path on its compute node and reports with its
// task credential (scoped to this attempt; myTask refuses any other). The
// instance must be running on the caller's worker; a bad address is
// refused here (the heartbeat's path ignores it, to keep the leases).
func (s *Fleet) ReportAppStatus(ctx context.Context, taskID string, req agentapi.AppReportRequest) error {
	w, err := workerFrom(ctx)
	if err != nil {
		return err
	}
	if req.Ready {
		addr := strings.TrimSpace(req.Address)
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" || len(addr) > 255 {
			return kernel.Invalid("address %s is not host:port: report where the instance answers, such as node17:41234", kernel.Quote(req.Address))
		}
	}
	t, err := s.myTask(ctx, s.k.Store, w, taskID, req.Attempt, true)
	if err != nil {
		return s.k.Internal(ctx, err)
	}
	if t.Spec.Kind != model.TaskKindApplication {
		return kernel.Invalid("task %s is not an app instance: only an app instance reports readiness", taskID)
	}
	st := req.AppStatus
	return s.appReadiness(ctx, w.TenantID, w.PoolID, t.Run.WorkerID, t, &st)
}

// busyAt is the latest of an app instance's points that shows it in use
// for its idle limits: GPU utilisation or CPU use at or over the idle
// thresholds (model.IdleGPUPercent, IdleCPUPercent).
func busyAt(points []model.MetricPoint) (time.Time, bool) {
	var last time.Time
	for _, p := range points {
		busy := (p.Name == "gpu.utilization" && p.Value >= model.IdleGPUPercent) ||
			(p.Name == "cpu.utilization" && p.Value >= model.IdleCPUPercent)
		if busy && p.At.After(last) {
			last = p.At
		}
	}
	return last, !last.IsZero()
}
