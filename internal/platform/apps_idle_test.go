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

// TestAppIdleLimits runs the idle sweep on an injected clock over two
// running instances: an idle one is warned ten minutes (the default lead)
// before its 30 idle minutes are up, once; traffic starts its countdown
// again and takes the warning back; GPU use under the threshold does not;
// it is then warned again and stopped with the reason on its record. A
// second instance, kept busy by its GPU, is not idle but is stopped at the
// maximum lifetime its launch shortened to an hour. A launch may not
// lengthen or remove an admin's limit.
func TestAppIdleLimits(t *testing.T) {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	platformtest.ForEachStore(t, func(t *testing.T, pb *platformtest.Bundle) {
		b := &testBundle{pb}
		b.ApplyExample(t)
		ps := b.people(t)
		app := echoApp()
		app.Name, app.IdleMinutes, app.MaxLifetimeMinutes = "notebook", 30, 8*60
		_, err := b.Svc.PutApp(b.Admin, app)
		platformtest.Must(t, err)

		t.Log("a launch may shorten the admin's limits, not lengthen or remove them")
		for _, bad := range []struct {
			in    platform.LaunchInput
			words []string
		}{
			{platform.LaunchInput{IdleMinutes: ptr(45)}, []string{"idleMinutes 45", "allows at most 30 (30 minutes)", "may shorten it, not lengthen it"}},
			{platform.LaunchInput{MaxLifetimeMinutes: ptr(9 * 60)}, []string{"maxLifetimeMinutes 540", "at most 480 (8 hours)"}},
			{platform.LaunchInput{IdleMinutes: ptr(0)}, []string{"idleMinutes 0", "give a number of minutes from 1"}},
		} {
			in := bad.in
			in.App, in.ComputeResource, in.Project = "notebook", "1 A100", "fraud-models"
			_, err := b.Svc.LaunchApp(ps.rita, in)
			platformtest.WantError(t, err, platform.CodeInvalid, bad.words...)
		}
		idle, err := b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "notebook", ComputeResource: "1 A100", Project: "fraud-models", Name: "idle-one"})
		platformtest.Must(t, err)
		busy, err := b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "notebook", ComputeResource: "1 A100", Project: "fraud-models", Name: "busy-one",
			MaxLifetimeMinutes: ptr(60)})
		platformtest.Must(t, err)
		if busy.Task.Spec.App.MaxLifetimeMinutes != 60 || busy.Task.Spec.App.IdleMinutes != 30 {
			t.Fatalf("busy launched with limits %+v", busy.Task.Spec.App)
		}

		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test", Now: b.Clock.Now}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w")
		platformtest.Must(t, err)
		wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
		platformtest.Must(t, err)
		wctx := identity.WithWorker(context.Background(), wk)
		reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "h1", GPUs: []agentapi.GPU{{Index: 0}, {Index: 1}}})
		platformtest.Must(t, err)
		attempts := map[string]int{}
		for range 2 {
			a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 2, WaitSeconds: 1})
			platformtest.Must(t, err)
			if a == nil {
				t.Fatal("no instance to claim")
			}
			attempts[a.TaskID] = a.Attempt
		}
		// beat keeps both leases and reports the busy one's GPU at 80 %
		// and the idle one's at 2 %, under the threshold.
		beat := func() []agentapi.Command {
			t.Helper()
			var hb []agentapi.TaskHeartbeat
			for id, at := range attempts {
				hb = append(hb, agentapi.TaskHeartbeat{TaskID: id, Attempt: at})
			}
			resp, err := b.Svc.Heartbeat(wctx, agentapi.HeartbeatRequest{WorkerID: reg.WorkerID, Tasks: hb})
			platformtest.Must(t, err)
			for id, v := range map[string]float64{busy.Task.ID: 80, idle.Task.ID: 2} {
				err := b.Svc.AppendMetrics(wctx, id, agentapi.MetricsRequest{Attempt: attempts[id],
					Points: []agentapi.MetricPoint{{At: b.Clock.Now(), Name: "gpu.utilization", Value: v}}})
				if err != nil && !strings.Contains(err.Error(), "ended") {
					t.Fatalf("metrics of %s: %v", id, err)
				}
			}
			return resp.Commands
		}
		sweepAt := func(offset time.Duration, want platform.AppSweepResult) {
			t.Helper()
			b.Clock.Set(start.Add(offset))
			beat()
			got, err := b.Svc.SweepIdle(context.Background())
			platformtest.Must(t, err)
			if got != want {
				t.Fatalf("sweep at +%s did %+v, want %+v", offset, got, want)
			}
		}
		read := func(id string) *model.AppInstance {
			t.Helper()
			in, err := b.Svc.AppInstance(ps.rita, id)
			platformtest.Must(t, err)
			return in
		}
		// The claims happened at the start.
		b.Clock.Set(start)

		sweepAt(19*time.Minute, platform.AppSweepResult{})
		sweepAt(20*time.Minute, platform.AppSweepResult{Warned: 1})
		in := read(idle.Task.ID)
		if in.Idle.WarnedAt == nil || !in.Idle.StopsAt.Equal(start.Add(30*time.Minute)) || !in.Idle.IdleSince.Equal(start) ||
			!strings.HasPrefix(in.Idle.StopReason, "stopped: idle for 30 minutes") {
			t.Fatalf("the warned instance's idle state %+v", in.Idle)
		}
		// Its GPU was busy just now: it would be idle for 30 minutes from now.
		if w := read(busy.Task.ID).Idle; w.WarnedAt != nil || !w.IdleSince.Equal(start.Add(20*time.Minute)) || !w.StopsAt.Equal(start.Add(50*time.Minute)) {
			t.Fatalf("the busy instance's idle state %+v: its GPU use should keep it from idling", w)
		}
		if rt := read(busy.Task.ID).Runtime; rt.GPUUtilization == nil || *rt.GPUUtilization != 80 || rt.Uptime != 20*time.Minute || rt.LastActivity == nil {
			t.Fatalf("the busy instance's runtime %+v", rt)
		}
		warning := b.AuditLog(t)[0]
		if warning.Action != "app.idle_warning" || warning.ObjectID != idle.Task.ID || warning.ActorName != "idle limits" ||
			!strings.Contains(warning.Detail, "will be idle for 30 minutes") || !strings.Contains(warning.Detail, "2026-03-02T09:30:00Z") {
			t.Fatalf("the warning's audit entry %+v", warning)
		}
		sweepAt(21*time.Minute, platform.AppSweepResult{}) // warned once

		t.Log("traffic starts the countdown again and takes the warning back")
		b.Clock.Set(start.Add(22 * time.Minute))
		platformtest.Must(t, b.Svc.NoteAppActivity(context.Background(), idle.Task.ID, b.Clock.Now()))
		sweepAt(22*time.Minute, platform.AppSweepResult{Cleared: 1})
		if in := read(idle.Task.ID); in.Idle.WarnedAt != nil || !in.Idle.StopsAt.Equal(start.Add(52*time.Minute)) {
			t.Fatalf("after traffic the idle state is %+v", in.Idle)
		}
		sweepAt(41*time.Minute, platform.AppSweepResult{})
		sweepAt(42*time.Minute, platform.AppSweepResult{Warned: 1})
		sweepAt(50*time.Minute, platform.AppSweepResult{Warned: 1}) // the busy one, an hour after its start
		sweepAt(51*time.Minute, platform.AppSweepResult{})

		t.Log("the idle one is stopped with its reason, the busy one at its maximum lifetime")
		sweepAt(52*time.Minute, platform.AppSweepResult{Stopped: 1})
		in = read(idle.Task.ID)
		if in.State != "stopped" || in.Task.Reason != "stopped: idle for 30 minutes (no traffic, GPU under 5 %, CPU under 5 %)" {
			t.Fatalf("the idle instance: %s %q", in.State, in.Task.Reason)
		}
		sweepAt(59*time.Minute, platform.AppSweepResult{})
		sweepAt(60*time.Minute, platform.AppSweepResult{Stopped: 1})
		in = read(busy.Task.ID)
		if in.State != "stopped" || in.Task.Reason != "stopped: reached its maximum lifetime of 1 hour" {
			t.Fatalf("the busy instance: %s %q", in.State, in.Task.Reason)
		}
		if last := b.AuditLog(t)[0]; last.Action != "task.aborted" || last.ObjectID != busy.Task.ID || last.ActorName != "idle limits" {
			t.Fatalf("the stop's audit entry %+v", last)
		}
		// The worker is told to stop them, with the reason.
		cmds := beat()
		if len(cmds) != 2 || cmds[0].Action != agentapi.ActionStop || cmds[1].Action != agentapi.ActionStop {
			t.Fatalf("heartbeat after the stops: %+v", cmds)
		}
		sweepAt(61*time.Minute, platform.AppSweepResult{})
	}, platformtest.WithClock(start), platformtest.WithEvents())
}
