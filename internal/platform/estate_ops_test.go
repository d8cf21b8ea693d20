package platform_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
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
			if m := e.LLMModel("gpt-4o"); m == nil || m.InputPriceMicros != 2_500_000 || m.OutputPriceMicros != 10_000_000 || m.Upstream != "gpt-4o" {
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

func TestEstateChanges(t *testing.T) {
	t.Parallel()

	t.Run("each kind is created, changed and deleted, each change audited with channel and actor", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			ctx := identity.WithChannel(b.Admin, identity.ChannelGraphQL)
			step := func(what, action, kind string) func(*platform.EstateResult, error) *platform.EstateResult {
				return func(res *platform.EstateResult, err error) *platform.EstateResult {
					t.Helper()
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if res.ID == "" || len(res.Changes) != 1 {
						t.Fatalf("%s: id %q, changes %v; want one change", what, res.ID, res.Changes)
					}
					c := res.Changes[0]
					if string(c.Action) != action || c.Kind != kind || c.ID != res.ID {
						t.Fatalf("%s: change %s (%s %s), want %s %s %s", what, c, c.Kind, c.ID, action, kind, res.ID)
					}
					last := b.AuditLog(t)[0]
					if last.Action != kind+"."+action+"d" || last.ObjectKind != kind || last.ObjectID != res.ID ||
						last.Channel != string(identity.ChannelGraphQL) || last.ActorID != b.AdminID || last.ActorName != "admin" ||
						last.TenantID != b.Tenant || last.Detail != c.String() {
						t.Fatalf("%s: audit entry %+v", what, last)
					}
					return res
				}
			}

			class := step("create class", "create", estate.KindGPUClass)(b.Svc.CreateGPUClass(ctx, platform.GPUClassInput{Name: ptr("b200"), MemoryGB: ptr(192), PricePerGPUHour: ptr(4.25), Currency: ptr("eur")}))
			c, err := b.Svc.GPUClass(ctx, "b200")
			platformtest.Must(t, err)
			if c.ID != class.ID || c.MemoryGB != 192 || c.PriceMicros != 4_250_000 || c.Currency != "EUR" {
				t.Fatalf("class read back as %+v", c)
			}
			step("update class", "update", estate.KindGPUClass)(b.Svc.UpdateGPUClass(ctx, "b200", platform.GPUClassInput{Description: ptr("Blackwell")}))

			pool := step("create pool", "create", estate.KindPool)(b.Svc.CreatePool(ctx, platform.PoolInput{Name: ptr("k8s"), Kind: ptr(model.PoolKubernetes), CapacityGPUs: ptr(16), GPUClass: ptr("b200"), Labels: map[string]string{"site": "dc1"}}))
			p, err := b.Svc.Pool(ctx, pool.ID)
			platformtest.Must(t, err)
			if p.GPUMemoryGB != 192 || p.CapacityGPUs != 16 || p.Labels["site"] != "dc1" {
				t.Fatalf("pool read back as %+v; GPU memory comes from the class", p)
			}
			step("update pool", "update", estate.KindPool)(b.Svc.UpdatePool(ctx, "k8s", platform.PoolInput{CapacityGPUs: ptr(24)}))

			prof := step("create profile", "create", estate.KindProfile)(b.Svc.CreateProfile(ctx, platform.ProfileInput{Name: ptr("one"), Size: ptr("1"), Pools: []string{"k8s"}, TimeWeight: ptr(1.5)}))
			step("update profile", "update", estate.KindProfile)(b.Svc.UpdateProfile(ctx, prof.ID, platform.ProfileInput{SizeParameter: ptr("gpus")}))
			pr, err := b.Svc.Profile(ctx, "one")
			platformtest.Must(t, err)
			if pr.TimeWeightMilli != 1500 || pr.SizeParameter != "gpus" || len(pr.Pools) != 1 || pr.Pools[0] != pool.ID {
				t.Fatalf("profile read back as %+v", pr)
			}

			step("create group", "create", estate.KindGroup)(b.Svc.CreateGroup(ctx, platform.GroupInput{Name: ptr("team")}))
			step("update group", "update", estate.KindGroup)(b.Svc.UpdateGroup(ctx, "team", platform.GroupInput{Description: ptr("the team")}))

			pol := step("create policy", "create", estate.KindPolicy)(b.Svc.CreatePolicy(ctx, platform.PolicyInput{Group: ptr("team"), ReservationGPUs: ptr(2), LimitGPUs: ptr(8),
				TimeBudget: &platform.TimeBudgetInput{Hours: 10.5, Period: model.PeriodDay}}))
			step("update policy", "update", estate.KindPolicy)(b.Svc.UpdatePolicy(ctx, "team", platform.PolicyInput{ClearTimeBudget: true, AlertThresholdPercent: ptr(90)}))
			got, err := b.Svc.Policy(ctx, pol.ID)
			platformtest.Must(t, err)
			if got.Budget != nil || got.AlertThresholdPercent != 90 || got.LowWatermark != model.DefaultLowWatermark || got.LimitGPUs != 8 {
				t.Fatalf("policy read back as %+v", got)
			}

			cr := step("connect", "create", estate.KindComputeResource)(b.Svc.ConnectProfile(ctx, platform.ConnectInput{Policy: "team", Profile: "one", Name: ptr("1 GPU"),
				Image: ptr("python:3.12"), Env: map[string]string{"HF_HOME": "/data/hf"}, Mounts: []string{"/data/hf:/data/hf"}}))
			step("rename compute resource", "update", estate.KindComputeResource)(b.Svc.UpdateComputeResource(ctx, cr.ID, platform.ComputeResourceInput{Name: ptr("one GPU")}))
			if c, err := b.Svc.ComputeResource(ctx, cr.ID); err != nil || c.Name != "one GPU" || c.Image != "python:3.12" ||
				c.Env["HF_HOME"] != "/data/hf" || len(c.Mounts) != 1 {
				t.Fatalf("compute resource read back as %+v, %v: a rename keeps the run settings", c, err)
			}
			step("change the mounts", "update", estate.KindComputeResource)(b.Svc.UpdateComputeResource(ctx, cr.ID, platform.ComputeResourceInput{
				Mounts: []string{"/data/hf:/data/hf:ro", "/scratch:/scratch"}}))
			if c, err := b.Svc.ComputeResource(ctx, cr.ID); err != nil || c.Image != "python:3.12" || c.Env["HF_HOME"] != "/data/hf" ||
				!slices.Equal(c.Mounts, []string{"/data/hf:/data/hf:ro", "/scratch:/scratch"}) {
				t.Fatalf("compute resource read back as %+v, %v: mounts replaced, the rest kept", c, err)
			}
			step("clear the run settings", "update", estate.KindComputeResource)(b.Svc.UpdateComputeResource(ctx, cr.ID, platform.ComputeResourceInput{
				Image: ptr(""), Env: map[string]string{}, Mounts: []string{}}))
			if c, err := b.Svc.ComputeResource(ctx, cr.ID); err != nil || c.Image != "" || len(c.Env) != 0 || len(c.Mounts) != 0 {
				t.Fatalf("compute resource read back as %+v, %v: empty values clear", c, err)
			}

			step("create project", "create", estate.KindProject)(b.Svc.CreateProject(ctx, platform.ProjectInput{Name: ptr("proj"), Group: ptr("team"), OutputDestination: ptr("s3://b/p")}))
			step("update project", "update", estate.KindProject)(b.Svc.UpdateProject(ctx, "proj", platform.ProjectInput{Group: ptr("")}))
			if p, err := b.Svc.Project(ctx, "proj"); err != nil || p.GroupID != "" {
				t.Fatalf("project read back as %+v, %v: an empty group opens it to the tenant", p, err)
			}

			step("delete project", "delete", estate.KindProject)(b.Svc.DeleteProject(ctx, "proj"))
			step("disconnect", "delete", estate.KindComputeResource)(b.Svc.DisconnectProfile(ctx, cr.ID))
			step("delete policy", "delete", estate.KindPolicy)(b.Svc.DeletePolicy(ctx, "team"))
			step("delete group", "delete", estate.KindGroup)(b.Svc.DeleteGroup(ctx, "team"))
			step("delete profile", "delete", estate.KindProfile)(b.Svc.DeleteProfile(ctx, "one"))
			step("delete pool", "delete", estate.KindPool)(b.Svc.DeletePool(ctx, "k8s"))
			step("delete class", "delete", estate.KindGPUClass)(b.Svc.DeleteGPUClass(ctx, "b200"))

			e, err := b.Svc.Estate(ctx)
			platformtest.Must(t, err)
			if n := len(e.GPUClasses) + len(e.Pools) + len(e.Profiles) + len(e.Groups) + len(e.Policies) + len(e.ComputeResources) + len(e.Projects); n != 0 {
				t.Fatalf("%d objects left after deleting everything", n)
			}
		})
	})

	t.Run("an update that changes nothing writes nothing", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			res, err := b.Svc.UpdatePool(b.Admin, "onprem-k8s", platform.PoolInput{CapacityGPUs: ptr(32)})
			platformtest.Must(t, err)
			if len(res.Changes) != 0 || res.Summary() != "no changes" {
				t.Fatalf("changes %v", res.Changes)
			}
			b.unchanged(t, before)
		})
	})

	t.Run("unlinking a profile from a pool drops it from the pool's execution priority", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			res, err := b.Svc.UpdateProfile(b.Admin, "half-gpu", platform.ProfileInput{Pools: []string{"bare-metal"}})
			platformtest.Must(t, err)
			var got []string
			for _, c := range res.Changes {
				got = append(got, c.String())
			}
			if strings.Join(got, "; ") != "update pool onprem-k8s (profileOrder); update profile half-gpu (pools)" {
				t.Fatalf("changes %q", got)
			}
			p, err := b.Svc.Pool(b.Admin, "onprem-k8s")
			platformtest.Must(t, err)
			if len(p.ProfileOrder) != 4 {
				t.Fatalf("onprem-k8s order %v, want 4 profiles left", p.ProfileOrder)
			}
		})
	})

	t.Run("a pool moved to another GPU class takes that class's memory", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			platformtest.Must(t, second(b.Svc.CreateGPUClass(b.Admin, platform.GPUClassInput{Name: ptr("a40"), MemoryGB: ptr(40)})))
			before := b.snapshot(t)
			// eight-gpus needs 80 GB and lists slurm-a100.
			_, err := b.Svc.UpdatePool(b.Admin, "slurm-a100", platform.PoolInput{GPUClass: ptr("a40")})
			platformtest.WantError(t, err, platform.CodeInvalid, `profile "eight-gpus": cannot use pool "slurm-a100": its GPUs have 40 GB, and the profile needs at least 80 GB`)
			b.unchanged(t, before)

			platformtest.Must(t, second(b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{GPUClass: ptr("a40")})))
			p, err := b.Svc.Pool(b.Admin, "bare-metal")
			platformtest.Must(t, err)
			if p.GPUMemoryGB != 40 {
				t.Fatalf("bare-metal moved to a40 has %d GB GPUs, want the class's 40", p.GPUMemoryGB)
			}
			// Memory given with the class wins.
			platformtest.Must(t, second(b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{GPUClass: ptr("h100"), GPUMemoryGB: ptr(94)})))
			p, err = b.Svc.Pool(b.Admin, "bare-metal")
			platformtest.Must(t, err)
			if p.GPUMemoryGB != 94 {
				t.Fatalf("bare-metal has %d GB GPUs, want the 94 given", p.GPUMemoryGB)
			}
			// The same class again keeps the memory given before.
			platformtest.Must(t, second(b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{GPUClass: ptr("h100")})))
			p, err = b.Svc.Pool(b.Admin, "bare-metal")
			platformtest.Must(t, err)
			if p.GPUMemoryGB != 94 {
				t.Fatalf("bare-metal has %d GB GPUs after naming its own class again, want 94", p.GPUMemoryGB)
			}
		})
	})

	t.Run("renaming to a name another object has is refused and names the clash", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			// A rename is caught by validating the whole estate, so it comes
			// back as bad input, where a create with a taken name is a
			// conflict.
			_, err := b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{Name: ptr("onprem-k8s")})
			platformtest.WantError(t, err, platform.CodeInvalid, `pool "onprem-k8s": another pool has the same name`)
			_, err = b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Name: ptr("vision")})
			platformtest.WantError(t, err, platform.CodeInvalid, `group "vision": another group has the same name`)
			// Names are taken as given, as in an estate file: spaces around
			// a name are refused, not trimmed.
			_, err = b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Name: ptr(" vision ")})
			platformtest.WantError(t, err, platform.CodeInvalid, `name " vision " starts or ends with a space`)
			b.unchanged(t, before)
		})
	})

	t.Run("a file that swaps the names of two compute resources of a group applies", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			// The two renames are written one at a time, and names are
			// unique within a policy at every step: changeEstate parks the
			// renamed compute resources under temporary names first.
			b.ApplyExample(t)
			doc := strings.Replace(string(platformtest.ExampleEstate(t)),
				"      - {name: GPU eighth, profile: gpu-eighth}\n      - {name: half GPU, profile: half-gpu}\n",
				"      - {name: half GPU, profile: gpu-eighth}\n      - {name: GPU eighth, profile: half-gpu}\n", 1)
			res, err := b.Svc.ApplyEstate(b.Admin, []byte(doc), false)
			platformtest.Must(t, err)
			if len(res.Changes) != 2 {
				t.Fatalf("changes %v, want two renames", res.Changes)
			}
			eighth := b.computeResource(t, "ml-research", "half GPU")
			if pr, err := b.Svc.Profile(b.Admin, eighth.ProfileID); err != nil || pr.Name != "gpu-eighth" {
				t.Fatalf("'half GPU' of ml-research is now on profile %v (%v), want gpu-eighth", pr, err)
			}
		})
	})

	t.Run("reservations beyond the capacity behind them are accepted with a warning", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			res, err := b.Svc.UpdatePolicy(b.Admin, "nlp", platform.PolicyInput{ReservationGPUs: ptr(130), LimitGPUs: ptr(130)})
			platformtest.Must(t, err)
			found := false
			for _, w := range res.Warnings {
				found = found || w.Code == "RESERVATIONS_EXCEED_CAPACITY" && strings.Contains(w.Message, "nlp (130)") && strings.Contains(w.Message, "add up to 162 GPUs, more than the 144 GPUs")
			}
			if !found {
				t.Fatalf("warnings %v; want reservations of 162 GPUs over 144", res.Warnings)
			}
			ws, err := b.Svc.EstateWarnings(b.Admin)
			platformtest.Must(t, err)
			if len(ws) != len(res.Warnings) {
				t.Fatalf("EstateWarnings %v, the change returned %v", ws, res.Warnings)
			}
		})
	})

	bad := []struct {
		name string
		// prep, when set, makes what the case needs before the snapshot.
		prep  func(ctx context.Context, s *platform.Service) error
		op    func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error)
		words []string
	}{
		{"a GPU class without a name", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateGPUClass(ctx, platform.GPUClassInput{Name: ptr("  ")})
		}, []string{"a GPU class needs a name"}},
		{"a GPU class with a currency that is not an ISO code", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateGPUClass(ctx, platform.GPUClassInput{Name: ptr("b200"), Currency: ptr("euro")})
		}, []string{`GPU class "b200"`, `currency "EURO"`, "three-letter ISO code"}},
		{"a GPU class priced to the ten-millionth", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateGPUClass(ctx, "h100", platform.GPUClassInput{PricePerGPUHour: ptr(2.0000001)})
		}, []string{"GPU class 'h100'", "more than 6 decimals"}},
		{"a pool of an unknown kind", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePool(ctx, platform.PoolInput{Name: ptr("os"), Kind: ptr(model.PoolKind("openstack")), CapacityGPUs: ptr(4), GPUClass: ptr("h100")})
		}, []string{`pool "os"`, `kind "openstack" is not known`}},
		{"a pool with a negative capacity", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePool(ctx, "bare-metal", platform.PoolInput{CapacityGPUs: ptr(-2)})
		}, []string{`pool "bare-metal"`, "capacity -2"}},
		{"a pool of an unknown GPU class", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePool(ctx, platform.PoolInput{Name: ptr("new"), Kind: ptr(model.PoolSlurm), CapacityGPUs: ptr(4), GPUClass: ptr("b200")})
		}, []string{"pool 'new'", "no GPU class 'b200'"}},
		{"a pool without kind, capacity or class", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePool(ctx, platform.PoolInput{Name: ptr("new")})
		}, []string{"a pool needs a kind, a capacity in whole GPUs and a GPU class"}},
		{"an execution priority naming a profile the pool does not serve", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePool(ctx, "bare-metal", platform.PoolInput{ExecutionPriority: []string{"eight-gpus"}})
		}, []string{"pool 'bare-metal' execution priority", `profile "eight-gpus" does not list pool "bare-metal"`}},
		{"a profile of 0.3 GPUs", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProfile(ctx, platform.ProfileInput{Name: ptr("odd"), Size: ptr("0.3")})
		}, []string{"profile 'odd'", "0.3 is not an allowed fraction", "use 0.125, 0.25 or 0.5"}},
		{"a profile without a size", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProfile(ctx, platform.ProfileInput{Name: ptr("odd")})
		}, []string{"a profile needs a size"}},
		{"a multi-node profile on a bare-metal pool", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProfile(ctx, platform.ProfileInput{Name: ptr("big"), Size: ptr("2x8"), Pools: []string{"bare-metal"}})
		}, []string{`profile "big"`, `cannot use pool "bare-metal"`, "multi-node work"}},
		{"a profile asking for a class on a pool of another", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateProfile(ctx, "one-gpu", platform.ProfileInput{GPUClass: ptr("h100")})
		}, []string{`profile "one-gpu"`, `cannot use pool "bare-metal"`, "its GPUs are a100-80gb, and the profile asks for h100"}},
		{"a profile linked to an unknown pool", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateProfile(ctx, "one-gpu", platform.ProfileInput{Pools: []string{"onprem-k8s", "lumi"}})
		}, []string{"profile 'one-gpu'", "no pool 'lumi'"}},
		{"a negative time weight", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateProfile(ctx, "one-gpu", platform.ProfileInput{TimeWeight: ptr(-1.0)})
		}, []string{`profile "one-gpu"`, "time weight -1 must be between 0"}},
		{"a queuing priority naming a group without a compute resource on the profile", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateProfile(ctx, "multi-node-2x8", platform.ProfileInput{QueuingPriority: []string{"vision"}})
		}, []string{"profile 'multi-node-2x8' queuing priority", `group "vision" has no compute resource on profile "multi-node-2x8"`}},
		{"a bad size parameter name", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateProfile(ctx, "one-gpu", platform.ProfileInput{SizeParameter: ptr("gpu count")})
		}, []string{`profile "one-gpu"`, `parameter name "gpu count"`}},
		{"a group name with a control character", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateGroup(ctx, platform.GroupInput{Name: ptr("bad\x00group")})
		}, []string{"group", "control or invalid character"}},
		{"a policy for a group that does not exist", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePolicy(ctx, platform.PolicyInput{Group: ptr("ghosts"), LimitGPUs: ptr(1)})
		}, []string{"no group 'ghosts'"}},
		{"a policy without a limit", func(ctx context.Context, s *platform.Service) error {
			return second(s.CreateGroup(ctx, platform.GroupInput{Name: ptr("new")}))
		}, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePolicy(ctx, platform.PolicyInput{Group: ptr("new")})
		}, []string{"a resource policy needs a limit"}},
		{"a reservation above the limit", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{ReservationGPUs: ptr(40)})
		}, []string{`resource policy of group "vision"`, "reservation 40 GPUs is above the limit 32 GPUs"}},
		{"a limit lowered below a connected profile", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "nlp", platform.PolicyInput{ReservationGPUs: ptr(0), LimitGPUs: ptr(4)})
		}, []string{`compute resource "8 GPUs" of group "nlp"`, `profile "eight-gpus" (8 GPUs) is larger than group "nlp"'s limit of 4 GPUs`}},
		{"a time budget of zero hours", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{TimeBudget: &platform.TimeBudgetInput{Hours: 0, Period: model.PeriodWeek}})
		}, []string{`resource policy of group "vision"`, "time budget of 0 hours must be more than 0"}},
		{"a time budget per year", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{TimeBudget: &platform.TimeBudgetInput{Hours: 10, Period: "year"}})
		}, []string{`time budget period "year" must be day, week or month`}},
		{"a time budget given and cleared at once", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{ClearTimeBudget: true, TimeBudget: &platform.TimeBudgetInput{Hours: 10, Period: "day"}})
		}, []string{"give a time budget or clear it, not both"}},
		{"an alert threshold of 0 %", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{AlertThresholdPercent: ptr(0)})
		}, []string{"alert threshold 0% must be between 1 and 100"}},
		{"a policy moved to another group", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdatePolicy(ctx, "vision", platform.PolicyInput{Group: ptr("nlp")})
		}, []string{"a resource policy cannot move to another group"}},
		{"a profile larger than the group's limit connected", func(ctx context.Context, s *platform.Service) error {
			if _, err := s.CreateGroup(ctx, platform.GroupInput{Name: ptr("small")}); err != nil {
				return err
			}
			return second(s.CreatePolicy(ctx, platform.PolicyInput{Group: ptr("small"), LimitGPUs: ptr(4)}))
		}, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.ConnectProfile(ctx, platform.ConnectInput{Policy: "small", Profile: "eight-gpus"})
		}, []string{`compute resource "eight-gpus" of group "small"`, `profile "eight-gpus" (8 GPUs) is larger than group "small"'s limit of 4 GPUs`, "raise the limit or connect a smaller profile"}},
		{"a profile that does not exist connected", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.ConnectProfile(ctx, platform.ConnectInput{Policy: "vision", Profile: "ghost"})
		}, []string{"no profile 'ghost'"}},
		{"a compute resource renamed to another of the group's names", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateComputeResource(ctx, idOf(ctx, s, "vision", "half GPU"), platform.ComputeResourceInput{Name: ptr("1 GPU")})
		}, []string{`compute resource "1 GPU" of group "vision"`, "another compute resource with this name"}},
		{"a compute resource variable that holds a credential", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.UpdateComputeResource(ctx, idOf(ctx, s, "vision", "1 GPU"), platform.ComputeResourceInput{Env: map[string]string{"WANDB_API_KEY": "0123456789abcdef"}})
		}, []string{`compute resource "1 GPU" of group "vision"`, "env: WANDB_API_KEY looks like a credential", "klique secret set WANDB_API_KEY --group vision"}},
		{"a compute resource connected with a relative mount", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.ConnectProfile(ctx, platform.ConnectInput{Policy: "vision", Profile: "one-a100", Mounts: []string{"data:/data"}})
		}, []string{`compute resource "one-a100" of group "vision"`, `host path "data" must be absolute`}},
		{"a project writing to a destination with spaces", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProject(ctx, platform.ProjectInput{Name: ptr("p"), OutputDestination: ptr("s3://my bucket")})
		}, []string{`project "p"`, "output destination must be a directory path or bucket URL without spaces"}},
		{"a project of a group that does not exist", nil, func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProject(ctx, platform.ProjectInput{Name: ptr("p"), Group: ptr("ghosts")})
		}, []string{"project 'p'", "no group 'ghosts'"}},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is refused as bad input and changes nothing", func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, b *testBundle) {
				b.ApplyExample(t)
				if tc.prep != nil {
					platformtest.Must(t, tc.prep(b.Admin, b.Svc))
				}
				before := b.snapshot(t)
				res, err := tc.op(b.Admin, b.Svc)
				if res != nil {
					t.Errorf("a result with the error: %+v", res)
				}
				platformtest.WantError(t, err, platform.CodeInvalid, tc.words...)
				b.unchanged(t, before)
			})
		})
	}

	conflicts := []struct {
		name  string
		op    func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error)
		words []string
	}{
		{"a second GPU class named h100", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateGPUClass(ctx, platform.GPUClassInput{Name: ptr(" h100 ")})
		}, []string{"a GPU class named ' h100 ' already exists"}},
		{"a second pool named onprem-k8s", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePool(ctx, platform.PoolInput{Name: ptr("onprem-k8s"), Kind: ptr(model.PoolKubernetes), CapacityGPUs: ptr(1), GPUClass: ptr("h100")})
		}, []string{"a pool named 'onprem-k8s' already exists"}},
		{"a second profile named one-gpu", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProfile(ctx, platform.ProfileInput{Name: ptr("one-gpu"), Size: ptr("1")})
		}, []string{"a profile named 'one-gpu' already exists"}},
		{"a second group named nlp", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateGroup(ctx, platform.GroupInput{Name: ptr("nlp")})
		}, []string{"a group named 'nlp' already exists"}},
		{"a second policy for nlp", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreatePolicy(ctx, platform.PolicyInput{Group: ptr("nlp"), LimitGPUs: ptr(1)})
		}, []string{"group nlp already has a resource policy; change that one"}},
		{"a profile connected twice", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.ConnectProfile(ctx, platform.ConnectInput{Policy: "nlp", Profile: "one-gpu", Name: ptr("another")})
		}, []string{"profile 'one-gpu' is already connected to group nlp's policy as compute resource '1 GPU'"}},
		{"a second project named shared-eval", func(ctx context.Context, s *platform.Service) (*platform.EstateResult, error) {
			return s.CreateProject(ctx, platform.ProjectInput{Name: ptr("shared-eval")})
		}, []string{"a project named 'shared-eval' already exists"}},
	}
	for _, tc := range conflicts {
		t.Run(tc.name+" is refused as a conflict and changes nothing", func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, b *testBundle) {
				b.ApplyExample(t)
				before := b.snapshot(t)
				_, err := tc.op(b.Admin, b.Svc)
				platformtest.WantError(t, err, platform.CodeConflict, tc.words...)
				b.unchanged(t, before)
			})
		})
	}

	t.Run("a pool linked from profiles is kept until they drop it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.DeletePool(b.Admin, "bare-metal")
			platformtest.WantError(t, err, platform.CodeConflict, "pool 'bare-metal' is linked from profiles gpu-eighth, half-gpu, one-a100, one-gpu", "remove it from their pools first")
			b.unchanged(t, before)
			for _, pr := range []string{"gpu-eighth", "half-gpu", "one-a100", "one-gpu"} {
				_, err := b.Svc.UpdateProfile(b.Admin, pr, platform.ProfileInput{Pools: []string{"onprem-k8s"}})
				platformtest.Must(t, err)
			}
			res, err := b.Svc.DeletePool(b.Admin, "bare-metal")
			platformtest.Must(t, err)
			if _, err := b.Svc.Pool(b.Admin, res.ID); platform.ErrorCode(err) != platform.CodeNotFound {
				t.Fatalf("the deleted pool reads back: %v", err)
			}
		})
	})

	t.Run("a GPU class in use is kept until nothing uses it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			_, err := b.Svc.CreateGPUClass(b.Admin, platform.GPUClassInput{Name: ptr("b200"), MemoryGB: ptr(192)})
			platformtest.Must(t, err)
			_, err = b.Svc.CreatePool(b.Admin, platform.PoolInput{Name: ptr("nvl"), Kind: ptr(model.PoolNeocloud), CapacityGPUs: ptr(72), GPUClass: ptr("b200")})
			platformtest.Must(t, err)
			_, err = b.Svc.CreateProfile(b.Admin, platform.ProfileInput{Name: ptr("b200-one"), Size: ptr("1"), GPUClass: ptr("b200"), Pools: []string{"nvl"}})
			platformtest.Must(t, err)
			before := b.snapshot(t)
			_, err = b.Svc.DeleteGPUClass(b.Admin, "b200")
			platformtest.WantError(t, err, platform.CodeConflict, "GPU class 'b200' is used by pool nvl, profile b200-one")
			b.unchanged(t, before)
			platformtest.Must(t, second(b.Svc.DeleteProfile(b.Admin, "b200-one")))
			platformtest.Must(t, second(b.Svc.DeletePool(b.Admin, "nvl")))
			platformtest.Must(t, second(b.Svc.DeleteGPUClass(b.Admin, "b200")))
		})
	})

	t.Run("a connected profile is kept until every policy disconnects it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.DeleteProfile(b.Admin, "gpu-eighth")
			platformtest.WantError(t, err, platform.CodeConflict, "profile 'gpu-eighth' is connected to the policies of groups ml-research, nlp", "disconnect it first")
			b.unchanged(t, before)
			platformtest.Must(t, second(b.Svc.DisconnectProfile(b.Admin, b.computeResource(t, "ml-research", "GPU eighth").ID)))
			platformtest.Must(t, second(b.Svc.DisconnectProfile(b.Admin, b.computeResource(t, "nlp", "GPU eighth").ID)))
			res, err := b.Svc.DeleteProfile(b.Admin, "gpu-eighth")
			platformtest.Must(t, err)
			// The profile leaves onprem-k8s's execution priority too.
			var got []string
			for _, c := range res.Changes {
				got = append(got, c.String())
			}
			if strings.Join(got, "; ") != "update pool onprem-k8s (profileOrder); delete profile gpu-eighth" {
				t.Fatalf("changes %q", got)
			}
		})
	})

	t.Run("a group with a policy or projects is kept until they go", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.DeleteGroup(b.Admin, "vision")
			platformtest.WantError(t, err, platform.CodeConflict, "group vision has a resource policy; delete the policy first")
			b.unchanged(t, before)
			res, err := b.Svc.DeletePolicy(b.Admin, "vision")
			platformtest.Must(t, err)
			if len(res.Changes) != 5 || res.Changes[3].String() != "update profile one-gpu (queuingOrder)" {
				t.Fatalf("deleting vision's policy: %v; want its 3 compute resources, its place in one-gpu's queuing priority and the policy", res.Changes)
			}
			_, err = b.Svc.DeleteGroup(b.Admin, "vision")
			platformtest.WantError(t, err, platform.CodeConflict, "group vision owns projects vision-detect; move or delete them first")
			platformtest.Must(t, second(b.Svc.DeleteProject(b.Admin, "vision-detect")))
			platformtest.Must(t, second(b.Svc.DeleteGroup(b.Admin, "vision")))
			if _, err := b.Svc.Group(b.Admin, "vision"); platform.ErrorCode(err) != platform.CodeNotFound {
				t.Fatalf("the deleted group reads back: %v", err)
			}
		})
	})

	t.Run("a compute resource with tasks is kept and the refusal says why", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			cr := b.computeResource(t, "nlp", "GPU eighth")
			task := enqueue(t, b, b.Admin, "shared-eval", cr.ID, "", nil)
			before := b.snapshot(t)
			_, err := b.Svc.DisconnectProfile(b.Admin, cr.ID)
			platformtest.WantError(t, err, platform.CodeConflict, "compute resource 'GPU eighth' of group nlp has 1 tasks queued or running", "abort them or let them finish")
			_, err = b.Svc.DeletePolicy(b.Admin, "nlp")
			platformtest.WantError(t, err, platform.CodeConflict, "compute resource 'GPU eighth' of group nlp has 1 tasks queued or running")
			b.unchanged(t, before)

			_, err = b.Svc.AbortTask(b.Admin, task.ID, "")
			platformtest.Must(t, err)
			// Once its work has ended the compute resource can go; the
			// ended task keeps its id for its history.
			platformtest.Must(t, second(b.Svc.DisconnectProfile(b.Admin, cr.ID)))
			got, err := b.Svc.Task(b.Admin, task.ID)
			platformtest.Must(t, err)
			if got.ComputeResourceID != cr.ID || got.Status != model.TaskAborted {
				t.Fatalf("the ended task reads back as %+v", got)
			}
			if _, err := b.Svc.ComputeResource(b.Admin, cr.ID); platform.ErrorCode(err) != platform.CodeNotFound {
				t.Fatalf("the disconnected compute resource reads back: %v", err)
			}
		})
	})

	t.Run("a compute resource that never had tasks is disconnected", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			cr := b.computeResource(t, "nlp", "GPU eighth")
			platformtest.Must(t, second(b.Svc.DisconnectProfile(b.Admin, cr.ID)))
			if _, err := b.Svc.ComputeResource(b.Admin, cr.ID); platform.ErrorCode(err) != platform.CodeNotFound {
				t.Fatalf("the disconnected compute resource reads back: %v", err)
			}
		})
	})

	t.Run("a project with tasks is kept for their history", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			task := enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "nlp", nil)
			_, err := b.Svc.AbortTask(b.Admin, task.ID, "not needed")
			platformtest.Must(t, err)
			before := b.snapshot(t)
			_, err = b.Svc.DeleteProject(b.Admin, "shared-eval")
			platformtest.WantError(t, err, platform.CodeConflict, "project 'shared-eval' has 1 tasks; a project with tasks is kept for their history")
			b.unchanged(t, before)
			platformtest.Must(t, second(b.Svc.DeleteProject(b.Admin, "vision-detect")))
		})
	})

	t.Run("a project with active scoped keys is kept, and the refusal says why; revoked keys go with it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			// The example's token budget names the project: that goes first.
			platformtest.Must(t, second(b.Svc.DeleteTokenBudget(b.Admin, "fraud-models", model.PeriodMonth)))
			b.User(t, "rita", model.RoleMember, "ml-research")
			b.Key(t, "rita", "fraud-models")
			before := b.snapshot(t)
			_, err := b.Svc.DeleteProject(b.Admin, "fraud-models")
			platformtest.WantError(t, err, platform.CodeConflict, "project 'fraud-models' has 1 active API keys scoped to it; revoke them first")
			b.unchanged(t, before)
			// Revoked, the key goes with the project.
			keys, err := b.Svc.APIKeys(b.Admin, "rita")
			platformtest.Must(t, err)
			for _, k := range keys {
				platformtest.Must(t, second(b.Svc.RevokeAPIKey(b.Admin, k.ID)))
			}
			platformtest.Must(t, second(b.Svc.DeleteProject(b.Admin, "fraud-models")))
			keys, err = b.Svc.APIKeys(b.Admin, "rita")
			platformtest.Must(t, err)
			for _, k := range keys {
				if k.ProjectID != "" {
					t.Fatalf("rita's key scoped to the deleted project is still there: %+v", k)
				}
			}
		})
	})

	t.Run("a missing object is not found", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			for what, err := range map[string]error{
				"pool":             second(b.Svc.UpdatePool(b.Admin, "lumi", platform.PoolInput{})),
				"profile":          second(b.Svc.DeleteProfile(b.Admin, "ghost")),
				"class":            second(b.Svc.DeleteGPUClass(b.Admin, "b200")),
				"group":            second(b.Svc.UpdateGroup(b.Admin, "ghosts", platform.GroupInput{})),
				"policy":           second(b.Svc.DeletePolicy(b.Admin, "ghosts")),
				"compute resource": second(b.Svc.DisconnectProfile(b.Admin, "no-such-id")),
				"project":          second(b.Svc.DeleteProject(b.Admin, "ghost")),
			} {
				if platform.ErrorCode(err) != platform.CodeNotFound {
					t.Errorf("%s: %v (code %s), want NOT_FOUND", what, err, platform.ErrorCode(err))
				}
			}
		})
	})
}

// second keeps the error of a (value, error) pair.
func second[T any](_ T, err error) error { return err }

// idOf returns the id of a group's compute resource, or "" if there is none.
func idOf(ctx context.Context, s *platform.Service, group, name string) string {
	e, err := s.Estate(ctx)
	if err != nil {
		return ""
	}
	g := e.GroupByName(group)
	if g == nil {
		return ""
	}
	pol := e.PolicyOfGroup(g.ID)
	if pol == nil {
		return ""
	}
	for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
		if cr.Name == name {
			return cr.ID
		}
	}
	return ""
}
