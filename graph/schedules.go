package graph

import (
	"github.com/klique-ai/klique/graph/gqlmodel"
	"github.com/klique-ai/klique/internal/model"
)

// scheduleTarget is the kind and id of the one target a schedule input
// names; the platform refuses none or an empty id with what to give.
func scheduleTarget(task, pipeline, study *string) (kind, id string) {
	switch {
	case pipeline != nil:
		return model.ScheduleTargetPipeline, *pipeline
	case study != nil:
		return model.ScheduleTargetStudy, *study
	}
	return model.ScheduleTargetTask, deref(task)
}

func scheduleTrigger(in *gqlmodel.ScheduleTriggerInput) *model.ScheduleTrigger {
	if in == nil {
		return nil
	}
	return &model.ScheduleTrigger{Event: in.Event, ProjectID: deref(in.Project), Tag: deref(in.Tag),
		Artifact: deref(in.Artifact), Pipeline: deref(in.Pipeline), State: deref(in.State)}
}
