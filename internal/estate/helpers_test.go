package estate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

// baseEstate is a small valid estate with no warnings:
//
//	classes   h100 (80 GB), a100 (40 GB)
//	pools     k8s (kubernetes, 16 × h100), metal (bare_metal, 8 × a100), cloud (cloud, 8 × h100)
//	profiles  one-gpu (1; k8s, metal), eight (8, class h100; k8s, cloud),
//	          big-mem (1, ≥ 80 GB; k8s), multi (2x8; k8s)
//	groups    research, vision
//	policies  research 4/16; vision 2/8 with 100 h a week
//	compute   research: "1 GPU" one-gpu, "8 GPUs" eight, "multi-node" multi; vision: "1 GPU" one-gpu
//	projects  fraud (research, s3://research/fraud), shared
func baseEstate() *estate.Estate {
	size := func(nodes, per int) model.Size { return model.Size{Nodes: nodes, PerNode: model.GPUs(per)} }
	return &estate.Estate{
		GPUClasses: []*model.GPUClass{
			{ID: "c-h100", TenantID: "t", Name: "h100", MemoryGB: 80, PriceMicros: 2_400_000, Currency: "USD"},
			{ID: "c-a100", TenantID: "t", Name: "a100", MemoryGB: 40, PriceMicros: 1_000_000, Currency: "EUR"},
		},
		Pools: []*model.Pool{
			{ID: "p-k8s", TenantID: "t", Name: "k8s", Kind: model.PoolKubernetes, CapacityGPUs: 16, GPUClassID: "c-h100", GPUMemoryGB: 80,
				Labels: map[string]string{"site": "dc1"}},
			{ID: "p-metal", TenantID: "t", Name: "metal", Kind: model.PoolBareMetal, CapacityGPUs: 8, GPUClassID: "c-a100", GPUMemoryGB: 40},
			{ID: "p-cloud", TenantID: "t", Name: "cloud", Kind: model.PoolCloud, CapacityGPUs: 8, GPUClassID: "c-h100", GPUMemoryGB: 80},
		},
		Profiles: []*model.Profile{
			{ID: "pr-one", TenantID: "t", Name: "one-gpu", Size: size(1, 1), TimeWeightMilli: 1000, Pools: []string{"p-k8s", "p-metal"}},
			{ID: "pr-eight", TenantID: "t", Name: "eight", Size: size(1, 8), GPUClassID: "c-h100", TimeWeightMilli: 8000, Pools: []string{"p-k8s", "p-cloud"}},
			{ID: "pr-bigmem", TenantID: "t", Name: "big-mem", Size: size(1, 1), MinGPUMemoryGB: 80, TimeWeightMilli: 1000, Pools: []string{"p-k8s"}},
			{ID: "pr-multi", TenantID: "t", Name: "multi", Size: size(2, 8), TimeWeightMilli: 16000, Pools: []string{"p-k8s"}},
		},
		Groups: []*model.Group{
			{ID: "g-research", TenantID: "t", Name: "research"},
			{ID: "g-vision", TenantID: "t", Name: "vision"},
		},
		Policies: []*model.ResourcePolicy{
			{ID: "pol-research", TenantID: "t", GroupID: "g-research", ReservationGPUs: 4, LimitGPUs: 16,
				LowWatermark: model.DefaultLowWatermark, AlertThresholdPercent: 80},
			{ID: "pol-vision", TenantID: "t", GroupID: "g-vision", ReservationGPUs: 2, LimitGPUs: 8,
				Budget:       &model.TimeBudget{MilliHours: 100_000, Period: model.PeriodWeek},
				LowWatermark: model.DefaultLowWatermark, AlertThresholdPercent: 80},
		},
		ComputeResources: []*model.ComputeResource{
			{ID: "cr-r1", TenantID: "t", Name: "1 GPU", PolicyID: "pol-research", ProfileID: "pr-one"},
			{ID: "cr-r8", TenantID: "t", Name: "8 GPUs", PolicyID: "pol-research", ProfileID: "pr-eight"},
			{ID: "cr-rm", TenantID: "t", Name: "multi-node", PolicyID: "pol-research", ProfileID: "pr-multi"},
			{ID: "cr-v1", TenantID: "t", Name: "1 GPU", PolicyID: "pol-vision", ProfileID: "pr-one"},
		},
		Projects: []*model.Project{
			{ID: "prj-fraud", TenantID: "t", Name: "fraud", GroupID: "g-research", OutputDestination: "s3://research/fraud"},
			{ID: "prj-shared", TenantID: "t", Name: "shared"},
		},
	}
}

// examplePath is the shipped example estate file.
func examplePath(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the test's own file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "examples", "estate.yaml")
}

func readExample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(examplePath(t))
	if err != nil {
		t.Fatalf("read example estate: %v", err)
	}
	return data
}

// exampleEstate parses and applies the example onto an empty estate.
func exampleEstate(t testing.TB) *estate.Estate {
	t.Helper()
	doc, err := estate.ParseDocument(readExample(t))
	if err != nil {
		t.Fatalf("parse example: %v", err)
	}
	e, err := doc.Apply(&estate.Estate{}, "t", estatetest.SeqIDs("ex"), estatetest.Now)
	if err != nil {
		t.Fatalf("apply example: %v", err)
	}
	return e
}

func warningList(ws []estate.Warning) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "\n  - [%s] %s", w.Code, w.String())
	}
	return b.String()
}

// policyOf is the resource policy of the named group, nil when there is
// no such group or it has no policy.
func policyOf(e *estate.Estate, group string) *model.ResourcePolicy {
	g := e.GroupByName(group)
	if g == nil {
		return nil
	}
	return e.PolicyOfGroup(g.ID)
}
