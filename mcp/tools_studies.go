package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/studies"
)

type searchParamArg struct {
	Name   string   `json:"name" jsonschema:"the parameter, as the base task's {name} templates and KLIQUE_PARAM_NAME read it"`
	Kind   string   `json:"kind" jsonschema:"choice (values), uniform or loguniform (lo, hi) or int (lo, hi, step; both ends included)"`
	Values []string `json:"values,omitempty" jsonschema:"for choice: the values to try"`
	Lo     float64  `json:"lo,omitempty" jsonschema:"for uniform, loguniform and int: the least value (above 0 for loguniform)"`
	Hi     float64  `json:"hi,omitempty" jsonschema:"for uniform, loguniform and int: the greatest value, above lo"`
	Step   int      `json:"step,omitempty" jsonschema:"for int: the step (1 when left out)"`
}

type startStudyArgs struct {
	Name            string           `json:"name" jsonschema:"a short name for the study; its trials are named after it"`
	BaseTask        string           `json:"baseTask" jsonschema:"the id of the run every trial clones, with its parameters set"`
	Project         string           `json:"project,omitempty" jsonschema:"the trials' project (the base task's when left out)"`
	ComputeResource string           `json:"computeResource,omitempty" jsonschema:"the trials' compute resource (the base task's when left out)"`
	Group           string           `json:"group,omitempty" jsonschema:"the group whose compute resource is meant, when several of your groups have one of that name"`
	Strategy        string           `json:"strategy" jsonschema:"grid (every point of choice and int parameters), random or halving (successive halving: random trials stopped early at rungs)"`
	Seed            int64            `json:"seed,omitempty" jsonschema:"makes random suggestions repeatable"`
	Objective       string           `json:"objective" jsonschema:"the metric the trials report and the study ranks them by, such as accuracy or val_loss"`
	Direction       string           `json:"direction,omitempty" jsonschema:"min or max (from the metric's name when left out: losses, errors and times are min)"`
	Summary         string           `json:"summary,omitempty" jsonschema:"final (the last value reported, the default) or best"`
	MaxConcurrent   int              `json:"maxConcurrent,omitempty" jsonschema:"trials at once (1 when left out)"`
	BudgetTrials    int              `json:"budgetTrials,omitempty" jsonschema:"the most trials (give this, budgetGpuHours or both)"`
	BudgetGPUHours  float64          `json:"budgetGpuHours,omitempty" jsonschema:"the most GPU-hours all trials may use, from the ledger"`
	Space           []searchParamArg `json:"space" jsonschema:"the parameters to search"`
	// Successive halving.
	Resource    string `json:"resource,omitempty" jsonschema:"halving: the parameter that sets epochs or steps, set to maxResource on every trial"`
	MinResource int    `json:"minResource,omitempty" jsonschema:"halving: the first rung"`
	MaxResource int    `json:"maxResource,omitempty" jsonschema:"halving: the resource every trial runs to unless stopped"`
	Eta         int    `json:"eta,omitempty" jsonschema:"halving: the top 1/eta continue at each rung (3 when left out)"`
}

type studyArgs struct {
	ID string `json:"id" jsonschema:"the study's id, as start_study gave it"`
}

type trialView struct {
	Number    int               `json:"number"`
	Params    map[string]string `json:"params"`
	State     string            `json:"state" jsonschema:"pending, running, completed, failed, aborted or stopped_early"`
	Objective *float64          `json:"objective,omitempty"`
	Step      int64             `json:"step,omitempty" jsonschema:"the step the objective was read at"`
	Reason    string            `json:"reason,omitempty" jsonschema:"why it stopped early, failed or was aborted"`
	TaskID    string            `json:"taskId,omitempty"`
}

type studyView struct {
	ID              string      `json:"id"`
	Name            string      `json:"name"`
	State           string      `json:"state" jsonschema:"running, completed or stopped"`
	Reason          string      `json:"reason,omitempty"`
	Strategy        string      `json:"strategy"`
	Objective       string      `json:"objective"`
	Direction       string      `json:"direction"`
	ComputeResource string      `json:"computeResource"`
	Project         string      `json:"project"`
	GPUHours        float64     `json:"gpuHours" jsonschema:"what the trials used"`
	Best            *trialView  `json:"best,omitempty" jsonschema:"the best completed trial so far"`
	Trials          []trialView `json:"trials" jsonschema:"ranked: completed by objective, then stopped early, then running, then failed and aborted"`
}

