package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/runenv"
	"github.com/klique-ai/klique/internal/store"
)

// Cloud autoscalers (docs/estates.md): an admin stores one per cloud pool;
// `klique autoscaler` runs it with a worker credential of that pool. The
// engine places work on the pool's declared capacity whether or not a
// worker is there (scale from zero); the daemon sees that work waiting in
// the pool's hidden queue and starts instances whose workers claim it.

// AutoscalerInput is what an admin sets on an autoscaler. Zero durations
// take the defaults below.
type AutoscalerInput struct {
	Name              string
	Pool              string
	Provider          string
	Region            string
	InstanceTypes     []model.InstanceType
	MaxInstances      int
	IdleTimeout       time.Duration
	SpinUpTimeout     time.Duration
	Market            string
	SpotFallback      bool
	SpotTimeout       time.Duration
	SpotBlackout      time.Duration
	Image             string
	Settings          map[string]string
	CredentialSecrets []string
}

// Autoscaler defaults and bounds.
const (
	DefaultIdleTimeout   = 10 * time.Minute
	DefaultSpinUpTimeout = 15 * time.Minute
	DefaultSpotTimeout   = 2 * time.Minute
	DefaultSpotBlackout  = 30 * time.Minute
	MaxInstanceTypes     = 16
	MaxAutoscalerSize    = 1000
	minAutoscalerTimeout = time.Second
)

// awsSettings are the provider settings an AWS autoscaler accepts: none of
// them is a secret (credentials come from the vault).
var awsSettings = []string{"subnet_id", "security_group_ids", "iam_instance_profile", "key_name", "worker_args"}

// localSettings are the local provider's: extra arguments for the worker
// processes it starts.
var localSettings = []string{"worker_args"}

// AutoscalerView is an autoscaler as admins read it.
type AutoscalerView struct {
	*model.Autoscaler
	PoolName string
	// Online is false when its daemon has not reported for longer than a
	// worker lease (or never has): no instances start meanwhile.
	Online bool
}

func (s *Fleet) autoscalerView(a *model.Autoscaler, e *estate.Estate) *AutoscalerView {
	v := &AutoscalerView{Autoscaler: a, Online: a.LastHeartbeatAt != nil && s.k.Now().Sub(*a.LastHeartbeatAt) <= s.agent.Lease}
	if e != nil {
		if p := e.Pool(a.PoolID); p != nil {
			v.PoolName = p.Name
		}
	}
	if !v.Online {
		switch {
		case a.LastHeartbeatAt == nil:
			v.Status.Message = "the autoscaler daemon has never reported: start `klique autoscaler` with a worker credential of the pool"
		default:
			v.Status.Message = fmt.Sprintf("the autoscaler daemon is down: no report since %s, so no new instances start until it is back",
				a.LastHeartbeatAt.Format(time.RFC3339))
		}
	}
	return v
}

