package autoscaler_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/autoscaler"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
)

// fakePlane answers the autoscaler's syncs with a pool state the test
// sets, and keeps what the autoscaler reported.
type fakePlane struct {
	mu      sync.Mutex
	spec    agentapi.AutoscalerSpec
	placed  []agentapi.PlacedTask
	workers []agentapi.PoolWorker
	reports []*agentapi.AutoscalerSyncRequest
	// err, when set, is every sync's answer.
	err error
}

func (f *fakePlane) SyncAutoscaler(_ context.Context, req *agentapi.AutoscalerSyncRequest) (*agentapi.AutoscalerSyncResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, req)
	if f.err != nil {
		return nil, f.err
	}
	return &agentapi.AutoscalerSyncResponse{Autoscaler: f.spec, Placed: slices.Clone(f.placed), Workers: slices.Clone(f.workers), SyncSeconds: 15}, nil
}

func (f *fakePlane) last() *agentapi.AutoscalerSyncRequest { return f.reports[len(f.reports)-1] }

// bundle is one autoscaler against the EC2 fake, on a fake clock.
type bundle struct {
	t     *testing.T
	now   time.Time
	plane *fakePlane
	ec2   *fakeEC2
	as    *autoscaler.Autoscaler
}

func setup(t *testing.T, mods ...func(*agentapi.AutoscalerSpec)) *bundle {
	t.Helper()
	b := &bundle{t: t, now: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return b.now }
	b.ec2 = newFakeEC2(t, clock)
	spec := agentapi.AutoscalerSpec{ID: "as1", Name: "burst", Pool: "cloud-burst", Provider: "aws", Region: "eu-west-1",
		InstanceTypes: []agentapi.InstanceType{{Name: "g5.12xlarge", GPUs: 4}, {Name: "g5.xlarge", GPUs: 1}}, MaxInstances: 3,
		IdleTimeoutSeconds: 600, SpinUpTimeoutSeconds: 900, Market: "spot", SpotFallback: true, SpotTimeoutSeconds: 120,
		SpotBlackoutSeconds: 1800, Image: "ami-0a1b2c3d4e5f60718"}
	for _, m := range mods {
		m(&spec)
	}
	b.plane = &fakePlane{spec: spec}
	b.as = autoscaler.New(autoscaler.Config{Client: b.plane, Provider: newEC2Provider(t, b.ec2), Server: "https://klique.example",
		Token: "kqw_secret_token_value", Now: clock})
	return b
}

// step runs one round and returns the EC2 calls it made.
func (b *bundle) step() []string {
	b.t.Helper()
	if _, err := b.as.Step(context.Background()); err != nil {
		b.t.Fatalf("step: %v", err)
	}
	return b.ec2.actions()
}

// report runs one more round (which the test expects to change nothing
// at the provider) and returns what the autoscaler will report.
func (b *bundle) report() *agentapi.AutoscalerSyncRequest {
	b.t.Helper()
	if got := b.step(); len(got) > 0 {
		b.t.Fatalf("a round to read the report called EC2: %q", got)
	}
	return b.as.Report()
}

