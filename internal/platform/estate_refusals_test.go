package platform_test

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// refusedEstateChanges are the subtests of TestEstateChanges for changes
// that are refused as bad input or as conflicts, each of which must leave
// the estate and the audit trail as they were.
func refusedEstateChanges(t *testing.T) {
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
}