// checkAutoscaler validates an input against the pool it names and turns
// it into a spec, with defaults applied. Every problem is reported with
// what to change.
func (s *Fleet) checkAutoscaler(ctx context.Context, p *identity.Principal, e *estate.Estate, in AutoscalerInput) (*model.Pool, model.AutoscalerSpec, error) {
	var spec model.AutoscalerSpec
	if err := basis.CheckName(in.Name); err != nil {
		return nil, spec, kernel.Invalid("autoscaler %v", err)
	}
	pool, err := kernel.FindPool(e, in.Pool)
	if err != nil {
		return nil, spec, err
	}
	if pool.Kind != model.PoolCloud && pool.Kind != model.PoolNeocloud {
		return nil, spec, kernel.Invalid("pool %s is a %s pool: autoscalers serve cloud and neocloud pools; give a pool of kind cloud", pool.Name, pool.Kind)
	}
	spec = model.AutoscalerSpec{Provider: in.Provider, Region: strings.TrimSpace(in.Region), MaxInstances: in.MaxInstances,
		IdleTimeout: in.IdleTimeout, SpinUpTimeout: in.SpinUpTimeout, Market: in.Market, SpotFallback: in.SpotFallback,
		SpotTimeout: in.SpotTimeout, SpotBlackout: in.SpotBlackout, Image: strings.TrimSpace(in.Image)}
	allowed := localSettings
	switch in.Provider {
	case model.ProviderAWS:
		allowed = awsSettings
		if spec.Region == "" {
			return nil, spec, kernel.Invalid("an aws autoscaler needs a region, such as eu-west-1")
		}
		if !strings.HasPrefix(spec.Image, "ami-") {
			return nil, spec, kernel.Invalid("an aws autoscaler needs image: the AMI id (ami-…) its instances boot, with klique installed")
		}
	case model.ProviderLocal:
	default:
		return nil, spec, kernel.Invalid("provider %q is not known: use aws, or local (worker processes on the autoscaler's own machine)", in.Provider)
	}
	if len(in.InstanceTypes) == 0 || len(in.InstanceTypes) > MaxInstanceTypes {
		return nil, spec, kernel.Invalid("give 1 to %d instance types, each with its GPUs (g5.xlarge: 1)", MaxInstanceTypes)
	}
	seen := map[string]bool{}
	for _, it := range in.InstanceTypes {
		name := strings.TrimSpace(it.Name)
		if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\n") {
			return nil, spec, kernel.Invalid("instance type %q: a name of 1 to 64 characters without spaces", it.Name)
		}
		if seen[name] {
			return nil, spec, kernel.Invalid("instance type %s is listed twice", name)
		}
		seen[name] = true
		if it.GPUs < 1 || it.GPUs > 64 {
			return nil, spec, kernel.Invalid("instance type %s: gpus must be 1 to 64, the GPUs one instance brings", name)
		}
		spec.InstanceTypes = append(spec.InstanceTypes, model.InstanceType{Name: name, GPUs: it.GPUs})
	}
	if in.MaxInstances < 1 || in.MaxInstances > MaxAutoscalerSize {
		return nil, spec, kernel.Invalid("maxInstances must be 1 to %d", MaxAutoscalerSize)
	}
	// The engine places work on the pool's declared capacity, so the
	// autoscaler must be able to bring all of it: otherwise work would be
	// placed that no instance can ever run.
	if most := in.MaxInstances * spec.MaxGPUsPerInstance(); pool.CapacityGPUs > most {
		return nil, spec, kernel.Invalid("pool %s declares %d GPUs but this autoscaler brings at most %d (%d instances × %d GPUs): raise maxInstances or lower the pool's capacity to %d",
			pool.Name, pool.CapacityGPUs, most, in.MaxInstances, spec.MaxGPUsPerInstance(), most)
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"idleTimeout", &spec.IdleTimeout, DefaultIdleTimeout}, {"spinUpTimeout", &spec.SpinUpTimeout, DefaultSpinUpTimeout},
		{"spotTimeout", &spec.SpotTimeout, DefaultSpotTimeout}, {"spotBlackout", &spec.SpotBlackout, DefaultSpotBlackout},
	}
	for _, d := range durations {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < minAutoscalerTimeout || *d.v > 7*24*time.Hour {
			return nil, spec, kernel.Invalid("%s must be between 1 second and 7 days (it is %s)", d.name, *d.v)
		}
	}
	switch spec.Market {
	case "":
		spec.Market = model.MarketSpot
	case model.MarketSpot, model.MarketOnDemand:
	default:
		return nil, spec, kernel.Invalid("market %q is not known: use spot (with on-demand fallback) or on_demand", in.Market)
	}
	for k, v := range in.Settings {
		if !slices.Contains(allowed, k) {
			return nil, spec, kernel.Invalid("setting %q is not known to the %s provider: use %s (credentials go in the vault, named by credentialSecrets)",
				k, in.Provider, strings.Join(allowed, ", "))
		}
		if len(v) > 1024 {
			return nil, spec, kernel.Invalid("setting %s is longer than 1024 bytes", k)
		}
		if spec.Settings == nil {
			spec.Settings = map[string]string{}
		}
		spec.Settings[k] = v
	}
	for _, name := range in.CredentialSecrets {
		if !runenv.ValidName(name) {
			return nil, spec, kernel.Invalid("credential secret %q: a vault secret name (letters, digits and '_')", name)
		}
		if slices.Contains(spec.CredentialSecrets, name) {
			return nil, spec, kernel.Invalid("credential secret %s is listed twice", name)
		}
		if _, err := s.k.Store.GetSecret(ctx, p.TenantID, model.ScopeTenant, p.TenantID, name); errors.Is(err, store.ErrNotFound) {
			return nil, spec, kernel.Invalid("credential secret %s is not in the tenant's vault: set it first with setSecret(scope: TENANT, name: %q, value: …)", name, name)
		} else if err != nil {
			return nil, spec, err
		}
		spec.CredentialSecrets = append(spec.CredentialSecrets, name)
	}
	return pool, spec, nil
}