func (s *Server) addStudyTools() {
	addTool(s, toolDef{name: "start_study", title: "Start a hyperparameter search", writes: true, audited: true,
		description: "Search a run's parameters: trials are clones of the base task with their parameters set by the strategy (grid, random or successive halving), " +
			"run as your tasks on the compute resource under your group's policy, at most maxConcurrent at once, within the budget, and ranked by the objective metric. " +
			"Answers the study with its first trials."}, s.startStudy)
	addTool(s, toolDef{name: "get_study", title: "Get a study",
		description: "A hyperparameter search: its state, its trials ranked by the objective (parameters, value, state, why a trial stopped early) and the best so far."}, s.getStudy)
}

func (s *Server) startStudy(ctx context.Context, in *startStudyArgs) (*studyView, string, error) {
	if err := need(in.Name, "name", "a short name for the study"); err != nil {
		return nil, "", err
	}
	if err := need(in.BaseTask, "baseTask", "the id of the run the trials clone"); err != nil {
		return nil, "", err
	}
	spec := model.StudySpec{Strategy: in.Strategy, Seed: in.Seed, Objective: in.Objective, Direction: in.Direction, Summary: in.Summary,
		MaxConcurrent: in.MaxConcurrent, Budget: model.StudyBudget{Trials: in.BudgetTrials, GPUHours: in.BudgetGPUHours}, Space: []model.SearchParam{}}
	for _, p := range in.Space {
		spec.Space = append(spec.Space, model.SearchParam{Name: p.Name, Kind: p.Kind, Values: p.Values, Lo: p.Lo, Hi: p.Hi, Step: p.Step})
	}
	if in.Resource != "" || strings.EqualFold(strings.TrimSpace(in.Strategy), model.StrategyHalving) {
		spec.Halving = &model.Halving{Resource: in.Resource, MinResource: in.MinResource, MaxResource: in.MaxResource, Eta: in.Eta}
	}
	st, err := s.svc.Studies.StartStudy(ctx, studies.StartInput{Name: in.Name, BaseTask: in.BaseTask, Project: in.Project,
		ComputeResource: in.ComputeResource, Group: in.Group, Spec: spec})
	if err != nil {
		return nil, "", err
	}
	v, err := s.svc.Studies.StudyView(ctx, st.ID)
	if err != nil {
		return nil, "", err
	}
	return studyOut(v), "", nil
}

func (s *Server) getStudy(ctx context.Context, in *studyArgs) (*studyView, string, error) {
	if err := need(in.ID, "id", "the study's id, as start_study gave it"); err != nil {
		return nil, "", err
	}
	v, err := s.svc.Studies.StudyView(ctx, strings.TrimSpace(in.ID))
	if err != nil {
		return nil, "", err
	}
	return studyOut(v), fmt.Sprintf("read study %s (%s): %s, %d trials", quote(v.Study.Name), v.Study.ID, v.Study.State, len(v.Trials)), nil
}

func trialOut(tr *model.StudyTrial) trialView {
	return trialView{Number: tr.Number, Params: tr.Params, State: string(tr.State), Objective: tr.Objective, Step: tr.ObjectiveStep,
		Reason: tr.Reason, TaskID: tr.TaskID}
}

func studyOut(v *studies.View) *studyView {
	st := v.Study
	out := &studyView{ID: st.ID, Name: st.Name, State: string(st.State), Reason: st.Reason, Strategy: st.Spec.Strategy,
		Objective: st.Spec.Objective, Direction: st.Spec.Direction, ComputeResource: v.ComputeResourceName, Project: v.ProjectName,
		GPUHours: v.GPUHours, Trials: []trialView{}}
	for _, tr := range v.Trials {
		out.Trials = append(out.Trials, trialOut(tr))
	}
	if v.Best != nil {
		b := trialOut(v.Best)
		out.Best = &b
	}
	return out
}
