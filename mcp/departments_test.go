package mcp_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

type treeNode struct {
	Name, Kind                       string
	ReservationGpus                  int
	LimitGpus, EffectiveLimitGpus    *int
	Weight                           int
	HeldGpus, BorrowedGpus, LentGpus float64
	HoldingTasks, WaitingTasks       int
	Parent                           string
	Level                            int
}

// lines renders a tree one node a line, indented by level.
func lines(nodes []*treeNode) string {
	var b strings.Builder
	for _, n := range nodes {
		lim := "-"
		if n.EffectiveLimitGpus != nil {
			lim = fmt.Sprint(*n.EffectiveLimitGpus)
		}
		fmt.Fprintf(&b, "%s%s %s (in %q) reserved=%d limit=%s weight=%d held=%g borrowed=%g lent=%g waiting=%d\n", strings.Repeat("  ", n.Level), n.Kind, n.Name, n.Parent,
			n.ReservationGpus, lim, n.Weight, n.HeldGpus, n.BorrowedGpus, n.LentGpus, n.WaitingTasks)
	}
	return b.String()
}

// TestListDepartments: with examples/departments.yaml applied, ml-research
// borrows 8 GPUs that vision and nlp leave idle; list_departments shows
// the tree level by level with those figures, and each caller only their
// part of it.
func TestListDepartments(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		doc, err := os.ReadFile("../examples/departments.yaml")
		if err != nil {
			t.Fatal(err)
		}
		b.Apply(t, doc)
		alice, vic := b.client(t, "alice"), b.client(t, "vic")
		for range 3 {
			ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "8 GPUs",
				"command": []string{"python", "train.py"}})
		}
		b.pass(t)
		ok[task](t, vic, "enqueue_task", map[string]any{"name": "detect", "project": "vision-detect", "computeResource": "8 GPUs",
			"command": []string{"python", "detect.py"}})

		type tree struct{ Nodes []*treeNode }
		got := lines(ok[tree](t, b.client(t, "admin"), "list_departments", nil).Nodes)
		want := `group nlp (in "") reserved=8 limit=16 weight=1 held=0 borrowed=0 lent=8 waiting=0
department research (in "") reserved=40 limit=64 weight=2 held=24 borrowed=0 lent=0 waiting=1
  group ml-research (in "research") reserved=16 limit=48 weight=1 held=24 borrowed=8 lent=0 waiting=0
  group vision (in "research") reserved=16 limit=32 weight=1 held=0 borrowed=0 lent=8 waiting=1
`
		if got != want {
			t.Errorf("the admin's tree:\n%s\nwant:\n%s", got, want)
		}
		// val, a viewer of ml-research, reads it too; vic sees research
		// and vision, not ml-research or nlp.
		got = lines(ok[tree](t, b.client(t, "val"), "list_departments", map[string]any{"department": "ml-research"}).Nodes)
		if want := "group ml-research (in \"\") reserved=16 limit=48 weight=1 held=24 borrowed=8 lent=0 waiting=0\n"; got != want {
			t.Errorf("val's ml-research:\n%s\nwant:\n%s", got, want)
		}
		got = lines(ok[tree](t, vic, "list_departments", nil).Nodes)
		want = `department research (in "") reserved=40 limit=64 weight=2 held=24 borrowed=0 lent=0 waiting=1
  group vision (in "research") reserved=16 limit=32 weight=1 held=0 borrowed=0 lent=8 waiting=1
`
		if got != want {
			t.Errorf("vic's tree:\n%s\nwant:\n%s", got, want)
		}
		if msg := refused(t, vic, "list_departments", map[string]any{"department": "nlp"}); !strings.Contains(msg, "nlp") {
			t.Errorf("vic asking for nlp: %s", msg)
		}
	})
}
