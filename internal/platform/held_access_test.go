package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// A tenant secret the platform holds for itself (an LLM provider's key,
// an autoscaler's cloud credentials) is never given to a task: any member
// can enqueue one, and its code could print the value in a form no log
// redaction recognises. Naming one is refused at enqueue; one that becomes
// held after the task was enqueued is refused when the worker asks for it.
func TestHeldTenantSecretsAreNeverGivenToTasks(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		for name, value := range map[string]string{"OPENAI_API_KEY": "sk-provider", "REGISTRY_TOKEN": "registry", "AWS_SECRET_ACCESS_KEY": "cloud"} {
			_, err := b.Svc.SetSecret(b.Admin, "tenant", "", name, value)
			platformtest.Must(t, err)
		}
		rita := b.User(t, "rita", model.RoleMember, "ml-research")
		spec := func(secret string) model.TaskSpec {
			return model.TaskSpec{Command: []string{"sh", "-c", "echo $" + secret + " | rev"}, Secrets: []string{secret}}
		}
		_, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "exfil", Project: "fraud-models", ComputeResource: "1 A100", Spec: spec("OPENAI_API_KEY")})
		if platform.ErrorCode(err) != platform.CodeForbidden || !strings.Contains(err.Error(), "the key of LLM provider openai") {
			t.Fatalf("a task naming the gateway's provider key: %v, want it refused", err)
		}
		// A shared tenant secret is a task's to use...
		task, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "pull", Project: "fraud-models", ComputeResource: "1 A100", Spec: spec("REGISTRY_TOKEN")})
		platformtest.Must(t, err)
		// ...until an autoscaler holds it as its cloud credentials.
		_, err = b.Svc.CreateAutoscaler(b.Admin, platform.AutoscalerInput{Name: "burst", Pool: "cloud-burst", Provider: model.ProviderLocal,
			InstanceTypes: []model.InstanceType{{Name: "local-8", GPUs: 8}}, MaxInstances: 4, CredentialSecrets: []string{"REGISTRY_TOKEN", "AWS_SECRET_ACCESS_KEY"}})
		platformtest.Must(t, err)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w")
		platformtest.Must(t, err)
		wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
		platformtest.Must(t, err)
		wctx := identity.WithWorker(context.Background(), wk)
		reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "h1", GPUs: []agentapi.GPU{{Index: 0}}})
		platformtest.Must(t, err)
		a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
		platformtest.Must(t, err)
		if a == nil || a.TaskID != task.ID {
			t.Fatalf("claimed %+v, want task %s", a, task.ID)
		}
		got, err := b.Svc.TaskSecrets(wctx, a.TaskID, a.Attempt)
		if err == nil || !strings.Contains(err.Error(), "the cloud credentials of autoscaler burst") {
			t.Fatalf("the worker asked for a secret now held by an autoscaler: %v %v, want a refusal", got, err)
		}
		// A group's own secret of the same name is the group's tasks' to use.
		_, err = b.Svc.SetSecret(b.Admin, "group", "ml-research", "OPENAI_API_KEY", "sk-group-own")
		platformtest.Must(t, err)
		_, err = b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "own", Project: "fraud-models", ComputeResource: "1 A100", Spec: spec("OPENAI_API_KEY")})
		platformtest.Must(t, err)
	})
}

// A task credential (kqt_) is held by the user code of a job: it may
// report on its task, and may not act as the pool's autoscaler (read its
// cloud credentials, or rewrite its state).
func TestATaskCredentialCannotActAsTheAutoscaler(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		_, err := b.Svc.SetSecret(b.Admin, "tenant", "", "AWS_SECRET_ACCESS_KEY", "cloud")
		platformtest.Must(t, err)
		_, err = b.Svc.CreateAutoscaler(b.Admin, platform.AutoscalerInput{Name: "burst", Pool: "cloud-burst", Provider: model.ProviderLocal,
			InstanceTypes: []model.InstanceType{{Name: "local-8", GPUs: 8}}, MaxInstances: 4, CredentialSecrets: []string{"AWS_SECRET_ACCESS_KEY"}})
		platformtest.Must(t, err)
		pool, err := b.Svc.Pool(b.Admin, "cloud-burst")
		platformtest.Must(t, err)
		worker := identity.WithWorker(context.Background(), &identity.Worker{TenantID: b.Tenant, PoolID: pool.ID, PoolName: pool.Name, CredentialID: "c"})
		if _, err := b.Svc.AutoscalerCredentials(worker); err != nil {
			t.Fatalf("the worker credential: %v", err)
		}
		task := platform.WithTaskScope(worker, &platform.TaskScope{TaskID: "some-task", Attempt: 1})
		if creds, err := b.Svc.AutoscalerCredentials(task); platform.ErrorCode(err) != platform.CodeForbidden {
			t.Fatalf("a task credential read the autoscaler's credentials: %v %v", creds, err)
		}
		if _, err := b.Svc.SyncAutoscaler(task, agentapi.AutoscalerSyncRequest{Message: "owned"}); platform.ErrorCode(err) != platform.CodeForbidden {
			t.Fatalf("a task credential synced as the autoscaler: %v", err)
		}
	})
}

