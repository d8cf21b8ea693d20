package studies

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Interval is how often the server runs the controller's pass.
const Interval = 2 * time.Second

// errRaced says another pass (another replica's) changed the study since
// this one read it: this pass's plan is dropped, the other's stands.
var errRaced = kernel.ErrRollback

// ReconcileStudies runs one pass of the controller over every running study, in
// every tenant: it records the trials whose tasks ended, stops trials
// early by successive halving, enforces the budgets, enqueues new trials
// up to each study's concurrency and ends the studies that are done. It
// is idempotent and safe to run on several replicas at once.
func (s *Studies) ReconcileStudies(ctx context.Context) error {
	list, err := s.k.Store.ListRunningStudies(ctx)
	if err != nil {
		return fmt.Errorf("list running studies: %w", err)
	}
	var errs []error
	for _, st := range list {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.reconcile(ctx, st.TenantID, st.ID); err != nil {
			errs = append(errs, fmt.Errorf("study %s: %w", st.ID, err))
		}
	}
	return errors.Join(errs...)
}

// ReconcileStudy runs the controller's pass over one study the caller
// may see (tests, and a faster reaction than the next tick).
func (s *Studies) ReconcileStudy(ctx context.Context, id string) error {
	st, err := s.Study(ctx, id)
	if err != nil {
		return err
	}
	return s.reconcile(ctx, st.TenantID, st.ID)
}

func (s *Studies) reconcile(ctx context.Context, tenantID, id string) error {
	st, err := s.k.Store.GetStudy(ctx, tenantID, id)
	if err != nil {
		return err
	}
	if st.State.Final() {
		return nil
	}
	sys := kernel.System(tenantID, actor(st))
	owner, err := identity.LoadPrincipal(ctx, s.k.Store, tenantID, st.OwnerID)
	if errors.Is(err, identity.ErrUnauthenticated) {
		_, err := s.end(ctx, sys, st, model.StudyStopped, "stopped: its owner can no longer start work (the user was disabled or removed)")
		return ignoreRace(err)
	}
	if err != nil {
		return err
	}
	trials, err := s.k.Store.ListStudyTrials(ctx, tenantID, id)
	if err != nil {
		return err
	}
	// Trials left pending by a pass that ended before enqueueing them
	// (a crash, a restart) are enqueued first: the idempotency key makes a
	// second enqueue of the same trial return its task.
	ownerCtx := identity.WithPrincipal(ctx, owner)
	if err := s.enqueuePending(ownerCtx, sys, st, trials); err != nil {
		return err
	}
	obs, gpuHours, err := s.observe(ctx, st, trials)
	if err != nil {
		return err
	}
	p := decider{summarize: s.d.Summarize}.decide(*st, trials, obs, gpuHours, s.k.Now())
	if len(p.Changed) == 0 && len(p.Added) == 0 && p.Study.State == st.State && p.Study.BestTaskID == st.BestTaskID {
		return nil
	}
	applied, err := kernel.RunAs(ctx, s.k, sys, kernel.Op[bool]{
		Name: "reconcileStudy", Unaudited: true,
		Body: func(t *kernel.Txn) (bool, kernel.Audit, error) { return applyPlan(t, st, p) },
	})
	if err != nil || !applied {
		return ignoreRace(err)
	}
	s.stopTasks(ctx, st, p.Stop)
	return s.enqueuePending(ownerCtx, sys, st, append(trials, p.Added...))
}

// applyPlan writes a pass's plan for study st: the trials it changed and
// added and the study itself, with an entry for each trial stopped early
// and one for the study's completion, each a fact of its own; other
// progress is published without an entry. It reports false, writing
// nothing, when another pass changed the study first (errRaced).
func applyPlan(t *kernel.Txn, st *model.Study, p plan) (bool, kernel.Audit, error) {
	ctx := t.Ctx
	var entries []kernel.Audit
	for _, tr := range p.Changed {
		if err := t.Q.UpdateStudyTrial(ctx, tr); err != nil {
			return false, kernel.Audit{}, err
		}
		if tr.State == model.TrialStoppedEarly {
			entries = append(entries, studyAudit("study.trial_stopped", st, fmt.Sprintf("trial %d: %s", tr.Number, tr.Reason)))
		}
	}
	for _, tr := range p.Added {
		if err := t.Q.CreateStudyTrial(ctx, tr); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return false, kernel.Audit{}, errRaced
			}
			return false, kernel.Audit{}, err
		}
	}
	next := p.Study
	next.UpdatedAt = t.Now
	if err := t.Q.UpdateStudy(ctx, &next); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, kernel.Audit{}, errRaced
		}
		return false, kernel.Audit{}, err
	}
	if next.State == model.StudyCompleted {
		entries = append(entries, studyAudit("study.completed", st, next.Reason))
	} else {
		t.Publish(studyEvent(t, st, "study.changed"))
	}
	return true, kernel.Entries(entries...), nil
}

// studyAudit is an audit entry about study st.
func studyAudit(action string, st *model.Study, detail string) kernel.Audit {
	return kernel.Audit{Action: action, Kind: "study", ID: st.ID, Name: st.Name, GroupID: st.GroupID, Detail: detail}
}

