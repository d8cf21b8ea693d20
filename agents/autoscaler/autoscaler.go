package autoscaler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/model"
)

// Instance states the autoscaler reports (GraphQL Autoscaler.instances).
const (
	reportPending     = "pending"
	reportRunning     = "running"
	reportIdle        = "idle"
	reportTerminating = "terminating"
)

// Syncer is the part of the worker protocol client the autoscaler uses.
type Syncer interface {
	SyncAutoscaler(ctx context.Context, req *agentapi.AutoscalerSyncRequest) (*agentapi.AutoscalerSyncResponse, error)
}

// Config is what an Autoscaler is given.
type Config struct {
	Client   Syncer
	Provider Provider
	// Server and Token are handed to the workers instances boot: the
	// control plane's URL as instances reach it, and the pool's worker
	// credential.
	Server, Token string
	Version       string
	Log           *slog.Logger
	// Now is the clock (tests pass a fake one).
	Now func() time.Time
	// Interval overrides the sync interval the control plane asks for
	// (tests use a short one).
	Interval time.Duration
}

// tracked is an instance the autoscaler manages.
type tracked struct {
	Instance
	gpus         int
	registeredAt *time.Time
	idleSince    *time.Time
	terminating  bool
}

// Autoscaler is the daemon's state: its instances and the spot blackout.
// Step is one round of decisions; Run repeats it.
type Autoscaler struct {
	cfg       Config
	instances map[string]*tracked
	// blackoutUntil: after spot failed, on-demand is bought until then.
	blackoutUntil time.Time
	message       string
	// spotProblem is the last spot failure, shown while its blackout
	// lasts.
	spotProblem string
	waiting     []agentapi.WaitingNote
	spec        *agentapi.AutoscalerSpec
	// changed: the last round changed an instance, so the next sync comes
	// soon and the control plane's view does not lag a whole interval.
	changed bool
}

// New returns an autoscaler.
func New(cfg Config) *Autoscaler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Autoscaler{cfg: cfg, instances: map[string]*tracked{}}
}

// Run syncs and decides until ctx ends. It returns an error when the
// control plane refuses the credential or the pool has no autoscaler any
// more (after terminating the instances it started).
func (a *Autoscaler) Run(ctx context.Context) error {
	for {
		wait, err := a.Step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ce *client.Error
			if errors.As(err, &ce) && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusNotFound) {
				a.cfg.Log.Error("the control plane refused the autoscaler; terminating its instances", "err", err)
				a.terminateAll(context.WithoutCancel(ctx))
				return err
			}
			a.cfg.Log.Warn("autoscaler round failed; retrying", "err", err)
		}
		if !client.Sleep(ctx, wait) {
			return nil
		}
	}
}

func (a *Autoscaler) terminateAll(ctx context.Context) {
	var ids []string
	for id := range a.instances {
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		if err := a.cfg.Provider.Terminate(ctx, ids); err != nil {
			a.cfg.Log.Error("terminate instances", "ids", ids, "err", err)
		}
	}
}

// Step reports the last round's state to the control plane, reads what
// waits on the pool, and decides: adopt or forget instances, terminate
// those that never registered or stayed idle, and start instances for
// waiting work. It returns how long to wait before the next step.
func (a *Autoscaler) Step(ctx context.Context) (time.Duration, error) {
	resp, err := a.cfg.Client.SyncAutoscaler(ctx, a.report())
	if err != nil {
		return 5 * time.Second, fmt.Errorf("sync with the control plane: %w", err)
	}
	a.spec = &resp.Autoscaler
	wait := time.Duration(resp.SyncSeconds) * time.Second
	if a.cfg.Interval > 0 {
		wait = a.cfg.Interval
	}
	if wait <= 0 {
		wait = 15 * time.Second
	}
	a.waiting, a.message, a.changed = nil, "", false
	if err := a.decide(ctx, resp); err != nil {
		a.message = err.Error()
		return wait, err
	}
	if a.changed {
		wait = min(wait, time.Second)
	}
	return wait, nil
}

// Report is what the next sync tells the control plane: the instances,
// the message and the notes on waiting tasks of the last round.
func (a *Autoscaler) Report() *agentapi.AutoscalerSyncRequest { return a.report() }

