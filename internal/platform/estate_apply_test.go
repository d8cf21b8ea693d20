package platform_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// exampleObjects is how many objects examples/estate.yaml describes: 2 GPU
// classes, 4 pools, 6 profiles, 3 groups, 3 policies, 12 compute resources
// and 3 projects; and for the gateway 1 provider, 1 route, 3 models, 1
// entitlement, 2 aliases, 1 token budget, 1 rate limit and the global
// guardrails.
const exampleObjects = 2 + 4 + 6 + 3 + 3 + 12 + 3 + (1 + 1 + 3 + 1 + 2 + 1 + 1 + 1)

func TestApplyEstate(t *testing.T) {
	t.Parallel()

	t.Run("applying the example creates every object and applying it again changes nothing", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			auditBefore := len(b.AuditLog(t))
			first := b.ApplyExample(t)
			if len(first.Changes) != exampleObjects {
				t.Fatalf("first apply made %d changes, want %d", len(first.Changes), exampleObjects)
			}
			for _, c := range first.Changes {
				if c.Action != estate.Create {
					t.Errorf("first apply: %s", c)
				}
			}
			if s := first.Summary(); s != "44 created" {
				t.Errorf("Summary() = %q, want \"44 created\"", s)
			}
			if len(first.Warnings) != 0 {
				t.Errorf("warnings: %v", first.Warnings)
			}
			if n := len(b.AuditLog(t)) - auditBefore; n != exampleObjects {
				t.Errorf("first apply wrote %d audit entries, want one per object (%d)", n, exampleObjects)
			}

			second := b.ApplyExample(t)
			if len(second.Changes) != 0 || second.Summary() != "no changes" {
				t.Fatalf("second apply: %q, changes %v", second.Summary(), second.Changes)
			}
			if n := len(b.AuditLog(t)) - auditBefore; n != exampleObjects {
				t.Errorf("second apply wrote %d audit entries", n-exampleObjects)
			}

			// What was written reads back whole.
			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			if len(e.GPUClasses) != 2 || len(e.Pools) != 4 || len(e.Profiles) != 6 || len(e.Groups) != 3 ||
				len(e.Policies) != 3 || len(e.ComputeResources) != 12 || len(e.Projects) != 3 {
				t.Fatalf("estate read back with %d classes, %d pools, %d profiles, %d groups, %d policies, %d compute resources, %d projects",
					len(e.GPUClasses), len(e.Pools), len(e.Profiles), len(e.Groups), len(e.Policies), len(e.ComputeResources), len(e.Projects))
			}
			k8s := e.PoolByName("onprem-k8s")
			var order []string
			for _, pr := range e.ProfilesOnPool(k8s.ID) {
				order = append(order, pr.Name)
			}
			if strings.Join(order, ",") != "gpu-eighth,half-gpu,one-gpu,eight-gpus,multi-node-2x8" {
				t.Errorf("onprem-k8s execution priority read back as %v", order)
			}
			vision := e.PolicyOfGroup(e.GroupByName("vision").ID)
			if vision.Budget == nil || vision.Budget.MilliHours != 2_000_000 || vision.Budget.Period != model.PeriodWeek {
				t.Errorf("vision's budget read back as %+v", vision.Budget)
			}
			g := e.Gateway
			if len(g.Providers) != 1 || len(g.Routes) != 1 || len(g.Models) != 3 || len(g.Entitlements) != 1 || len(g.Aliases) != 2 ||
				len(g.Budgets) != 1 || len(g.RateLimits) != 1 || len(g.Guardrails.Deny) != 1 {
				t.Fatalf("gateway read back as %+v", g)
			}
			if m := llmconf.Model(&e.Gateway, "gpt-4o"); m == nil || m.InputPriceMicros != 2_500_000 || m.OutputPriceMicros != 10_000_000 || m.Upstream != "gpt-4o" {
				t.Errorf("model gpt-4o read back as %+v", m)
			}
		})
	})

	t.Run("the export of an applied estate applies with no changes", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			out, err := b.Svc.ExportEstate(b.Admin)
			platformtest.Must(t, err)
			res, err := b.Svc.ApplyEstate(b.Admin, out, false)
			platformtest.Must(t, err)
			if len(res.Changes) != 0 {
				t.Fatalf("re-applying the export changed %v", res.Changes)
			}
		})
	})

	t.Run("a dry run reports the changes and writes nothing", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			before := b.snapshot(t)
			res, err := b.Svc.ApplyEstate(b.Admin, platformtest.ExampleEstate(t), true)
			platformtest.Must(t, err)
			if !res.DryRun || len(res.Changes) != exampleObjects {
				t.Fatalf("dry run: DryRun %v, %d changes", res.DryRun, len(res.Changes))
			}
			if s := res.Summary(); s != "44 created (dry run: nothing was written)" {
				t.Errorf("Summary() = %q", s)
			}
			if res.Estate == nil || len(res.Estate.Pools) != 4 {
				t.Errorf("a dry run returns the estate it would make")
			}
			b.unchanged(t, before)
			if logs := b.Logs.All(); len(logs) > 0 {
				t.Errorf("a dry run logged %q; it is not a failure", logs)
			}
		})
	})

	t.Run("a file with problems is refused whole with every problem listed", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			doc := strings.Replace(string(platformtest.ExampleEstate(t)), "capacity: 16", "capacity: 24", 1) // a good change
			doc = strings.Replace(doc, "pools: [onprem-k8s, bare-metal, cloud-burst]", "pools: [onprem-k8s, bare-metal, cloud-brust]", 1)
			doc = strings.Replace(doc, "limit: 16", "limit: 4", 1) // nlp's 8 GPUs no longer fit
			_, err := b.Svc.ApplyEstate(b.Admin, []byte(doc), false)
			platformtest.WantError(t, err, platform.CodeInvalid, `pool "cloud-brust" is not a known pool`)
			b.unchanged(t, before)

			// With the name fixed, validation of the whole finds the limit.
			doc = strings.Replace(doc, "cloud-brust", "cloud-burst", 1)
			_, err = b.Svc.ApplyEstate(b.Admin, []byte(doc), false)
			platformtest.WantError(t, err, platform.CodeInvalid, `profile "eight-gpus" (8 GPUs) is larger than group "nlp"'s limit of 4 GPUs`)
			b.unchanged(t, before)
		})
	})

	t.Run("several problems come back one per line", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			doc := "apiVersion: klique/v1\nkind: Estate\npools:\n  - {name: a}\nprofiles:\n  - {name: p, size: 0.3}\n"
			_, err := b.Svc.ApplyEstate(b.Admin, []byte(doc), false)
			platformtest.WantError(t, err, platform.CodeInvalid, "4 problems")
			pe, ok := err.(*platform.Error)
			if !ok || len(pe.Problems) != 4 {
				t.Fatalf("error %#v: want a *platform.Error with 4 problems", err)
			}
		})
	})

	t.Run("a file that does not parse is refused as bad input", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			before := b.snapshot(t)
			_, err := b.Svc.ApplyEstate(b.Admin, []byte("apiVersion: klique/v1\nkind: Estate\npools:\n  - name: a\n    capasity: 4\n"), false)
			platformtest.WantError(t, err, platform.CodeInvalid, `unknown field "capasity"`)
			_, err = b.Svc.ApplyEstate(b.Admin, nil, false)
			platformtest.WantError(t, err, platform.CodeInvalid, "estate file is empty")
			b.unchanged(t, before)
		})
	})

	t.Run("a compute resource with queued tasks cannot be left out of a file", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			enqueue(t, b, b.Admin, "shared-eval", "multi-node training", "", nil)
			before := b.snapshot(t)
			doc := strings.Replace(string(platformtest.ExampleEstate(t)), "      - {name: multi-node training, profile: multi-node-2x8}\n", "", 1)
			_, err := b.Svc.ApplyEstate(b.Admin, []byte(doc), false)
			platformtest.WantError(t, err, platform.CodeConflict, "compute resource 'multi-node training' of group ml-research has 1 tasks queued or running")
			b.unchanged(t, before)
		})
	})

	t.Run("the same file applies to two tenants with the same names", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
			platformtest.Must(t, err)
			acme := b.SignIn(t, nt.Secret)
			res, err := b.Svc.ApplyEstate(acme, platformtest.ExampleEstate(t), false)
			platformtest.Must(t, err)
			if len(res.Changes) != exampleObjects {
				t.Fatalf("acme's apply made %d changes, want %d", len(res.Changes), exampleObjects)
			}
			mine, err := b.Svc.Estate(acme)
			platformtest.Must(t, err)
			theirs, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			if len(mine.Pools) != 4 || len(theirs.Pools) != 4 {
				t.Fatalf("acme sees %d pools, default %d; want 4 each", len(mine.Pools), len(theirs.Pools))
			}
			for i := range mine.Pools {
				if mine.Pools[i].TenantID != nt.Tenant.ID || theirs.Pools[i].TenantID != b.Tenant || mine.Pools[i].ID == theirs.Pools[i].ID {
					t.Fatalf("pool %s: acme's %+v, default's %+v", mine.Pools[i].Name, mine.Pools[i], theirs.Pools[i])
				}
			}
		})
	})
}
