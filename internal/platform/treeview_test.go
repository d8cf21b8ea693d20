package platform_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// treeLines renders a policy tree one node a line, indented by depth, with
// the figures the channels show.
func treeLines(nodes []*platform.TreeNode) string {
	var b strings.Builder
	var walk func(n *platform.TreeNode)
	walk = func(n *platform.TreeNode) {
		limit := "-"
		if n.EffectiveLimitGPUs != nil {
			limit = fmt.Sprint(*n.EffectiveLimitGPUs)
		}
		fmt.Fprintf(&b, "%s%s reserved=%d limit=%s weight=%d held=%s borrowed=%s lent=%s waiting=%d\n", strings.Repeat("  ", n.Depth), n.Group.Name,
			n.ReservedGPUs, limit, n.Weight, n.Held, n.Borrowed, n.Lent, n.Waiting)
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range nodes {
		walk(n)
	}
	return b.String()
}

// TestPolicyTree: nlp borrows 8 GPUs above its reservation while
// ml-research uses half of its own; the tree shows who holds, borrows and
// lends at each level, and each caller sees only their part of it.
func TestPolicyTree(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		b.Apply(t, []byte(exampleTree))
		ps := b.people(t)
		enqueue(t, b, b.Admin, "shared-eval", "8 GPUs", "nlp", nil)
		enqueue(t, b, b.Admin, "shared-eval", "8 GPUs", "nlp", nil)
		enqueue(t, b, ps.rita, "fraud-models", "8 GPUs", "", nil)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		if _, err := eng.PassAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		enqueue(t, b, ps.vic, "vision-detect", "8 GPUs", "", nil)

		tree, err := b.Svc.PolicyTree(b.Admin, "")
		platformtest.Must(t, err)
		want := `company reserved=40 limit=- weight=1 held=8 borrowed=0 lent=8 waiting=1
  research reserved=40 limit=64 weight=2 held=8 borrowed=0 lent=8 waiting=1
    ml-research reserved=16 limit=48 weight=1 held=8 borrowed=0 lent=8 waiting=0
    vision reserved=16 limit=32 weight=1 held=0 borrowed=0 lent=8 waiting=1
nlp reserved=8 limit=16 weight=1 held=16 borrowed=8 lent=0 waiting=0
`
		if got := treeLines(tree); got != want {
			t.Errorf("the admin's tree:\n%s\nwant:\n%s", got, want)
		}

		tree, err = b.Svc.PolicyTree(ps.vic, "")
		platformtest.Must(t, err)
		want = `company reserved=40 limit=- weight=1 held=8 borrowed=0 lent=8 waiting=1
  research reserved=40 limit=64 weight=2 held=8 borrowed=0 lent=8 waiting=1
    vision reserved=16 limit=32 weight=1 held=0 borrowed=0 lent=8 waiting=1
`
		if got := treeLines(tree); got != want {
			t.Errorf("vic's tree (vision only below research, no nlp):\n%s\nwant:\n%s", got, want)
		}

		tree, err = b.Svc.PolicyTree(b.Admin, "research")
		platformtest.Must(t, err)
		if len(tree) != 1 || tree[0].Group.Name != "research" || len(tree[0].Children) != 2 {
			t.Errorf("research's subtree:\n%s", treeLines(tree))
		}
		_, err = b.Svc.PolicyTree(ps.vic, "nlp")
		platformtest.WantError(t, err, platform.CodeNotFound, "nlp")
		tree, err = b.Svc.PolicyTree(ps.nobody, "")
		platformtest.Must(t, err)
		if len(tree) != 0 {
			t.Errorf("a member of no group sees:\n%s", treeLines(tree))
		}
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme Corp", "root")
		platformtest.Must(t, err)
		tree, err = b.Svc.PolicyTree(b.SignIn(t, nt.Secret), "")
		platformtest.Must(t, err)
		if len(tree) != 0 {
			t.Errorf("another tenant's admin sees:\n%s", treeLines(tree))
		}
	})
}