// Leading a group gives no write a role does not, and leads are made,
// demoted and removed by admins only.
func TestLeadsCannotOutgrowTheirRole(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		viewer := b.User(t, "val", model.RoleViewer, "lead:ml-research")
		if _, err := b.Svc.SetSecret(viewer, "group", "ml-research", "HF_TOKEN", "attacker"); platform.ErrorCode(err) != platform.CodeForbidden {
			t.Fatalf("a viewer who leads the group set its secret: %v", err)
		}
		lena := b.User(t, "lena", model.RoleMember, "lead:ml-research")
		b.User(t, "larry", model.RoleMember, "lead:ml-research")
		b.User(t, "mo", model.RoleMember, "ml-research")
		if _, err := b.Svc.SetGroupMember(lena, "ml-research", "larry", model.GroupRoleMember); platform.ErrorCode(err) != platform.CodeForbidden {
			t.Fatalf("a lead demoted a co-lead: %v", err)
		}
		if err := b.Svc.RemoveGroupMember(lena, "ml-research", "larry"); platform.ErrorCode(err) != platform.CodeForbidden {
			t.Fatalf("a lead removed a co-lead: %v", err)
		}
		// What leads are for still works: members come and go.
		platformtest.Must(t, b.Svc.RemoveGroupMember(lena, "ml-research", "mo"))
		_, err := b.Svc.SetGroupMember(lena, "ml-research", "mo", model.GroupRoleMember)
		platformtest.Must(t, err)
		_, err = b.Svc.SetSecret(lena, "group", "ml-research", "HF_TOKEN", "lena's")
		platformtest.Must(t, err)
	})
}

// A live subscription re-checks its credential however the connection
// was authenticated: here on the upgrade request, with nothing in
// connection_init. A user removed from the group gets no more of its
// queue, and once the key is revoked the subscription ends at the next
// update.
func TestASubscriptionAuthenticatedOnTheUpgradeIsCheckedAgain(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		_, secret, err := b.Svc.CreateAPIKey(b.Admin, platform.APIKeyInput{Name: "k", User: "rita"})
		platformtest.Must(t, err)
		p, err := b.Auth.Authenticate(context.Background(), secret)
		platformtest.Must(t, err)
		// What the HTTP layer puts in the upgrade request's context.
		up := identity.WithCredential(identity.WithPrincipal(context.Background(), p), secret)
		ctx, cancel := context.WithCancel(up)
		defer cancel()
		sub, release, err := b.Svc.OpenSubscriptions(ctx, "")
		platformtest.Must(t, err)
		defer release()
		cr := b.computeResource(t, "ml-research", "1 GPU")
		ch, err := b.Svc.SubscribeQueue(sub, cr.ID)
		platformtest.Must(t, err)
		<-ch // the snapshot
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
		first := enqueue(t, b, ps.lead, "fraud-models", cr.ID, "", nil)
		// Then the key is revoked: the connection ends at the queue's next
		// update, which it does not deliver.
		keys, err := b.Svc.APIKeys(b.Admin, "rita")
		platformtest.Must(t, err)
		for _, k := range keys {
			_, err := b.Svc.RevokeAPIKey(b.Admin, k.ID)
			platformtest.Must(t, err)
		}
		next := enqueue(t, b, ps.lead, "fraud-models", cr.ID, "", nil)
		timeout := time.After(10 * time.Second)
		for {
			select {
			case u, ok := <-ch:
				if !ok {
					return // ended: the credential no longer holds
				}
				if u.Task != nil && (u.Task.ID == first.ID || u.Task.ID == next.ID) {
					t.Fatalf("a member removed from the group received its queue's task %s", u.Task.Name)
				}
			case <-timeout:
				t.Fatal("the subscription of a revoked key is still open")
			}
		}
	})
}

// The first snapshot of a queue goes through the same check as each
// update: a key scoped to one project sees only that project's tasks.
func TestAQueueSnapshotShowsAScopedKeyItsProjectOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		b.User(t, "rita", model.RoleMember, "ml-research")
		rita := b.Key(t, "rita", "")
		scoped := b.Key(t, "rita", "shared-eval")
		cr := b.computeResource(t, "ml-research", "1 GPU")
		other := enqueue(t, b, rita, "fraud-models", cr.ID, "", nil)
		ch, err := b.Svc.SubscribeQueue(scoped, cr.ID)
		platformtest.Must(t, err)
		snap := <-ch
		for _, w := range snap.Waiting {
			if w.Task.ID == other.ID {
				t.Fatalf("a key scoped to shared-eval saw fraud-models task %s in the queue's snapshot", w.Task.Name)
			}
		}
		ch, err = b.Svc.SubscribeQueue(rita, cr.ID)
		platformtest.Must(t, err)
		if snap := <-ch; len(snap.Waiting) == 0 {
			t.Fatal("the unscoped key saw no waiting task in the snapshot")
		}
	})
}

// A key scoped to a project lists the project's model aliases while its
// owner may use the project, and none once the owner has left its group.
func TestAScopedKeyListsNoAliasesOnceItsOwnerLeaves(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		b.User(t, "rita", model.RoleMember, "ml-research")
		_, secret, err := b.Svc.CreateAPIKey(b.Admin, platform.APIKeyInput{Name: "scoped", User: "rita", Project: "fraud-models"})
		platformtest.Must(t, err)
		before, err := b.Svc.LLMAliases(b.SignIn(t, secret))
		platformtest.Must(t, err)
		if len(before) == 0 {
			t.Fatal("a member's scoped key lists no alias")
		}
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "ml-research", "rita"))
		b.Auth.Invalidate()
		after, err := b.Svc.LLMAliases(b.SignIn(t, secret))
		if err == nil && len(after) > 0 {
			t.Fatalf("the scoped key of one who left the group lists %d aliases", len(after))
		}
	})
}
