package estate_test

import (
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

func TestWarnings(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		mutate func(e *estate.Estate)
		// want lists, per expected warning in order, its code, object and
		// words of its message.
		want []wantWarning
	}{
		{
			name: "one group reserving more than all the pools behind it is warned about",
			mutate: func(e *estate.Estate) {
				// research reaches k8s (16), metal (8) and cloud (8): 32.
				pol := policyOf(e, "research")
				pol.ReservationGPUs, pol.LimitGPUs = 40, 40
			},
			want: []wantWarning{
				{"RESERVATIONS_EXCEED_CAPACITY", `group "research"`, []string{"reservation of group research is 40 GPUs", "more than the 32 GPUs", "(cloud, k8s, metal)", "guarantee cannot always be met"}},
				// Together with vision's 2 the shared pools are short too.
				{"RESERVATIONS_EXCEED_CAPACITY", `pool "k8s"`, []string{"research (40), vision (2) add up to 42 GPUs", "more than the 32 GPUs"}},
			},
		},
		{
			name: "two groups that fit alone but not together on a shared pool are warned about once",
			mutate: func(e *estate.Estate) {
				r := policyOf(e, "research")
				r.ReservationGPUs, r.LimitGPUs = 20, 20 // reaches 32
				v := policyOf(e, "vision")
				v.ReservationGPUs, v.LimitGPUs = 14, 14 // reaches k8s and metal: 24
			},
			want: []wantWarning{
				// k8s and metal are both shared by the same two groups: one
				// warning, on the first of them.
				{"RESERVATIONS_EXCEED_CAPACITY", `pool "k8s"`, []string{"reservations of groups research (20), vision (14) add up to 34 GPUs", "more than the 32 GPUs declared", "(cloud, k8s, metal)"}},
			},
		},
		{
			name: "a group with a reservation and no pool at all is warned about",
			mutate: func(e *estate.Estate) {
				e.ComputeResources = []*model.ComputeResource{e.ComputeResource("cr-r1")}
				e.ProfileByName("one-gpu").Pools = nil
				policyOf(e, "vision").ReservationGPUs = 0
			},
			want: []wantWarning{
				{"RESERVATIONS_EXCEED_CAPACITY", `group "research"`, []string{"reservation of group research is 4 GPUs", "more than the 0 GPUs", "(no pool)"}},
				{"NO_POOL", `compute resource "1 GPU" of group "research"`, []string{`profile "one-gpu" lists no pool`, "will wait"}},
			},
		},
		{
			name:   "a profile larger than a pool's capacity is warned about",
			mutate: func(e *estate.Estate) { e.PoolByName("cloud").CapacityGPUs = 4 },
			want: []wantWarning{
				{"PROFILE_LARGER_THAN_POOL", `profile "eight"`, []string{"its size 8 is more than the 4 GPUs declared for pool \"cloud\"", "no task of that size can be placed there"}},
			},
		},
		{
			name: "a compute resource whose profile has no pools is warned about",
			mutate: func(e *estate.Estate) {
				e.Profiles = append(e.Profiles, &model.Profile{ID: "pr-none", Name: "nowhere", Size: model.Size{Nodes: 1, PerNode: 500}, TimeWeightMilli: 1000})
				e.ComputeResources = append(e.ComputeResources, &model.ComputeResource{ID: "cr-none", Name: "half GPU", PolicyID: "pol-vision", ProfileID: "pr-none"})
			},
			want: []wantWarning{
				{"NO_POOL", `compute resource "half GPU" of group "vision"`, []string{`profile "nowhere" lists no pool`}},
			},
		},
		{
			name: "reservations that fit exactly are not warned about",
			mutate: func(e *estate.Estate) {
				r := policyOf(e, "research")
				r.ReservationGPUs, r.LimitGPUs = 24, 24
				v := policyOf(e, "vision")
				v.ReservationGPUs = 8
			},
		},
		{
			name: "a group without a reservation is not counted against the pools",
			mutate: func(e *estate.Estate) {
				// vision alone now reaches only metal (8 GPUs).
				e.ProfileByName("one-gpu").Pools = []string{"p-metal"}
				policyOf(e, "vision").ReservationGPUs = 0
				r := policyOf(e, "research")
				r.ReservationGPUs = 16 // research reaches metal, k8s and cloud: 32
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := baseEstate()
			tc.mutate(e)
			if err := e.Validate(); err != nil {
				t.Fatalf("the estate must stay valid: %v", err)
			}
			ws := e.Warnings()
			if len(ws) != len(tc.want) {
				t.Fatalf("%d warnings, want %d:%s", len(ws), len(tc.want), warningList(ws))
			}
			for i, w := range tc.want {
				got := ws[i]
				if got.Code != w.code || got.Object != w.object || !estatetest.ContainsAll(got.Message, w.words...) {
					t.Errorf("warning %d = [%s] %s\nwant [%s] %s: holding %q", i, got.Code, got.String(), w.code, w.object, w.words)
				}
			}
			// Warnings are in a stable order.
			again := e.Warnings()
			for i := range ws {
				if ws[i] != again[i] {
					t.Fatalf("warnings changed order between calls:%s\nthen:%s", warningList(ws), warningList(again))
				}
			}
		})
	}

	t.Run("the shipped example estate has no warnings", func(t *testing.T) {
		t.Parallel()
		if ws := exampleEstate(t).Warnings(); len(ws) > 0 {
			t.Fatalf("warnings on examples/estate.yaml:%s", warningList(ws))
		}
	})
}

type wantWarning struct {
	code, object string
	words        []string
}
