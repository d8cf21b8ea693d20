package platform_test

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// keptEstateObjects are the subtests of TestEstateChanges for deletions:
// what is still in use is kept and the refusal says why, what is missing is
// not found.
func keptEstateObjects(t *testing.T) {
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
