package schedules

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Starter starts what a schedule targets (a task clone, a pipeline run, a
// study). Both methods run as the schedule's owner: the context carries
// their principal, and the starter goes through its domain's governed
// path, so every rule of a person starting it by hand applies.
type Starter interface {
	// Check says whether the caller may start the target, before a
	// schedule is saved, and returns its name to show and its project. It
	// starts nothing.
	Check(ctx context.Context, targetID string, params map[string]string) (Target, error)
	// Start starts the target with the parameter overrides and returns
	// the id of what it started (a task, a pipeline run, a study). Key is
	// an idempotency key (kernel.Idempotency): a second Start with the
	// same key and input must return the first one's id and start
	// nothing. Refusals are *kernel.Error; a refusal of access
	// (FORBIDDEN, NOT_FOUND, UNAUTHENTICATED) pauses the schedule.
	Start(ctx context.Context, targetID string, params map[string]string, key string) (runID string, err error)
}

// Target is what a schedule starts, as Check finds it: its name, and the
// project it is in (what the cap on schedules per project counts).
type Target struct {
	Name      string
	ProjectID string
}

// StarterFuncs is a Starter made of two functions, for wiring a domain's
// methods at the composition root.
type StarterFuncs struct {
	CheckFunc func(ctx context.Context, targetID string, params map[string]string) (Target, error)
	StartFunc func(ctx context.Context, targetID string, params map[string]string, key string) (string, error)
}

// Check calls CheckFunc.
func (f StarterFuncs) Check(ctx context.Context, id string, params map[string]string) (Target, error) {
	return f.CheckFunc(ctx, id, params)
}

// Start calls StartFunc.
func (f StarterFuncs) Start(ctx context.Context, id string, params map[string]string, key string) (string, error) {
	return f.StartFunc(ctx, id, params, key)
}

// TaskStarter starts a task target: a clone of the task with the
// schedule's parameters over the original's (tasks.CloneTask). The
// facade wires the tasks domain's methods in.
func TaskStarter(get func(ctx context.Context, id string) (*model.Task, error),
	clone func(ctx context.Context, id string, overrides map[string]string, key string) (*model.Task, error)) Starter {
	return StarterFuncs{
		CheckFunc: func(ctx context.Context, id string, _ map[string]string) (Target, error) {
			t, err := get(ctx, id)
			if err != nil {
				return Target{}, err
			}
			return Target{Name: t.Name, ProjectID: t.ProjectID}, nil
		},
		StartFunc: func(ctx context.Context, id string, params map[string]string, key string) (string, error) {
			t, err := clone(ctx, id, params, key)
			if err != nil {
				return "", err
			}
			return t.ID, nil
		},
	}
}

// TriggerMatch is one event a trigger schedule fires for (model.TriggerMatch).
type TriggerMatch = model.TriggerMatch

// TriggerSource finds the events of one kind (model.Trigger*) a trigger
// matches, from what the database holds, so that a trigger is matched
// after a restart as well as on the live event. A domain implements it
// structurally (its types are the model's), so it need not import this
// package.
type TriggerSource interface {
	// Validate checks a trigger of this kind as the caller (who must see
	// what it names) and returns it normalised (names resolved to ids).
	Validate(ctx context.Context, trig model.ScheduleTrigger) (model.ScheduleTrigger, error)
	// Matches lists the events of tenant that match trig and happened
	// in (since, until], oldest first, at most limit. ctx acts as the
	// schedule's owner: a source keeps only the events they may see.
	Matches(ctx context.Context, tenantID string, trig model.ScheduleTrigger, since, until time.Time, limit int) ([]TriggerMatch, error)
}

// wakeEvents are the events on the bus (kernel Txn.Record actions) after
// which a trigger may match: a task ending, an artifact published
// (artifacts' record), a pipeline run ending (the pipelines controller's
// and abort's pipeline_run.<state>). They only make the pass run sooner;
// each event's TriggerSource is what matches.
var wakeEvents = map[string]bool{
	"task.completed": true, "task.finished": true,
	model.TriggerArtifactPublished:                       true,
	"pipeline_run." + string(model.PipelineRunCompleted): true,
	"pipeline_run." + string(model.PipelineRunFailed):    true,
	"pipeline_run." + string(model.PipelineRunAborted):   true,
}

// Wakes reports whether an event of kind on the bus may fire a trigger, so
// the server runs the pass at once.
func Wakes(kind string) bool { return wakeEvents[kind] }

// triggerFields are the fields each trigger event takes; a field of
// another event is refused rather than ignored.
var triggerFields = map[string][]string{
	model.TriggerTaskCompleted:     {"project", "tag"},
	model.TriggerArtifactPublished: {"artifact", "project"},
	model.TriggerPipelineFinished:  {"pipeline", "project", "state"},
}

// strayFields names the fields trig sets that its event does not take.
func strayFields(trig model.ScheduleTrigger) []string {
	set := map[string]bool{"project": trig.ProjectID != "", "tag": trig.Tag != "", "artifact": trig.Artifact != "",
		"pipeline": trig.Pipeline != "", "state": trig.State != ""}
	for _, f := range triggerFields[trig.Event] {
		delete(set, f)
	}
	var out []string
	for _, f := range []string{"project", "tag", "artifact", "pipeline", "state"} {
		if set[f] {
			out = append(out, f)
		}
	}
	return out
}

// taskCompleted is the source of TriggerTaskCompleted: tasks of a
// project that completed with a tag.
type taskCompleted struct{ k *kernel.Kernel }

func (s taskCompleted) Validate(ctx context.Context, trig model.ScheduleTrigger) (model.ScheduleTrigger, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return trig, err
	}
	if trig.Tag == "" {
		return trig, kernel.Invalid("a task.completed trigger needs a tag: the schedule fires when a task of the project completes with it")
	}
	if trig.ProjectID == "" {
		return trig, kernel.Invalid("a task.completed trigger needs a project: the schedule fires when a task of it completes with tag %s", kernel.Quote(trig.Tag))
	}
	pr, err := s.k.UsedProject(ctx, p, trig.ProjectID)
	if err != nil {
		return trig, err
	}
	return model.ScheduleTrigger{Event: trig.Event, ProjectID: pr.ID, Tag: trig.Tag}, nil
}

func (s taskCompleted) Matches(ctx context.Context, tenantID string, trig model.ScheduleTrigger, since, until time.Time, limit int) ([]TriggerMatch, error) {
	ts, err := s.k.Store.ListFinishedTasks(ctx, tenantID, trig.ProjectID, trig.Tag, model.TaskCompleted, since, until, limit)
	if err != nil {
		return nil, err
	}
	out := make([]TriggerMatch, 0, len(ts))
	for _, t := range ts {
		out = append(out, TriggerMatch{Key: "task:" + t.ID, At: *t.FinishedAt})
	}
	return out, nil
}

// accessLost reports whether a refusal means the owner may no longer
// start the target: the schedule then pauses instead of trying again.
func accessLost(err error) bool {
	switch kernel.ErrorCode(err) {
	case kernel.CodeForbidden, kernel.CodeNotFound, kernel.CodeUnauthenticated:
		return true
	}
	return false
}

// isRefusal reports whether err is a refusal a person can act on (as
// opposed to an internal failure, which the next pass retries).
func isRefusal(err error) bool {
	return kernel.ErrorCode(err) != kernel.CodeInternal
}
