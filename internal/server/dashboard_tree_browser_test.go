package server_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardDrawsTheOrganisationTree signs in to the dashboard in a real
// browser with examples/departments.yaml applied over the example estate
// and ml-research holding 24 GPUs (16 reserved): the Tree page draws
// research with ml-research and vision indented below it and nlp beside
// it, each row with its bar and the platform's figures (ml-research 8
// borrowed, vision and nlp 8 lent), and follows a new waiting task live;
// alice, a member of ml-research, sees research and ml-research only.
func TestDashboardDrawsTheOrganisationTree(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	alice := dashboardMember(t, ts)
	ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`,
		map[string]any{"doc": readExample(t, "departments.yaml")})
	for range 3 {
		ts.mustGQL(t, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
			"name": "train", "project": "fraud-models", "computeResource": "8 GPUs", "command": []any{"python", "train.py"}}})
	}
	place(t, ts)
	if d := ts.mustGQL(t, adminKey, `{ policyTree(department: "ml-research") { heldGpus } }`, nil); path(d, "policyTree", 0, "heldGpus") != float64(24) {
		t.Fatalf("after a pass ml-research's tree reads %v, want 24 GPUs held", d)
	}

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/tree"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), adminKey),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "main h1", "Organisation tree", uiWait)
	waitFor(t, ctx, "the tree", `#tree [data-node="vision"] svg.tree-bar`, uiWait)
	// The rows in order, each with its level and the department it sits in.
	order := evalJS[string](t, ctx, `[...document.querySelectorAll("#tree .tree-node")].map((e) => e.dataset.level + ":" + e.dataset.node + "<" + e.dataset.parent).join(" ")`)
	if want := "0:nlp< 0:research< 1:ml-research<research 1:vision<research"; order != want {
		t.Errorf("the tree's rows are %q, want %q", order, want)
	}
	for node, wants := range map[string][]string{
		"research":    {"department", "24 held", "40 reserved", "limit 64", "weight 2", "0 waiting"},
		"ml-research": {"24 held", "16 reserved", "limit 48", "8 borrowed", "weight 1"},
		"vision":      {"0 held", "16 reserved", "limit 32", "8 lent"},
		"nlp":         {"0 held", "8 reserved", "limit 16", "8 lent"},
	} {
		got := pageText(t, ctx, `#tree [data-node="`+node+`"]`)
		for _, w := range wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s's row reads %q, want %q in it", node, got, w)
			}
		}
	}
	// The bars: ml-research's borrowed part is drawn, vision's lent part,
	// and a child's name is indented under its department's.
	if w := evalJS[float64](t, ctx, `+document.querySelector('#tree [data-node="ml-research"] .t-borrow').getAttribute("width")`); w <= 0 {
		t.Errorf("ml-research's borrowed bar is %v wide", w)
	}
	if w := evalJS[float64](t, ctx, `+document.querySelector('#tree [data-node="vision"] .t-lent').getAttribute("width")`); w <= 0 {
		t.Errorf("vision's lent bar is %v wide", w)
	}
	indent := evalJS[float64](t, ctx, `document.querySelector('#tree [data-node="vision"] .tree-name strong').getBoundingClientRect().left - `+
		`document.querySelector('#tree [data-node="research"] .tree-name strong').getBoundingClientRect().left`)
	if indent < 10 {
		t.Errorf("vision's name is %vpx right of research's: it is not indented below it", indent)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("main .error").length`); n > 0 {
		t.Fatalf("the page shows an error:\n%s", pageText(t, ctx, "main"))
	}
	screenshot(t, ctx, t.TempDir(), "tree-admin.png")

	// Live: a task vic's group enqueues now waits (no engine runs here),
	// and the page shows it under vision and research without a reload.
	ts.mustGQL(t, adminKey, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "detect", "project": "vision-detect", "group": "vision", "computeResource": "1 GPU", "command": []any{"python", "detect.py"}}})
	waitForText(t, ctx, `#tree [data-node="vision"] .tree-figures`, "1 waiting", uiWait)
	waitForText(t, ctx, `#tree [data-node="research"] .tree-figures`, "1 waiting", uiWait)

	// alice sees the department above her group, and her group.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#nav")),
		chromedp.Navigate(ts.url+"/#/tree"),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "alice's tree", `#tree [data-node="ml-research"]`, uiWait)
	order = evalJS[string](t, ctx, `[...document.querySelectorAll("#tree .tree-node")].map((e) => e.dataset.level + ":" + e.dataset.node).join(" ")`)
	if want := "0:research 1:ml-research"; order != want {
		t.Errorf("alice's tree is %q, want %q", order, want)
	}
}