// checkedAutoscaler is an autoscaler input checked against the estate.
type checkedAutoscaler struct {
	e    *estate.Estate
	pool *model.Pool
	spec model.AutoscalerSpec
}

// autoscalerInput checks that the input is an autoscaler for one of the
// tenant's cloud pools, for a create or an update by an admin p.
func (s *Fleet) autoscalerInput(ctx context.Context, p *identity.Principal, in AutoscalerInput) (c checkedAutoscaler, err error) {
	if c.e, err = s.k.Estate(ctx); err != nil {
		return c, err
	}
	c.pool, c.spec, err = s.checkAutoscaler(ctx, p, c.e, in)
	return c, err
}

// CreateAutoscaler stores an autoscaler for a cloud pool (admins). A pool
// has at most one.
func (s *Fleet) CreateAutoscaler(ctx context.Context, in AutoscalerInput) (*AutoscalerView, error) {
	var c checkedAutoscaler
	a, err := kernel.Run(ctx, s.k, kernel.Op[*model.Autoscaler]{
		Name: "createAutoscaler", Right: kernel.RightAdmin, What: "create autoscalers",
		Prepare: func(p *identity.Principal) (err error) { c, err = s.autoscalerInput(ctx, p, in); return err },
		Body: func(t *kernel.Txn) (*model.Autoscaler, kernel.Audit, error) {
			a := &model.Autoscaler{TenantID: t.P.TenantID, PoolID: c.pool.ID, Name: in.Name, Spec: c.spec, CreatedBy: t.P.UserName,
				CreatedAt: t.Now, UpdatedAt: t.Now}
			if err := t.Q.CreateAutoscaler(ctx, a); errors.Is(err, store.ErrConflict) {
				return nil, kernel.Audit{}, kernel.Conflict("pool %s already has an autoscaler, or the name %s is taken: update that one instead", c.pool.Name, in.Name)
			} else if err != nil {
				return nil, kernel.Audit{}, err
			}
			return a, autoscalerAudit("autoscaler.created", a, c.pool), nil
		},
	})
	if err != nil {
		return nil, err
	}
	return s.autoscalerView(a, c.e), nil
}

// autoscalerAudit is the audit entry of an autoscaler created or changed.
func autoscalerAudit(action string, a *model.Autoscaler, pool *model.Pool) kernel.Audit {
	return kernel.Audit{Action: action, Kind: "autoscaler", ID: a.ID, Name: a.Name, Detail: describeAutoscaler(a.Spec, pool.Name)}
}

func describeAutoscaler(spec model.AutoscalerSpec, pool string) string {
	types := make([]string, 0, len(spec.InstanceTypes))
	for _, it := range spec.InstanceTypes {
		types = append(types, fmt.Sprintf("%s (%d GPUs)", it.Name, it.GPUs))
	}
	return fmt.Sprintf("%s autoscaler for pool %s: up to %d instances of %s, %s market", spec.Provider, pool, spec.MaxInstances,
		strings.Join(types, ", "), spec.Market)
}