// report is what the next sync tells the control plane.
func (a *Autoscaler) report() *agentapi.AutoscalerSyncRequest {
	req := &agentapi.AutoscalerSyncRequest{Version: a.cfg.Version, Message: a.message, Waiting: a.waiting,
		Instances: []agentapi.AutoscalerInstance{}}
	if !a.blackoutUntil.IsZero() && a.cfg.Now().Before(a.blackoutUntil) {
		t := a.blackoutUntil.UTC()
		req.SpotBlackoutUntil = &t
	}
	for _, in := range a.sorted() {
		r := agentapi.AutoscalerInstance{ID: in.ID, Worker: in.Name, Type: in.Type, GPUs: in.gpus, Market: model.MarketOnDemand,
			State: reportPending, LaunchedAt: in.LaunchedAt, RegisteredAt: in.registeredAt, IdleSince: in.idleSince}
		if in.Spot {
			r.Market = model.MarketSpot
		}
		switch {
		case in.terminating:
			r.State = reportTerminating
		case in.idleSince != nil:
			r.State = reportIdle
		case in.registeredAt != nil:
			r.State = reportRunning
		}
		req.Instances = append(req.Instances, r)
	}
	return req
}

func (a *Autoscaler) sorted() []*tracked {
	out := make([]*tracked, 0, len(a.instances))
	for _, in := range a.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LaunchedAt.Equal(out[j].LaunchedAt) {
			return out[i].LaunchedAt.Before(out[j].LaunchedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (a *Autoscaler) tags(spec *agentapi.AutoscalerSpec) map[string]string {
	return map[string]string{TagPool: spec.Pool, TagAutoscaler: spec.ID}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// gpusOf is the whole GPUs a placed task needs on one node.
func gpusOf(milli int64) int { return int((milli + 999) / 1000) }

// decide is one round of decisions on the control plane's answer.
func (a *Autoscaler) decide(ctx context.Context, resp *agentapi.AutoscalerSyncResponse) error {
	spec := &resp.Autoscaler
	now := a.cfg.Now()
	if err := a.adopt(ctx, spec); err != nil {
		return err
	}
	problems, err := a.reap(ctx, spec, resp, now)
	if err != nil {
		return err
	}
	notes, problems := a.scaleUp(ctx, spec, resp, now, problems)
	a.summarize(now, problems, notes)
	return nil
}

// adopt brings the tracked instances in line with what the provider has:
// it adopts our instances a previous run started (so a restart does not
// start their capacity twice), and forgets those that are gone.
func (a *Autoscaler) adopt(ctx context.Context, spec *agentapi.AutoscalerSpec) error {
	gpusOfType := map[string]int{}
	for _, it := range spec.InstanceTypes {
		gpusOfType[it.Name] = it.GPUs
	}
	listed, err := a.cfg.Provider.List(ctx, a.tags(spec))
	if err != nil {
		return fmt.Errorf("list instances: %w", err)
	}
	seen := map[string]bool{}
	for _, in := range listed {
		if in.State == StateGone {
			continue
		}
		seen[in.ID] = true
		if t, ok := a.instances[in.ID]; ok {
			t.Instance.State = in.State
			continue
		}
		name := in.Name
		if name == "" {
			name = in.Tags[TagWorker]
		}
		in.Name = name
		a.instances[in.ID] = &tracked{Instance: in, gpus: gpusOfType[in.Type]}
		a.changed = true
	}
	for id := range a.instances {
		if !seen[id] {
			delete(a.instances, id)
			a.changed = true
		}
	}
	return nil
}

// reap matches registered workers to instances by name, marks when each
// registered and went idle, and terminates the instances that must go: a
// spot request not fulfilled in time (which starts the spot blackout), an
// instance whose worker never registered, an instance idle too long while
// no work waits. It returns the problems to show on the autoscaler.
func (a *Autoscaler) reap(ctx context.Context, spec *agentapi.AutoscalerSpec, resp *agentapi.AutoscalerSyncResponse, now time.Time) ([]string, error) {
	workers := map[string]agentapi.PoolWorker{}
	for _, w := range resp.Workers {
		workers[w.Hostname] = w
	}
	var problems []string
	var terminate []string
	for _, in := range a.sorted() {
		if in.terminating {
			continue
		}
		if w, ok := workers[in.Name]; ok && w.Online {
			a.markRegistered(in, w, now)
		}
		switch {
		case in.registeredAt == nil && in.Spot && in.State == StatePending && spec.Market == model.MarketSpot &&
			now.Sub(in.LaunchedAt) >= seconds(spec.SpotTimeoutSeconds):
			// A spot request not fulfilled in time counts as spot refused.
			a.blackoutUntil = now.Add(seconds(spec.SpotBlackoutSeconds))
			a.spotProblem = fmt.Sprintf("spot instance %s (%s) was not fulfilled within %s: terminated; no spot requests until %s",
				in.ID, in.Type, seconds(spec.SpotTimeoutSeconds), a.blackoutUntil.UTC().Format(time.RFC3339))
			problems = append(problems, a.spotProblem)
			terminate = append(terminate, in.ID)
		case in.registeredAt == nil && now.Sub(in.LaunchedAt) >= seconds(spec.SpinUpTimeoutSeconds):
			problems = append(problems, fmt.Sprintf("instance %s (%s) did not register its worker %s within the spin-up time of %s: terminated",
				in.ID, in.Type, in.Name, seconds(spec.SpinUpTimeoutSeconds)))
			terminate = append(terminate, in.ID)
		case in.idleSince != nil && now.Sub(*in.idleSince) >= seconds(spec.IdleTimeoutSeconds) && len(resp.Placed) == 0:
			a.cfg.Log.Info("removing an idle instance", "instance", in.ID, "worker", in.Name, "idle", now.Sub(*in.idleSince))
			terminate = append(terminate, in.ID)
		}
	}
	if len(terminate) > 0 {
		if err := a.cfg.Provider.Terminate(ctx, terminate); err != nil {
			return nil, fmt.Errorf("terminate %s: %w", strings.Join(terminate, ", "), err)
		}
		for _, id := range terminate {
			a.instances[id].terminating = true
			a.changed = true
		}
	}
	return problems, nil
}

// markRegistered records, for an instance whose worker is online, when it
// registered (ending its spin-up time) and since when it has run nothing
// (starting its idle time), or that it runs something again.
func (a *Autoscaler) markRegistered(in *tracked, w agentapi.PoolWorker, now time.Time) {
	if in.registeredAt == nil {
		t := now
		in.registeredAt = &t
		a.changed = true
	}
	if w.RunningTasks == 0 {
		if in.idleSince == nil {
			t := now
			in.idleSince = &t
			a.changed = true
		}
	} else if in.idleSince != nil {
		in.idleSince = nil
		a.changed = true
	}
}

// scaleUp starts instances for the placed tasks that no capacity on its
// way or free can take: instances whose worker has not registered yet, and
// free GPUs of registered workers. It returns, by reason, the tasks that
// wait, and the problems with those of starting added.
func (a *Autoscaler) scaleUp(ctx context.Context, spec *agentapi.AutoscalerSpec, resp *agentapi.AutoscalerSyncResponse, now time.Time, problems []string) (map[string][]string, []string) {
	var free []int
	active := 0
	for _, in := range a.sorted() {
		if in.terminating {
			continue
		}
		active++
		if in.registeredAt == nil {
			free = append(free, in.gpus)
		}
	}
	for _, w := range resp.Workers {
		if w.Online {
			free = append(free, w.GPUs-gpusOf(w.RunningMilliGPUs))
		}
	}
	fits := func(n int) bool {
		for i := range free {
			if free[i] >= n {
				free[i] -= n
				return true
			}
		}
		return false
	}
	notes := map[string][]string{}
	for _, t := range resp.Placed {
		n := gpusOf(t.MilliGPUsPerNode)
		if t.Nodes > 1 {
			notes["multi-node work does not run on autoscaled workers; move it to a pool of a multi-node environment"] =
				append(notes["multi-node work does not run on autoscaled workers; move it to a pool of a multi-node environment"], t.TaskID)
			continue
		}
		if fits(n) {
			continue
		}
		it, ok := pickType(spec.InstanceTypes, n)
		if !ok {
			r := fmt.Sprintf("no instance type of autoscaler %s has %d GPUs", spec.Name, n)
			notes[r] = append(notes[r], t.TaskID)
			continue
		}
		if active >= spec.MaxInstances {
			r := fmt.Sprintf("autoscaler %s is at its maximum of %d instances; the task starts when one frees", spec.Name, spec.MaxInstances)
			notes[r] = append(notes[r], t.TaskID)
			continue
		}
		in, problem := a.start(ctx, spec, it, now)
		if problem != "" {
			problems = append(problems, problem)
		}
		if in == nil {
			notes[problem] = append(notes[problem], t.TaskID)
			continue
		}
		active++
		free = append(free, it.GPUs-n)
	}
	return notes, problems
}

// summarize sets the autoscaler's message and waiting notes for the control
// plane: the problems, the spot failure while its blackout lasts, and the
// waiting tasks by reason, in a stable order.
func (a *Autoscaler) summarize(now time.Time, problems []string, notes map[string][]string) {
	if now.Before(a.blackoutUntil) && len(problems) == 0 {
		// The spot failure stays visible while its blackout lasts.
		problems = append(problems, a.spotProblem)
	}
	reasons := make([]string, 0, len(notes))
	for r := range notes {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		a.waiting = append(a.waiting, agentapi.WaitingNote{Reason: r, TaskIDs: notes[r]})
		problems = append(problems, fmt.Sprintf("%d task(s) wait: %s", len(notes[r]), r))
	}
	a.message = strings.Join(problems, "; ")
	if len(a.message) > 4000 {
		a.message = a.message[:4000] + "…"
	}
}

// pickType is the smallest instance type with at least n GPUs (the first
// listed among equals).
func pickType(types []agentapi.InstanceType, n int) (agentapi.InstanceType, bool) {
	best, ok := agentapi.InstanceType{}, false
	for _, it := range types {
		if it.GPUs >= n && (!ok || it.GPUs < best.GPUs) {
			best, ok = it, true
		}
	}
	return best, ok
}

// start launches one instance of type it: spot first when the market is
// spot and no blackout holds, on-demand when spot is refused (then no spot
// requests until the blackout ends) or not allowed. It returns the
// instance (nil when none started) and a problem to report.
func (a *Autoscaler) start(ctx context.Context, spec *agentapi.AutoscalerSpec, it agentapi.InstanceType, now time.Time) (*tracked, string) {
	name := spec.Name + "-" + randomSuffix()
	is := InstanceSpec{Name: name, Type: it.Name, GPUs: it.GPUs, Image: spec.Image, Region: spec.Region, Settings: spec.Settings,
		Tags:   map[string]string{TagPool: spec.Pool, TagAutoscaler: spec.ID, TagWorker: name},
		Worker: WorkerBootstrap{Server: a.cfg.Server, Token: a.cfg.Token, Pool: spec.Pool, Name: name, GPUs: it.GPUs, Args: strings.Fields(spec.Settings["worker_args"])}}
	problem := ""
	spot := spec.Market == model.MarketSpot && !now.Before(a.blackoutUntil)
	if spot {
		is.Spot = true
		in, err := a.cfg.Provider.Start(ctx, is)
		if err == nil {
			return a.track(in, it, now), ""
		}
		if !errors.Is(err, ErrNoCapacity) {
			return nil, fmt.Sprintf("could not start a spot %s instance: %v", it.Name, err)
		}
		a.blackoutUntil = now.Add(seconds(spec.SpotBlackoutSeconds))
		problem = fmt.Sprintf("no spot capacity for %s (%v); no spot requests until %s", it.Name, err,
			a.blackoutUntil.UTC().Format(time.RFC3339))
		a.spotProblem = problem
		if !spec.SpotFallback {
			return nil, problem + "; on-demand fallback is off, so the task waits"
		}
	} else if spec.Market == model.MarketSpot && !spec.SpotFallback {
		return nil, fmt.Sprintf("no spot requests until %s after spot capacity failed, and on-demand fallback is off",
			a.blackoutUntil.UTC().Format(time.RFC3339))
	}
	is.Spot = false
	in, err := a.cfg.Provider.Start(ctx, is)
	if err != nil {
		if errors.Is(err, ErrNoCapacity) {
			return nil, strings.TrimPrefix(problem+"; ", "; ") + fmt.Sprintf("no on-demand capacity for %s either (%v)", it.Name, err)
		}
		return nil, strings.TrimPrefix(problem+"; ", "; ") + fmt.Sprintf("could not start an on-demand %s instance: %v", it.Name, err)
	}
	if problem != "" {
		problem += "; started on-demand instance " + in.ID + " instead"
	}
	return a.track(in, it, now), problem
}

func (a *Autoscaler) track(in Instance, it agentapi.InstanceType, now time.Time) *tracked {
	if in.LaunchedAt.IsZero() {
		in.LaunchedAt = now
	}
	t := &tracked{Instance: in, gpus: it.GPUs}
	a.instances[in.ID] = t
	a.changed = true
	a.cfg.Log.Info("started an instance", "instance", in.ID, "type", it.Name, "spot", in.Spot, "worker", in.Name)
	return t
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
