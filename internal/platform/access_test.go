package platform_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func TestAccess(t *testing.T) {
	t.Parallel()

	t.Run("members, leads, viewers and project-scoped admins cannot change the allocation model", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			scopedAdmin := b.Key(t, "admin", "shared-eval")
			callers := map[string]context.Context{"member": ps.rita, "lead": ps.lead, "viewer": ps.viewer, "scoped admin": scopedAdmin}
			ops := map[string]func(ctx context.Context) error{
				"create a pool": func(ctx context.Context) error {
					return second(b.Svc.CreatePool(ctx, platform.PoolInput{Name: ptr("x"), Kind: ptr(model.PoolSlurm), CapacityGPUs: ptr(1), GPUClass: ptr("h100")}))
				},
				"change a policy": func(ctx context.Context) error {
					return second(b.Svc.UpdatePolicy(ctx, "ml-research", platform.PolicyInput{LimitGPUs: ptr(100)}))
				},
				"connect a profile": func(ctx context.Context) error {
					return second(b.Svc.ConnectProfile(ctx, platform.ConnectInput{Policy: "ml-research", Profile: "one-gpu", Name: ptr("x")}))
				},
				"delete a project": func(ctx context.Context) error { return second(b.Svc.DeleteProject(ctx, "fraud-models")) },
				"apply an estate file": func(ctx context.Context) error {
					return second(b.Svc.ApplyEstate(ctx, platformtest.ExampleEstate(t), false))
				},
				"export the estate": func(ctx context.Context) error { return second(b.Svc.ExportEstate(ctx)) },
				"read the audit trail": func(ctx context.Context) error {
					return second(b.Svc.AuditLog(ctx, platform.AuditFilter{}, store.Page{}))
				},
			}
			before := b.snapshot(t)
			for who, ctx := range callers {
				for what, op := range ops {
					err := op(ctx)
					if platform.ErrorCode(err) != platform.CodeForbidden {
						t.Errorf("%s may %s: %v (code %s), want FORBIDDEN", who, what, err, platform.ErrorCode(err))
						continue
					}
					want := "only a tenant admin can"
					if who == "scoped admin" {
						want = "this credential is scoped to one project"
					}
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s may not %s: %q does not say %q", who, what, err, want)
					}
				}
			}
			b.unchanged(t, before)
		})
	})

	t.Run("a viewer cannot enqueue, abort or clone", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			task := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			_, err := b.Svc.EnqueueTask(ps.viewer, platform.EnqueueInput{Name: "x", Project: "fraud-models", ComputeResource: "1 GPU",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			platformtest.WantError(t, err, platform.CodeForbidden, "a viewer cannot enqueue tasks")
			// The viewer sees the group's task but may not stop it.
			if _, err := b.Svc.Task(ps.viewer, task.ID); err != nil {
				t.Fatalf("a viewer in the group cannot see its task: %v", err)
			}
			_, err = b.Svc.AbortTask(ps.viewer, task.ID, "")
			platformtest.WantError(t, err, platform.CodeForbidden, "only the task's owner, a lead of its group or an admin can abort task 'train'")
			_, err = b.Svc.CloneTask(ps.viewer, task.ID, platform.CloneInput{})
			platformtest.WantError(t, err, platform.CodeForbidden, "a viewer cannot enqueue tasks")
		})
	})

	t.Run("a member enqueues only on the compute resources of their groups", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			visionEight := b.computeResource(t, "vision", "8 GPUs")
			try := func(ctx context.Context, project, cr, group string) error {
				_, err := b.Svc.EnqueueTask(ctx, platform.EnqueueInput{Name: "t", Project: project, ComputeResource: cr, Group: group,
					Spec: model.TaskSpec{Command: []string{"true"}}})
				return err
			}
			auditBefore := len(b.AuditLog(t))

			platformtest.WantError(t, try(ps.vic, "vision-detect", "multi-node training", ""), platform.CodeForbidden,
				"the compute resource 'multi-node training' is not open to group vision")
			// By id, another group's compute resource is not found, and the
			// refusal names neither it nor its group.
			err := try(ps.rita, "shared-eval", visionEight.ID, "")
			platformtest.WantError(t, err, platform.CodeNotFound, "no compute resource '"+visionEight.ID+"' is open to you")
			if strings.Contains(err.Error(), "8 GPUs") || strings.Contains(err.Error(), "vision") {
				t.Fatalf("the refusal names another group's compute resource: %v", err)
			}
			platformtest.WantError(t, try(ps.nobody, "shared-eval", "1 GPU", ""), platform.CodeForbidden,
				"the compute resource '1 GPU' is not open to you", "you are in no group; ask an admin to add you to one")
			platformtest.WantError(t, try(ps.rita, "shared-eval", "1 GPU", "vision"), platform.CodeForbidden, "you are not in group vision")
			platformtest.WantError(t, try(ps.rita, "vision-detect", "1 GPU", ""), platform.CodeNotFound, "no project 'vision-detect'")
			// By id, the refusal is the one for an id that does not exist:
			// it names neither the project nor its group.
			vision, err := b.Svc.Project(b.Admin, "vision-detect")
			platformtest.Must(t, err)
			ghost := model.NewID()
			byID, unknown := try(ps.rita, vision.ID, "1 GPU", ""), try(ps.rita, ghost, "1 GPU", "")
			platformtest.WantError(t, byID, platform.CodeNotFound, "no project '"+vision.ID+"'")
			if strings.Contains(byID.Error(), "vision") || strings.ReplaceAll(byID.Error(), vision.ID, "ID") != strings.ReplaceAll(unknown.Error(), ghost, "ID") {
				t.Errorf("another group's project by id: %q; an unknown id: %q; want the same refusal, naming neither", byID, unknown)
			}
			platformtest.WantError(t, try(ps.both, "fraud-models", "1 GPU", "vision"), platform.CodeForbidden,
				"project 'fraud-models' belongs to group ml-research, and compute resource '1 GPU' is group vision's; use a compute resource of group ml-research")
			platformtest.WantError(t, try(ps.rita, "shared-eval", "2 GPUs", ""), platform.CodeNotFound, "no compute resource '2 GPUs' is open to you")
			platformtest.WantError(t, try(ps.both, "", "1 GPU", "vision"), platform.CodeInvalid, "say which project the task belongs to: give the project field, or set your default project with 'klique project use NAME'")
			platformtest.WantError(t, try(ps.rita, "shared-eval", " ", ""), platform.CodeInvalid, "say which compute resource")
			if n := len(b.AuditLog(t)); n != auditBefore {
				t.Fatalf("refused enqueues wrote %d audit entries", n-auditBefore)
			}

			// Their own group's, by name or by id, in a project of the group
			// or an open one.
			task := enqueue(t, b, ps.rita, "fraud-models", "multi-node training", "", nil)
			if want := b.computeResource(t, "ml-research", "multi-node training"); task.ComputeResourceID != want.ID || task.PolicyID != want.PolicyID {
				t.Fatalf("task on compute resource %s of policy %s, want %s of %s", task.ComputeResourceID, task.PolicyID, want.ID, want.PolicyID)
			}
			enqueue(t, b, ps.vic, "shared-eval", visionEight.ID, "", nil)
		})
	})

	t.Run("a member sees their groups' tasks and their own, not other groups'", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			ritas := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			leads := enqueue(t, b, ps.lead, "shared-eval", "half GPU", "", nil)
			vics := enqueue(t, b, ps.vic, "vision-detect", "1 GPU", "", nil)
			nlps := enqueue(t, b, b.Admin, "shared-eval", "1 GPU", "nlp", nil)

			ids := func(ctx context.Context, f platform.TaskListFilter) []string {
				t.Helper()
				ts, err := b.Svc.Tasks(ctx, f, store.Page{})
				platformtest.Must(t, err)
				var out []string
				for _, tk := range ts {
					out = append(out, tk.ID)
				}
				return out
			}
			if got, want := ids(ps.rita, platform.TaskListFilter{}), []string{leads.ID, ritas.ID}; !slices.Equal(got, want) {
				t.Errorf("rita sees %v, want ml-research's %v, newest first", got, want)
			}
			if got, want := ids(ps.both, platform.TaskListFilter{}), []string{vics.ID, leads.ID, ritas.ID}; !slices.Equal(got, want) {
				t.Errorf("bo sees %v, want ml-research's and vision's %v", got, want)
			}
			if got, want := ids(b.Admin, platform.TaskListFilter{}), []string{nlps.ID, vics.ID, leads.ID, ritas.ID}; !slices.Equal(got, want) {
				t.Errorf("the admin sees %v, want all %v", got, want)
			}
			if got := ids(ps.nobody, platform.TaskListFilter{}); len(got) != 0 {
				t.Errorf("a member of no group sees %v", got)
			}
			if got, want := ids(ps.rita, platform.TaskListFilter{Mine: true}), []string{ritas.ID}; !slices.Equal(got, want) {
				t.Errorf("rita's own: %v, want %v", got, want)
			}
			for _, id := range []string{vics.ID, nlps.ID} {
				_, err := b.Svc.Task(ps.rita, id)
				platformtest.WantError(t, err, platform.CodeNotFound, "no task '"+id+"'")
			}
			// A group filter names only groups the caller sees.
			_, err := b.Svc.Tasks(ps.rita, platform.TaskListFilter{Group: "vision"}, store.Page{})
			platformtest.WantError(t, err, platform.CodeNotFound, "no group 'vision'")

			// Their own task stays theirs after they leave the group; the
			// group's other tasks do not.
			platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
			rita := b.Key(t, "rita", "")
			if got, want := ids(rita, platform.TaskListFilter{}), []string{ritas.ID}; !slices.Equal(got, want) {
				t.Errorf("after leaving ml-research rita sees %v, want her own %v", got, want)
			}
		})
	})

	t.Run("a member sees their groups' part of the allocation model", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			e, err := b.Svc.Estate(ps.vic)
			platformtest.Must(t, err)
			if len(e.Pools) != 4 || len(e.Profiles) != 6 || len(e.GPUClasses) != 2 {
				t.Errorf("pools, profiles and classes are open to every user: %d, %d, %d", len(e.Pools), len(e.Profiles), len(e.GPUClasses))
			}
			if len(e.Groups) != 1 || e.Groups[0].Name != "vision" || len(e.Policies) != 1 || len(e.ComputeResources) != 3 {
				t.Errorf("vic sees groups %v, %d policies, %d compute resources; want vision's only", e.Groups, len(e.Policies), len(e.ComputeResources))
			}
			var projects []string
			for _, p := range e.Projects {
				projects = append(projects, p.Name)
			}
			if strings.Join(projects, ",") != "shared-eval,vision-detect" {
				t.Errorf("vic sees projects %v", projects)
			}
			_, err = b.Svc.Policy(ps.vic, "nlp")
			platformtest.WantError(t, err, platform.CodeNotFound, "no resource policy 'nlp'")
			_, err = b.Svc.ComputeResource(ps.vic, b.computeResource(t, "nlp", "1 GPU").ID)
			platformtest.WantError(t, err, platform.CodeNotFound)
			_, err = b.Svc.EstateWarnings(ps.vic)
			platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin can read estate warnings")
		})
	})

	t.Run("a group lead can abort a member's task and a member cannot abort another's", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			task := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			_, err := b.Svc.AbortTask(ps.both, task.ID, "")
			platformtest.WantError(t, err, platform.CodeForbidden, "only the task's owner, a lead of its group or an admin can abort task 'train'")
			_, err = b.Svc.AbortTask(ps.vic, task.ID, "")
			platformtest.WantError(t, err, platform.CodeNotFound, "no task '"+task.ID+"'")

			aborted, err := b.Svc.AbortTask(ps.lead, task.ID, "  wrong data  ")
			platformtest.Must(t, err)
			if aborted.Status != model.TaskAborted || aborted.Reason != "aborted by lena: wrong data" || aborted.FinishedAt == nil {
				t.Fatalf("aborted task %+v", aborted)
			}
			got, err := b.Svc.Task(ps.rita, task.ID)
			platformtest.Must(t, err)
			if got.Status != model.TaskAborted || got.Reason != aborted.Reason {
				t.Fatalf("task read back as %s %q", got.Status, got.Reason)
			}
			last := b.AuditLog(t)[0]
			if last.Action != "task.aborted" || last.ActorID != userID(ps.lead) || last.ObjectID != task.ID || last.Detail != aborted.Reason {
				t.Fatalf("audit entry %+v", last)
			}

			// A lead of another group cannot; the owner can.
			other := b.User(t, "olga", model.RoleMember, "lead:vision", "ml-research")
			own := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			_, err = b.Svc.AbortTask(other, own.ID, "")
			platformtest.WantError(t, err, platform.CodeForbidden)
			platformtest.Must(t, second(b.Svc.AbortTask(ps.rita, own.ID, "")))
		})
	})

	t.Run("a project-scoped key sees and acts on that project only", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			scoped := b.Key(t, "rita", "fraud-models")
			shared := enqueue(t, b, ps.rita, "shared-eval", "1 GPU", "", nil)

			// The project comes from the key when the task names none.
			inProject := enqueue(t, b, scoped, "", "1 GPU", "", nil)
			project, err := b.Svc.Project(b.Admin, "fraud-models")
			platformtest.Must(t, err)
			if inProject.ProjectID != project.ID {
				t.Fatalf("task in project %s, want fraud-models %s", inProject.ProjectID, project.ID)
			}
			_, err = b.Svc.EnqueueTask(scoped, platform.EnqueueInput{Name: "t", Project: "shared-eval", ComputeResource: "1 GPU",
				Spec: model.TaskSpec{Command: []string{"true"}}})
			platformtest.WantError(t, err, platform.CodeForbidden, "this credential is scoped to another project and cannot put work in project 'shared-eval'")

			ts, err := b.Svc.Tasks(scoped, platform.TaskListFilter{}, store.Page{})
			platformtest.Must(t, err)
			if len(ts) != 1 || ts[0].ID != inProject.ID {
				t.Fatalf("the scoped key lists %d tasks, want only %s", len(ts), inProject.ID)
			}
			ts, err = b.Svc.Tasks(scoped, platform.TaskListFilter{Project: "shared-eval"}, store.Page{})
			if err == nil && len(ts) > 0 {
				t.Fatalf("the scoped key lists another project's tasks: %v", ts)
			}
			for what, err := range map[string]error{
				"read":  second(b.Svc.Task(scoped, shared.ID)),
				"abort": second(b.Svc.AbortTask(scoped, shared.ID, "")),
				"clone": second(b.Svc.CloneTask(scoped, shared.ID, platform.CloneInput{})),
			} {
				if platform.ErrorCode(err) != platform.CodeNotFound {
					t.Errorf("the scoped key may %s another project's task: %v", what, err)
				}
			}
			e, err := b.Svc.Estate(scoped)
			platformtest.Must(t, err)
			if len(e.Projects) != 1 || e.Projects[0].Name != "fraud-models" {
				t.Errorf("the scoped key sees projects %v", e.Projects)
			}
			_, _, err = b.Svc.CreateAPIKey(scoped, platform.APIKeyInput{Name: "more"})
			platformtest.WantError(t, err, platform.CodeForbidden, "a credential scoped to a project cannot create API keys")
			_, err = b.Svc.SetGroupMember(b.Key(t, "lena", "fraud-models"), "ml-research", "nod", model.GroupRoleMember)
			platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin or a lead of group ml-research can change its members")
		})
	})

	t.Run("users of another tenant get NOT_FOUND for every object of this tenant", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			task := enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			ritaKey, _, err := b.Svc.CreateAPIKey(b.Admin, platform.APIKeyInput{Name: "k", User: "rita"})
			platformtest.Must(t, err)

			nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme Corp", "root")
			platformtest.Must(t, err)
			acmeAdmin := b.SignIn(t, nt.Secret)
			_, err = b.Svc.CreateUser(acmeAdmin, platform.UserInput{Name: ptr("mia")})
			platformtest.Must(t, err)
			_, secret, err := b.Svc.CreateAPIKey(acmeAdmin, platform.APIKeyInput{Name: "k", User: "mia"})
			platformtest.Must(t, err)
			acmeMember := b.SignIn(t, secret)

			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			pool, prof, class := e.PoolByName("onprem-k8s"), e.ProfileByName("multi-node-2x8"), e.GPUClassByName("a100-80gb")
			group, project := e.GroupByName("ml-research"), e.ProjectByName("fraud-models")
			policy := e.PolicyOfGroup(group.ID)
			cr := b.computeResource(t, "ml-research", "multi-node training")
			secretNames := []string{pool.Name, prof.Name, class.Name, group.Name, project.Name, cr.Name, task.Name, "rita", "default", "admin"}

			for who, ctx := range map[string]context.Context{"admin": acmeAdmin, "member": acmeMember} {
				ops := map[string]error{
					"Pool":                    second(b.Svc.Pool(ctx, pool.ID)),
					"Profile":                 second(b.Svc.Profile(ctx, prof.ID)),
					"GPUClass":                second(b.Svc.GPUClass(ctx, class.ID)),
					"Group":                   second(b.Svc.Group(ctx, group.ID)),
					"Policy":                  second(b.Svc.Policy(ctx, policy.ID)),
					"Project":                 second(b.Svc.Project(ctx, project.ID)),
					"ComputeResource":         second(b.Svc.ComputeResource(ctx, cr.ID)),
					"QueuedTasks":             second(b.Svc.QueuedTasks(ctx, cr.ID)),
					"Task":                    second(b.Svc.Task(ctx, task.ID)),
					"AbortTask":               second(b.Svc.AbortTask(ctx, task.ID, "")),
					"CloneTask":               second(b.Svc.CloneTask(ctx, task.ID, platform.CloneInput{})),
					"EnqueueTask":             second(b.Svc.EnqueueTask(ctx, platform.EnqueueInput{Name: "t", Project: project.ID, ComputeResource: cr.ID, Spec: model.TaskSpec{Command: []string{"x"}}})),
					"Tasks by resource":       second(b.Svc.Tasks(ctx, platform.TaskListFilter{ComputeResource: cr.ID}, store.Page{})),
					"Tasks by project":        second(b.Svc.Tasks(ctx, platform.TaskListFilter{Project: project.ID}, store.Page{})),
					"Tasks by group":          second(b.Svc.Tasks(ctx, platform.TaskListFilter{Group: group.ID}, store.Page{})),
					"GroupMembers":            second(b.Svc.GroupMembers(ctx, group.ID)),
					"User":                    second(b.Svc.User(ctx, userID(ps.rita))),
					"Tenant":                  second(b.Svc.Tenant(ctx, b.Tenant)),
					"RevokeAPIKey":            second(b.Svc.RevokeAPIKey(ctx, ritaKey.ID)),
					"SetGroupMember":          second(b.Svc.SetGroupMember(ctx, group.ID, "mia", model.GroupRoleMember)),
					"RemoveGroupMember":       b.Svc.RemoveGroupMember(ctx, group.ID, "mia"),
					"CreateAPIKey in project": second2(b.Svc.CreateAPIKey(ctx, platform.APIKeyInput{Name: "k", Project: project.ID})),
				}
				if who == "admin" {
					ops["UpdatePool"] = second(b.Svc.UpdatePool(ctx, pool.ID, platform.PoolInput{CapacityGPUs: ptr(1)}))
					ops["DeletePool"] = second(b.Svc.DeletePool(ctx, pool.ID))
					ops["UpdateProfile"] = second(b.Svc.UpdateProfile(ctx, prof.ID, platform.ProfileInput{}))
					ops["DeleteGPUClass"] = second(b.Svc.DeleteGPUClass(ctx, class.ID))
					ops["UpdateGroup"] = second(b.Svc.UpdateGroup(ctx, group.ID, platform.GroupInput{}))
					ops["DeletePolicy"] = second(b.Svc.DeletePolicy(ctx, policy.ID))
					ops["UpdateComputeResource"] = second(b.Svc.UpdateComputeResource(ctx, cr.ID, platform.ComputeResourceInput{Name: ptr("x")}))
					ops["DisconnectProfile"] = second(b.Svc.DisconnectProfile(ctx, cr.ID))
					ops["DeleteProject"] = second(b.Svc.DeleteProject(ctx, project.ID))
					ops["UpdateUser"] = second(b.Svc.UpdateUser(ctx, userID(ps.rita), platform.UserInput{Disabled: ptr(true)}))
					ops["APIKeys"] = second(b.Svc.APIKeys(ctx, userID(ps.rita)))
					ops["AuditLog"] = second(b.Svc.AuditLog(ctx, platform.AuditFilter{Actor: b.AdminID}, store.Page{}))
				}
				for op, err := range ops {
					if code := platform.ErrorCode(err); code != platform.CodeNotFound {
						t.Errorf("%s of acme: %s: %v (code %s), want NOT_FOUND", who, op, err, code)
						continue
					}
					for _, name := range secretNames {
						if strings.Contains(err.Error(), name) {
							t.Errorf("%s of acme: %s: %q names %q of tenant default", who, op, err, name)
						}
					}
				}
				ts, err := b.Svc.Tasks(ctx, platform.TaskListFilter{}, store.Page{})
				platformtest.Must(t, err)
				ae, err := b.Svc.Estate(ctx)
				platformtest.Must(t, err)
				if len(ts) != 0 || len(ae.Pools)+len(ae.Groups)+len(ae.Projects)+len(ae.ComputeResources) != 0 {
					t.Errorf("%s of acme sees %d tasks and part of default's estate", who, len(ts))
				}
			}
			// Nothing of default's changed, and rita's key still works.
			got, err := b.Svc.Task(b.Key(t, "rita", ""), task.ID)
			platformtest.Must(t, err)
			if got.Status != model.TaskQueued {
				t.Fatalf("rita's task is %s", got.Status)
			}
			if _, err := b.Auth.Authenticate(t.Context(), "x"); err == nil {
				t.Fatal("a made-up key authenticates")
			}
		})
	})
}

// second2 keeps the error of a (value, value, error) triple.
func second2[T, U any](_ T, _ U, err error) error { return err }