// ignoreRace drops the error of a pass another replica beat to the study.
func ignoreRace(err error) error {
	if errors.Is(err, errRaced) || kernel.ErrorCode(err) == kernel.CodeConflict {
		return nil
	}
	return err
}

// enqueuePending enqueues, as the owner, each pending trial that has no
// task yet, and links the trial to it. A refusal of the owner's work
// (the compute resource closed to them, a budget policy, an invalid
// spec) fails the trial with the refusal as its reason.
func (s *Studies) enqueuePending(ownerCtx context.Context, sys *identity.Principal, st *model.Study, trials []*model.StudyTrial) error {
	for _, tr := range trials {
		if tr.State != model.TrialPending || tr.TaskID != "" {
			continue
		}
		name := fmt.Sprintf("%s-%d", st.Name, tr.Number)
		task, err := s.d.Clone(ownerCtx, st.BaseTaskID, name, trialParams(st, tr), st.ProjectID, st.ComputeResourceID, "study-"+st.ID+"-trial-"+fmt.Sprint(tr.Number))
		if err != nil {
			var ke *kernel.Error
			if !errors.As(err, &ke) {
				return fmt.Errorf("enqueue trial %d: %w", tr.Number, err)
			}
			if err := s.failTrial(ownerCtx, sys, st, tr, "not enqueued: "+ke.Message); err != nil {
				return err
			}
			continue
		}
		linked, err := s.k.Store.SetStudyTrialTask(ownerCtx, st.TenantID, st.ID, tr.Number, task.ID)
		if err != nil {
			return fmt.Errorf("link trial %d to task %s: %w", tr.Number, task.ID, err)
		}
		if linked {
			tr.TaskID, tr.State = task.ID, model.TrialRunning
			s.k.Events.Publish(studyEvent(nil, st, "study.changed"))
		}
	}
	return nil
}

// failTrial records a trial whose task could not be enqueued.
func (s *Studies) failTrial(ctx context.Context, sys *identity.Principal, st *model.Study, tr *model.StudyTrial, why string) error {
	_, err := kernel.RunAs(ctx, s.k, sys, kernel.Op[struct{}]{
		Name: "failStudyTrial",
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			cur, err := t.Q.ListStudyTrials(ctx, st.TenantID, st.ID)
			if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			for _, c := range cur {
				if c.Number == tr.Number && c.State == model.TrialPending && c.TaskID == "" {
					now := t.Now
					c.State, c.Reason, c.EndedAt = model.TrialFailed, why, &now
					*tr = *c
					return struct{}{}, studyAudit("study.trial_failed", st, fmt.Sprintf("trial %d: %s", c.Number, why)), t.Q.UpdateStudyTrial(ctx, c)
				}
			}
			// Another pass enqueued or failed it first.
			return struct{}{}, kernel.Audit{}, kernel.ErrRollback
		},
	})
	return ignoreRace(err)
}

// observe reads each trial's task, the objective's points and the
// GPU-hours the trials used (from the ledger, open intervals to now).
func (s *Studies) observe(ctx context.Context, st *model.Study, trials []*model.StudyTrial) (map[int]observation, float64, error) {
	obs := map[int]observation{}
	var gpuHours float64
	now := s.k.Now()
	halving := st.Spec.Strategy == model.StrategyHalving
	for _, tr := range trials {
		if tr.TaskID == "" {
			continue
		}
		if st.Spec.Budget.GPUHours > 0 {
			ps, err := s.k.Store.ListPlacements(ctx, st.TenantID, store.PlacementFilter{TaskID: tr.TaskID})
			if err != nil {
				return nil, 0, err
			}
			for _, pl := range ps {
				end := now
				if pl.EndedAt != nil {
					end = *pl.EndedAt
				}
				gpuHours += pl.Size.Float() * end.Sub(pl.StartedAt).Hours()
			}
		}
		// Ended trials matter again only to successive halving, whose
		// rungs compare every trial that reached them.
		if tr.State.Final() && !halving {
			continue
		}
		var ob observation
		if !tr.State.Final() {
			task, err := s.k.Store.GetTask(ctx, st.TenantID, tr.TaskID)
			if err != nil {
				return nil, 0, err
			}
			ob.Status, ob.Reason, ob.FinishedAt = task.Status, task.Reason, task.FinishedAt
		}
		points, err := s.points(ctx, st.TenantID, tr.TaskID, st.Spec.Objective)
		if err != nil {
			return nil, 0, err
		}
		ob.Points = points
		obs[tr.Number] = ob
	}
	return obs, gpuHours, nil
}

// points reads every point of one metric of a task, page by page.
func (s *Studies) points(ctx context.Context, tenantID, taskID, metric string) ([]model.MetricPoint, error) {
	var all []model.MetricPoint
	var after int64
	for {
		page, err := s.k.Store.ListMetrics(ctx, tenantID, taskID, metric, after, 10000)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < 10000 {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

// studyEvent is the event a study's change publishes (studyChanged).
func studyEvent(t *kernel.Txn, st *model.Study, kind string) events.Event {
	at := time.Now().UTC()
	if t != nil {
		at = t.Now
	}
	return events.Event{TenantID: st.TenantID, Kind: kind, ObjectKind: "study", ObjectID: st.ID, ObjectName: st.Name, GroupID: st.GroupID, At: at}
}
