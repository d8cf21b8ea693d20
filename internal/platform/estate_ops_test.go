package platform_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

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

	refusedEstateChanges(t)
	keptEstateObjects(t)
}