// UpdateAutoscaler replaces an autoscaler's settings (admins). Its pool
// cannot change.
func (s *Fleet) UpdateAutoscaler(ctx context.Context, id string, in AutoscalerInput) (*AutoscalerView, error) {
	var c checkedAutoscaler
	a, err := kernel.Run(ctx, s.k, kernel.Op[*model.Autoscaler]{
		Name: "updateAutoscaler", Right: kernel.RightAdmin, What: "change autoscalers",
		Prepare: func(p *identity.Principal) (err error) { c, err = s.autoscalerInput(ctx, p, in); return err },
		Body: func(t *kernel.Txn) (*model.Autoscaler, kernel.Audit, error) {
			a, err := s.autoscalerOf(t, id)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if a.PoolID != c.pool.ID {
				return nil, kernel.Audit{}, kernel.Invalid("an autoscaler's pool cannot change: delete autoscaler %s and create one for pool %s", a.Name, c.pool.Name)
			}
			a.Name, a.Spec, a.UpdatedAt = in.Name, c.spec, t.Now
			if err := t.Q.UpdateAutoscaler(ctx, a); errors.Is(err, store.ErrConflict) {
				return nil, kernel.Audit{}, kernel.Conflict("the name %s is taken by another autoscaler", in.Name)
			} else if err != nil {
				return nil, kernel.Audit{}, err
			}
			return a, autoscalerAudit("autoscaler.updated", a, c.pool), nil
		},
	})
	if err != nil {
		return nil, err
	}
	return s.autoscalerView(a, c.e), nil
}

// autoscalerOf reads an autoscaler of the tenant of t's caller.
func (s *Fleet) autoscalerOf(t *kernel.Txn, id string) (*model.Autoscaler, error) {
	a, err := t.Q.GetAutoscaler(t.Ctx, t.P.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.NotFound("no autoscaler %s", kernel.Quote(id))
	}
	return a, err
}

// DeleteAutoscaler removes an autoscaler (admins). Its daemon is refused
// from its next sync and starts nothing more; instances it started are
// its daemon's to stop (it terminates them when it is refused).
func (s *Fleet) DeleteAutoscaler(ctx context.Context, id string) error {
	_, err := kernel.Run(ctx, s.k, kernel.Op[struct{}]{
		Name: "deleteAutoscaler", Right: kernel.RightAdmin, What: "delete autoscalers",
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			a, err := s.autoscalerOf(t, id)
			if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			if err := t.Q.DeleteAutoscaler(ctx, t.P.TenantID, id); err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			return struct{}{}, kernel.Audit{Action: "autoscaler.deleted", Kind: "autoscaler", ID: a.ID, Name: a.Name,
				Detail: "deleted autoscaler " + a.Name}, nil
		},
	})
	return err
}

// Autoscalers lists the tenant's autoscalers with their instances and
// state (admins).
func (s *Fleet) Autoscalers(ctx context.Context) ([]*AutoscalerView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "list autoscalers"); err != nil {
		return nil, err
	}
	list, err := s.k.Store.ListAutoscalers(ctx, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*AutoscalerView, 0, len(list))
	for _, a := range list {
		out = append(out, s.autoscalerView(a, e))
	}
	return out, nil
}