func (b *bundle) wait(ids ...string) {
	b.plane.placed = nil
	for _, id := range ids {
		b.plane.placed = append(b.plane.placed, agentapi.PlacedTask{TaskID: id, MilliGPUsPerNode: 1000, Nodes: 1, PlacedAt: b.now})
	}
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestAutoscalerDecisions(t *testing.T) {
	t.Parallel()

	t.Run("waiting work starts a spot instance of the smallest type that fits, once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		want(t, "second round: the instance is on its way", b.step(), nil)
		r := b.plane.last()
		if len(r.Instances) != 1 || r.Instances[0].State != "pending" || r.Instances[0].Market != "spot" || r.Instances[0].GPUs != 1 ||
			!strings.HasPrefix(r.Instances[0].Worker, "burst-") || r.Message != "" {
			t.Fatalf("report %+v", r)
		}
		b.plane.placed = append(b.plane.placed, agentapi.PlacedTask{TaskID: "t2", MilliGPUsPerNode: 3000, Nodes: 1})
		want(t, "a 3-GPU task", b.step(), []string{"RunInstances spot g5.12xlarge"})
	})

	t.Run("spot refused: on-demand at once, and no spot requests until the blackout ends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(s *agentapi.AutoscalerSpec) { s.SpinUpTimeoutSeconds = 3600 })
		b.ec2.refuse["spot"] = "insufficient-instance-capacity.xml"
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge", "RunInstances on-demand g5.xlarge"})
		if r := b.as.Report(); !strings.Contains(r.Message, "started on-demand instance i-0") {
			t.Fatalf("message %q", r.Message)
		}
		r := b.report()
		if !strings.Contains(r.Message, "no spot capacity for g5.xlarge") || !strings.Contains(r.Message, "InsufficientInstanceCapacity") {
			t.Fatalf("message while the blackout lasts %q", r.Message)
		}
		if r.SpotBlackoutUntil == nil || !r.SpotBlackoutUntil.Equal(b.now.Add(30*time.Minute)) {
			t.Fatalf("blackout until %v, want %v", r.SpotBlackoutUntil, b.now.Add(30*time.Minute))
		}
		if r.Instances[0].Market != "on_demand" {
			t.Fatalf("instance %+v", r.Instances[0])
		}
		delete(b.ec2.refuse, "spot")
		b.now = b.now.Add(29 * time.Minute)
		b.wait("t1", "t2")
		want(t, "inside the blackout", b.step(), []string{"RunInstances on-demand g5.xlarge"})
		b.now = b.now.Add(time.Minute)
		b.wait("t1", "t2", "t3")
		want(t, "after the blackout", b.step(), []string{"RunInstances spot g5.xlarge"})
	})

	t.Run("spot refused without fallback: the task waits and says why", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(s *agentapi.AutoscalerSpec) { s.SpotFallback = false })
		b.ec2.refuse["spot"] = "max-spot-instance-count-exceeded.xml"
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		r := b.report()
		if len(r.Waiting) != 1 || r.Waiting[0].TaskIDs[0] != "t1" || !strings.Contains(r.Waiting[0].Reason, "on-demand fallback is off") {
			t.Fatalf("waiting %+v", r.Waiting)
		}
	})

	t.Run("a spot request not fulfilled in time is terminated and on-demand bought", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.ec2.stuckPending = true
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		b.now = b.now.Add(119 * time.Second)
		want(t, "before the spot timeout", b.step(), nil)
		b.now = b.now.Add(time.Second)
		want(t, "at the spot timeout", b.step(), []string{"TerminateInstances i-00000000000000001", "RunInstances on-demand g5.xlarge"})
		if r := b.as.Report(); !strings.Contains(r.Message, "was not fulfilled within 2m0s") || r.SpotBlackoutUntil == nil {
			t.Fatalf("report %+v", r)
		}
	})

	t.Run("at the maximum the waiting tasks say so", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(s *agentapi.AutoscalerSpec) { s.MaxInstances = 2 })
		b.wait("t1", "t2", "t3")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge", "RunInstances spot g5.xlarge"})
		r := b.report()
		if len(r.Waiting) != 1 || strings.Join(r.Waiting[0].TaskIDs, ",") != "t3" ||
			r.Waiting[0].Reason != "autoscaler burst is at its maximum of 2 instances; the task starts when one frees" {
			t.Fatalf("waiting %+v", r.Waiting)
		}
		if !strings.Contains(r.Message, "1 task(s) wait: autoscaler burst is at its maximum of 2 instances") {
			t.Fatalf("message %q", r.Message)
		}
	})

	t.Run("a task larger than every instance type says so", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.plane.placed = []agentapi.PlacedTask{{TaskID: "big", MilliGPUsPerNode: 8000, Nodes: 1}}
		want(t, "round", b.step(), nil)
		if r := b.report(); len(r.Waiting) != 1 || r.Waiting[0].Reason != "no instance type of autoscaler burst has 8 GPUs" {
			t.Fatalf("waiting %+v", r.Waiting)
		}
	})

	t.Run("an instance whose worker never registers is terminated after the spin-up time", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		b.now = b.now.Add(14 * time.Minute)
		want(t, "within the spin-up time", b.step(), nil)
		b.now = b.now.Add(time.Minute)
		got := b.step()
		want(t, "at the spin-up time: terminated, and a new one for the work still waiting", got,
			[]string{"TerminateInstances i-00000000000000001", "RunInstances spot g5.xlarge"})
		if r := b.as.Report(); !strings.Contains(r.Message, "did not register its worker burst-") || !strings.Contains(r.Message, "spin-up time of 15m0s") {
			t.Fatalf("message %q", r.Message)
		}
	})

	t.Run("a registered worker that runs nothing is removed after the idle timeout: back to zero", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		name := b.report().Instances[0].Worker
		// The worker registers and claims the task.
		b.plane.placed = nil
		b.plane.workers = []agentapi.PoolWorker{{ID: "w1", Hostname: name, GPUs: 1, Online: true, RunningTasks: 1, RunningMilliGPUs: 1000}}
		b.now = b.now.Add(3 * time.Minute)
		if r := b.report(); r.Instances[0].State != "running" || r.Instances[0].RegisteredAt == nil {
			t.Fatalf("instance %+v", r.Instances[0])
		}
		// The task ends; the worker idles.
		b.plane.workers[0].RunningTasks, b.plane.workers[0].RunningMilliGPUs = 0, 0
		b.now = b.now.Add(time.Hour)
		if r := b.report(); r.Instances[0].State != "idle" || !r.Instances[0].IdleSince.Equal(b.now) {
			t.Fatalf("instance %+v", r.Instances[0])
		}
		b.now = b.now.Add(9 * time.Minute)
		want(t, "idle for 9 minutes", b.step(), nil)
		b.now = b.now.Add(time.Minute)
		want(t, "idle for 10 minutes", b.step(), []string{"TerminateInstances i-00000000000000001"})
		b.plane.workers = nil
		b.step()
		if r := b.report(); len(r.Instances) != 0 {
			t.Fatalf("instances after scale-down %+v", r.Instances)
		}
	})

	t.Run("an idle worker takes new work before anything starts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.plane.workers = []agentapi.PoolWorker{{ID: "w1", Hostname: "elsewhere", GPUs: 4, Online: true, RunningTasks: 1, RunningMilliGPUs: 2000}}
		b.wait("t1", "t2")
		want(t, "two free GPUs for two tasks", b.step(), nil)
		b.wait("t1", "t2", "t3")
		want(t, "the third needs an instance", b.step(), []string{"RunInstances spot g5.xlarge"})
	})

	t.Run("a restarted autoscaler adopts its instances by their tags", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		again := autoscaler.New(autoscaler.Config{Client: b.plane, Provider: newEC2Provider(t, b.ec2), Now: func() time.Time { return b.now }})
		if _, err := again.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		want(t, "the new daemon's first round", b.ec2.actions(), nil)
		if _, err := again.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := b.plane.last(); len(r.Instances) != 1 || !strings.HasPrefix(r.Instances[0].Worker, "burst-") {
			t.Fatalf("adopted %+v", r.Instances)
		}
	})

	t.Run("a daemon whose autoscaler was deleted terminates its instances and stops", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.wait("t1")
		want(t, "first round", b.step(), []string{"RunInstances spot g5.xlarge"})
		b.plane.mu.Lock()
		b.plane.err = &client.Error{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "pool cloud-burst has no autoscaler"}
		b.plane.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.as.Run(ctx); err == nil || !strings.Contains(err.Error(), "has no autoscaler") {
			t.Fatalf("Run: %v", err)
		}
		want(t, "on the refusal", b.ec2.actions(), []string{"TerminateInstances i-00000000000000001"})
	})
}
