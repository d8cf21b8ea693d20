package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// addFixtureStudy gives the fixture a study of alice's in ml-research,
// over her task, ended (so no controller starts trials that would change
// the other cases' queues), with one trial: her task.
func addFixtureStudy(t *testing.T, ts *testServer, f *fixture) {
	t.Helper()
	now := time.Now().UTC()
	st := &model.Study{TenantID: f.id(t, "tenant default"), ProjectID: f.id(t, "project fraud-models"), OwnerID: f.id(t, "user alice"),
		GroupID: f.id(t, "group ml-research"), ComputeResourceID: f.id(t, "cr ml-research/1 GPU"), Name: "lr-sweep-fraud", BaseTaskID: f.id(t, "task"),
		Spec: model.StudySpec{Strategy: model.StrategyRandom, Seed: 1, Objective: "accuracy", Direction: "max", Summary: "final", MaxConcurrent: 1,
			Budget: model.StudyBudget{Trials: 1}, Space: []model.SearchParam{{Name: "lr", Kind: model.ParamUniform, Lo: 0.01, Hi: 0.1}}},
		State: model.StudyCompleted, Reason: "its budget of 1 trials is spent", CreatedAt: now, UpdatedAt: now, FinishedAt: &now}
	ctx := context.Background()
	if err := ts.app.Store.CreateStudy(ctx, st); err != nil {
		t.Fatal(err)
	}
	tr := &model.StudyTrial{TenantID: st.TenantID, StudyID: st.ID, Number: 0, TaskID: f.id(t, "task"), Params: map[string]string{"lr": "0.05"},
		State: model.TrialRunning, CreatedAt: now}
	if err := ts.app.Store.CreateStudyTrial(ctx, tr); err != nil {
		t.Fatal(err)
	}
	f.ids["study"] = st.ID
}

// studyIsolationCases are the isolation cases of studies: another
// tenant's and another group's studies are not found, and a viewer may
// read but not start or stop one.
var studyIsolationCases = []isoCase{
	{field: "Query.studies", as: otherAdmin, name: "sees none of tenant default's studies",
		query: `{ studies { id name owner project } }`, check: all(wantPlainList("studies", []string{"name"}), noneOf("studies", "lr-sweep-fraud"))},
	{field: "Query.studies", as: victor, name: "sees none of ml-research's studies",
		query: `{ studies { id name trials { taskId } } }`, check: wantPlainList("studies", []string{"name"})},
	{field: "Query.studies", as: viewer, name: "sees ml-research's study",
		query: `{ studies(project: "fraud-models") { name owner trials { number params } } }`, check: wantPlainList("studies", []string{"name"}, "lr-sweep-fraud")},
	{field: "Query.study", as: otherAdmin, name: "cannot read alice's study by its id",
		query: `query($id: ID!) { study(id: $id) { name trials { taskId } } }`, vars: map[string]any{"id": ref("study")}, code: notFound},
	{field: "Query.study", as: victor, name: "cannot read alice's study by its id",
		query: `query($id: ID!) { study(id: $id) { name } }`, vars: map[string]any{"id": ref("study")}, code: notFound},
	{field: "Mutation.startStudy", as: otherAdmin, name: "cannot start a study over alice's task",
		query: `mutation($base: ID!) { startStudy(input: {name: "s", baseTask: $base, project: "other-project", strategy: "random", objective: "accuracy",
			budget: {trials: 2}, space: [{name: "lr", kind: "uniform", lo: 0.1, hi: 1}]}) { id } }`, vars: map[string]any{"base": ref("task")}, code: notFound},
	{field: "Mutation.startStudy", as: victor, name: "cannot start a study over alice's task",
		query: `mutation($base: ID!) { startStudy(input: {name: "s", baseTask: $base, project: "shared-eval", computeResource: "1 GPU", strategy: "random",
			objective: "accuracy", budget: {trials: 2}, space: [{name: "lr", kind: "uniform", lo: 0.1, hi: 1}]}) { id } }`,
		vars: map[string]any{"base": ref("task")}, code: notFound},
	{field: "Mutation.startStudy", as: viewer, name: "may see alice's task but not start a study",
		query: `mutation($base: ID!) { startStudy(input: {name: "s", baseTask: $base, strategy: "random", objective: "accuracy",
			budget: {trials: 2}, space: [{name: "lr", kind: "uniform", lo: 0.1, hi: 1}]}) { id } }`, vars: map[string]any{"base": ref("task")}, code: forbidden},
	{field: "Mutation.stopStudy", as: otherAdmin, name: "cannot stop alice's study",
		query: `mutation($id: ID!) { stopStudy(id: $id) { state } }`, vars: map[string]any{"id": ref("study")}, code: notFound},
	{field: "Mutation.stopStudy", as: victor, name: "cannot stop alice's study",
		query: `mutation($id: ID!) { stopStudy(id: $id) { state } }`, vars: map[string]any{"id": ref("study")}, code: notFound},
	{field: "Mutation.stopStudy", as: viewer, name: "may see but not stop alice's study",
		query: `mutation($id: ID!) { stopStudy(id: $id) { state } }`, vars: map[string]any{"id": ref("study")}, code: forbidden},
}