// PoolAutoscaler returns the autoscaler of a pool of the caller's tenant:
// for admins, nil for everyone else and for pools without one.
func (s *Fleet) PoolAutoscaler(ctx context.Context, poolID string) (*AutoscalerView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if !p.IsAdmin() {
		return nil, nil
	}
	a, err := s.k.Store.GetAutoscalerByPool(ctx, p.TenantID, poolID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return s.autoscalerView(a, e), nil
}

// myAutoscaler is the autoscaler of the worker credential's pool. Only the
// worker credential itself may act as the pool's autoscaler: a task
// credential, held by the user code of a job, must not read the cloud
// credentials or rewrite the autoscaler's state.
func (s *Fleet) myAutoscaler(ctx context.Context, w *identity.Worker) (*model.Autoscaler, error) {
	if err := notTaskScoped(ctx, "the autoscaler's sync and credentials"); err != nil {
		return nil, err
	}
	a, err := s.k.Store.GetAutoscalerByPool(ctx, w.TenantID, w.PoolID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.NotFound("pool %s has no autoscaler: an admin creates one with createAutoscaler(input: {pool: %q, …})", w.PoolName, w.PoolName)
	}
	return a, s.k.Internal(ctx, err)
}

// SyncAutoscaler is the autoscaler daemon's heartbeat: it stores the
// daemon's instances and message, notes on the placed tasks why they still
// have no node, and returns the autoscaler's settings with the pool's
// hidden queue (placed, unclaimed work) and workers.
func (s *Fleet) SyncAutoscaler(ctx context.Context, req agentapi.AutoscalerSyncRequest) (*agentapi.AutoscalerSyncResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	if len(req.Instances) > agentapi.MaxAutoscalerInstances || len(req.Message) > 4096 || len(req.Waiting) > 100 {
		return nil, kernel.Invalid("a sync reports at most %d instances, 100 waiting notes and a message of at most 4096 bytes", agentapi.MaxAutoscalerInstances)
	}
	a, err := s.myAutoscaler(ctx, w)
	if err != nil {
		return nil, err
	}
	st := model.AutoscalerStatus{Message: req.Message, SpotBlackoutUntil: req.SpotBlackoutUntil, Version: req.Version,
		Instances: make([]model.AutoscalerInstance, 0, len(req.Instances))}
	for _, in := range req.Instances {
		if in.ID == "" || len(in.ID) > 128 || len(in.Worker) > 253 || len(in.Type) > 64 || len(in.State) > 32 {
			return nil, kernel.Invalid("instance %q: an id of 1 to 128 bytes, a worker name, type and state of reasonable length", in.ID)
		}
		st.Instances = append(st.Instances, in)
	}
	now := s.k.Now()
	if err := s.k.Store.ReportAutoscaler(ctx, w.TenantID, a.ID, st, now); err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	if req.Message != a.Status.Message && req.Message != "" {
		// A new problem (or a new kind of it) goes to the audit trail
		// once, not at every sync.
		if err := s.recordAsWorker(ctx, w, "autoscaler "+a.Name, kernel.Audit{Action: "autoscaler.reported", Kind: "autoscaler",
			ID: a.ID, Name: a.Name, Detail: req.Message}); err != nil {
			return nil, err
		}
	}
	for _, note := range req.Waiting {
		reason := strings.TrimSpace(note.Reason)
		if reason == "" || len(reason) > 1024 || len(note.TaskIDs) > 1000 {
			return nil, kernel.Invalid("a waiting note needs a reason of at most 1024 bytes and at most 1000 tasks")
		}
		reason = "placed on pool " + w.PoolName + "; waiting for a node: " + reason
		if _, err := s.k.Store.SetPlacedReason(ctx, w.TenantID, w.PoolID, note.TaskIDs, reason); err != nil {
			return nil, s.k.Internal(ctx, err)
		}
	}
	return s.autoscalerState(ctx, w, a, now)
}

func (s *Fleet) autoscalerState(ctx context.Context, w *identity.Worker, a *model.Autoscaler, now time.Time) (*agentapi.AutoscalerSyncResponse, error) {
	tasks, err := s.k.Store.ListTasks(ctx, w.TenantID, store.TaskFilter{PoolID: w.PoolID,
		Statuses: []model.TaskStatus{model.TaskPlaced, model.TaskRunning}}, model.Page{}, false)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	resp := &agentapi.AutoscalerSyncResponse{Autoscaler: autoscalerSpec(a, w.PoolName), Placed: []agentapi.PlacedTask{},
		Workers: []agentapi.PoolWorker{}, SyncSeconds: int(s.agent.Heartbeat / time.Second)}
	running := map[string]*agentapi.PoolWorker{}
	workers, err := s.k.Store.ListWorkers(ctx, w.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	for _, wk := range workers {
		if wk.PoolID != w.PoolID {
			continue
		}
		resp.Workers = append(resp.Workers, agentapi.PoolWorker{ID: wk.ID, Hostname: wk.Hostname, GPUs: len(wk.GPUs),
			LastHeartbeatAt: wk.LastHeartbeatAt, Online: now.Sub(wk.LastHeartbeatAt) <= s.agent.Lease})
	}
	for i := range resp.Workers {
		running[resp.Workers[i].ID] = &resp.Workers[i]
	}
	for _, t := range tasks {
		switch t.Status {
		case model.TaskPlaced:
			pt := agentapi.PlacedTask{TaskID: t.ID, MilliGPUsPerNode: int64(t.Size.PerNode), Nodes: t.Size.Nodes}
			if t.PlacedAt != nil {
				pt.PlacedAt = *t.PlacedAt
			}
			resp.Placed = append(resp.Placed, pt)
		case model.TaskRunning:
			if pw := running[t.Run.WorkerID]; pw != nil {
				pw.RunningTasks++
				pw.RunningMilliGPUs += int64(t.Size.PerNode) * int64(max(t.Size.Nodes, 1))
			}
		}
	}
	sort.Slice(resp.Placed, func(i, j int) bool { return resp.Placed[i].PlacedAt.Before(resp.Placed[j].PlacedAt) })
	return resp, nil
}

func autoscalerSpec(a *model.Autoscaler, pool string) agentapi.AutoscalerSpec {
	sp := a.Spec
	out := agentapi.AutoscalerSpec{ID: a.ID, Name: a.Name, Pool: pool, Provider: sp.Provider, Region: sp.Region,
		MaxInstances: sp.MaxInstances, IdleTimeoutSeconds: int(sp.IdleTimeout / time.Second),
		SpinUpTimeoutSeconds: int(sp.SpinUpTimeout / time.Second), Market: sp.Market, SpotFallback: sp.SpotFallback,
		SpotTimeoutSeconds: int(sp.SpotTimeout / time.Second), SpotBlackoutSeconds: int(sp.SpotBlackout / time.Second),
		Image: sp.Image, Settings: sp.Settings, CredentialSecrets: sp.CredentialSecrets}
	for _, it := range sp.InstanceTypes {
		out.InstanceTypes = append(out.InstanceTypes, agentapi.InstanceType{Name: it.Name, GPUs: it.GPUs})
	}
	return out
}

// AutoscalerCredentials opens the provider credentials the pool's
// autoscaler names, from the tenant's vault, for its daemon. Besides a
// running task's worker, this is the only way a secret's value leaves the
// platform; every read is audited.
func (s *Fleet) AutoscalerCredentials(ctx context.Context) (*agentapi.AutoscalerCredentialsResponse, error) {
	w, err := workerFrom(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.myAutoscaler(ctx, w)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range a.Spec.CredentialSecrets {
		sec, err := s.k.Store.GetSecret(ctx, w.TenantID, model.ScopeTenant, w.TenantID, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, kernel.Conflict("credential secret %s of autoscaler %s is no longer in the tenant's vault: set it again", name, a.Name)
		}
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if s.k.Vault == nil {
			return nil, kernel.NewError(kernel.CodeInternal, "this server has no vault key configured; set KLIQUE_VAULT_KEY")
		}
		v, err := s.k.Vault.Open(sec.Ciphertext, kernel.SecretContext(sec.TenantID, sec.Scope, sec.ScopeID, sec.Name))
		if err != nil {
			return nil, s.k.Internal(ctx, fmt.Errorf("open secret %s: %w", name, err))
		}
		out[name] = string(v)
	}
	if err := s.recordAsWorker(ctx, w, "autoscaler "+a.Name, kernel.Audit{Action: "autoscaler.credentials_read", Kind: "autoscaler",
		ID: a.ID, Name: a.Name, Detail: fmt.Sprintf("the daemon of autoscaler %s read its provider credentials (%s)", a.Name, strings.Join(a.Spec.CredentialSecrets, ", "))}); err != nil {
		return nil, err
	}
	return &agentapi.AutoscalerCredentialsResponse{Secrets: out}, nil
}
