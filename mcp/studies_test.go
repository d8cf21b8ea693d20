package mcp_test

import (
	"strings"
	"testing"
)

type studyOut struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Direction string `json:"direction"`
	Trials    []struct {
		Number int               `json:"number"`
		Params map[string]string `json:"params"`
		State  string            `json:"state"`
		TaskID string            `json:"taskId"`
	} `json:"trials"`
}

func TestStartAndGetStudy(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice, vic, val := b.client(t, "alice"), b.client(t, "vic"), b.client(t, "val") // val is not offered start_study (TestToolsAreListedByRole)
	type taskOut struct {
		ID string `json:"id"`
	}
	base := ok[taskOut](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command": []string{"python", "train.py", "--lr", "{lr}"}, "parameters": map[string]string{"lr": "0.1"}})
	args := map[string]any{"name": "lr-grid", "baseTask": base.ID, "strategy": "grid", "objective": "val_loss", "maxConcurrent": 2,
		"budgetTrials": 3, "space": []map[string]any{{"name": "lr", "kind": "choice", "values": []string{"0.01", "0.1", "1"}}}}
	st := ok[studyOut](t, alice, "start_study", args)
	if st.State != "running" || st.Direction != "min" || len(st.Trials) != 2 || st.Trials[0].TaskID == "" || st.Trials[0].Params["lr"] != "0.01" {
		t.Fatalf("started %+v: two trials at once, a loss minimised", st)
	}
	got := ok[studyOut](t, val, "get_study", map[string]any{"id": st.ID})
	if got.ID != st.ID || len(got.Trials) != 2 {
		t.Fatalf("the viewer of ml-research reads %+v", got)
	}
	for _, c := range []struct {
		name string
		msg  string
		want string
	}{
		{"another group's study", refused(t, vic, "get_study", map[string]any{"id": st.ID}), "no study"},
		{"a study over another group's task", refused(t, vic, "start_study", args), "no task"},
		{"an empty space", refused(t, alice, "start_study", map[string]any{"name": "x", "baseTask": base.ID, "strategy": "random",
			"objective": "accuracy", "budgetTrials": 2, "space": []map[string]any{}}), "the search space is empty"},
		{"lo >= hi", refused(t, alice, "start_study", map[string]any{"name": "x", "baseTask": base.ID, "strategy": "random",
			"objective": "accuracy", "budgetTrials": 2, "space": []map[string]any{{"name": "lr", "kind": "uniform", "lo": 1, "hi": 1}}}), "needs lo < hi"},
	} {
		if !strings.Contains(c.msg, c.want) {
			t.Errorf("%s: %q, want it to say %q", c.name, c.msg, c.want)
		}
	}
}
