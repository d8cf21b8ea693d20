package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/gctune"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/tunnel"
	"github.com/klique-ai/klique/internal/vault"
)

// App is a running control plane: store, platform service and HTTP server.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	Store   store.Store
	Service *platform.Service
	// controllers are the periodic passes' view of Service (platform.go).
	controllers Controllers
	Events      *events.Bus
	Handler     *Handler
	// Engine is the compute policy engine's loop, nil when this replica
	// does not run it.
	Engine   *loop.Loop
	server   *http.Server
	listener net.Listener
	served   chan error
	stop     context.CancelFunc
	stopped  chan struct{}
	debug    *http.Server
	// metricsSrv serves /metrics on KLIQUE_METRICS_LISTEN, metricsURL is
	// its address.
	metricsSrv *http.Server
	metricsURL string
	// Gateway serves /v1; gatewaySrv is its own listener when configured,
	// gatewayURL its address.
	gateway      *gateway.Gateway
	gatewaySrv   *http.Server
	gatewayURL   string
	closeLimiter func()
	// Reach opens connections to app instances (the gateway's route
	// endpoints); stopServing stops the serving index's follower.
	Reach       *appnet.Auto
	stopServing context.CancelFunc
	// AppActivity notes the traffic this replica carries to app instances
	// (its router and gateway), for the idle limits; stopIdle ends their
	// jobs (idle.go).
	AppActivity *appnet.Activity
	stopIdle    context.CancelFunc
	// stopPipelines ends the pipeline controller (pipelines.go).
	stopPipelines context.CancelFunc
	// stopStudies ends the studies controller (studies.go).
	stopStudies context.CancelFunc
	// stopSchedules ends the schedules pass (schedules.go).
	stopSchedules context.CancelFunc
	// Tunnels are the workers' tunnels to this replica, through which
	// app instances on sites with no inbound path are reached.
	Tunnels *tunnel.Registry
	// own are this replica's listeners, which no app instance's address
	// may be (the router's address rule).
	own *appnet.Own
}

// startDebug serves the Go profiler on KLIQUE_DEBUG_LISTEN, apart from the
// API: it has no authentication, so it is off unless asked for.
func (a *App) startDebug(cfg *config.Config) error {
	if cfg.DebugListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.DebugListen)
	if err != nil {
		return fmt.Errorf("listen on KLIQUE_DEBUG_LISTEN=%s: %w", cfg.DebugListen, err)
	}
	a.own.Add(ln.Addr().String())
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a.debug = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.debug.Serve(ln) }()
	a.log.Warn("serving the Go profiler without authentication; keep it on loopback", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}

// startMetrics serves /metrics on KLIQUE_METRICS_LISTEN without
// authentication, apart from the API, for a scraper on a private network.
func (a *App) startMetrics(cfg *config.Config) error {
	if cfg.MetricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen on KLIQUE_METRICS_LISTEN=%s: %w", cfg.MetricsListen, err)
	}
	a.own.Add(ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.Handler.MetricsHandler())
	a.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.metricsURL = "http://" + ln.Addr().String()
	go func() { _ = a.metricsSrv.Serve(ln) }()
	a.log.Info("serving metrics without authentication on their own address; keep it where only the scraper reaches it", "url", a.metricsURL+"/metrics")
	return nil
}

// MetricsURL is the base URL of the separate metrics listener, "" without
// one.
func (a *App) MetricsURL() string { return a.metricsURL }

// Start opens the store (SQLite under the data directory, or PostgreSQL when
// a database URL is set), applies migrations, bootstraps an empty store, and
// starts serving HTTP. It returns once the server accepts connections.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	app, err := start(ctx, cfg, log, st)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return app, nil
}

func openStore(ctx context.Context, cfg *config.Config) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		st, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL store from KLIQUE_DATABASE_URL: %w", err)
		}
		return st, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	st, err := sqlite.Open(ctx, cfg.SQLitePath())
	if err != nil {
		return nil, fmt.Errorf("open SQLite store %s: %w", cfg.SQLitePath(), err)
	}
	return st, nil
}

func start(ctx context.Context, cfg *config.Config, log *slog.Logger, st store.Store) (*App, error) {
	v, err := openVault(cfg, log)
	if err != nil {
		return nil, err
	}
	// The signing keys are sealed by the vault key: reading the settings
	// table is not enough to mint tokens.
	signer, err := identity.LoadOrCreateSigner(ctx, st, v, cfg.PublicURL, "klique", cfg.TokenTTL)
	if err != nil {
		return nil, fmt.Errorf("load token signing key: %w", err)
	}
	var oidc *identity.OIDCVerifier
	if cfg.OIDCIssuer != "" {
		oidc, err = identity.NewOIDCVerifier(identity.OIDCConfig{
			Issuer: cfg.OIDCIssuer, JWKSURL: cfg.OIDCJWKSURL, Audience: cfg.OIDCAudience,
			GroupsClaim: cfg.OIDCGroupsClaim, UsernameClaim: cfg.OIDCUsernameClaim, Tenant: cfg.OIDCTenant,
		}, nil)
		if err != nil {
			return nil, fmt.Errorf("KLIQUE_OIDC_*: %w", err)
		}
	}
	auth := identity.NewAuthenticator(st, signer, oidc, nil)
	bus := events.NewBus()
	heartbeat := cfg.WorkerLease / 4
	own := appnet.NewOwn()
	blobs, err := openArtifacts(ctx, cfg)
	if err != nil {
		return nil, err
	}
	hosts := appHosts(cfg, log)
	svc := platform.New(platform.Options{Store: st, Auth: auth, Events: bus, Logger: log, Vault: v,
		Agent:         platform.AgentOptions{Lease: cfg.WorkerLease, Heartbeat: heartbeat, LogLimit: cfg.TaskLogLimit, Own: own},
		Artifacts:     platform.ArtifactStorage{Blobs: blobs, MaxBytes: cfg.Artifacts.MaxBytes},
		Subscriptions: platform.SubscriptionLimits{PerConnection: cfg.SubscriptionsPerConnection, ConnectionsPerUser: cfg.SubscriptionConnectionsPerUser},
		Schedules: platform.ScheduleLimits{MinInterval: cfg.ScheduleMinInterval, PerUser: cfg.SchedulesPerUser,
			PerProject: cfg.SchedulesPerProject, RunsPerHour: cfg.TriggerRunsPerHour},
		AppHosts: hosts})

	if err := bootstrap(ctx, cfg, log, svc); err != nil {
		return nil, err
	}

	activity := appnet.NewActivity(nil)
	h := NewHandler(Deps{Platform: ServicePlatforms(svc), Auth: auth, Signer: signer, Logger: log, MaxBodyBytes: cfg.MaxBodyBytes, ReadSlots: cfg.GraphQLReadSlots, MetricsToken: cfg.MetricsToken,
		AppActivity: activity, AppOwn: own, AppHosts: hosts, PublicOrigin: publicOrigin(cfg.PublicURL)})
	h.mountMCP(cfg, log)
	h.mountWeb()
	// Reach opens connections to app instances: through the worker's
	// tunnel when it holds one to this replica, else directly to the
	// address the worker reported.
	reach := &appnet.Auto{Direct: &appnet.Direct{Own: own}, Tunnels: h.tunnels}
	gw, limiterClose, err := startGateway(cfg, log, svc, auth, h, reach)
	if err != nil {
		return nil, err
	}
	invalidateCredentialsOn(bus, auth)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (set KLIQUE_LISTEN or --listen to another address): %w", cfg.Listen, err)
	}
	own.Add(ln.Addr().String())
	closeBridge, err := bridgeEvents(ctx, cfg, log, bus)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	app := &App{own: own, cfg: cfg, log: log, Store: st, Service: svc, controllers: svc, Events: bus, Handler: h, listener: ln, served: make(chan error, 1), AppActivity: activity,
		server: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}}
	// Shutdown does not close hijacked connections: subscribers are told
	// to reconnect (to another replica, or to this one once it is back).
	app.server.RegisterOnShutdown(h.sockets.closeAll)
	// Nor tunnels: their workers dial again, here once it is back or at
	// another replica.
	app.server.RegisterOnShutdown(h.tunnels.Close)
	app.Tunnels = h.tunnels
	app.gateway, app.closeLimiter = gw, func() { limiterClose(); closeBridge() }
	app.Reach = reach
	// The serving index follows the events (the bridge carries other
	// replicas') and is rebuilt from the store every half minute.
	servingCtx, stopServing := context.WithCancel(context.Background())
	svc.FollowServing(servingCtx, 30*time.Second)
	app.stopServing = stopServing
	go func() { app.served <- app.server.Serve(ln) }()
	if err := app.startGatewayListener(cfg); err != nil {
		_ = app.server.Close()
		return nil, err
	}
	if err := app.startDebug(cfg); err != nil {
		_ = app.server.Close()
		return nil, err
	}
	if err := app.startMetrics(cfg); err != nil {
		_ = app.server.Close()
		if app.debug != nil {
			_ = app.debug.Close()
		}
		return nil, err
	}
	app.startEngine(cfg)
	app.startAppIdle(cfg.Engine)
	app.startPipelines(cfg.Engine)
	app.startStudies(cfg.Engine)
	app.startSchedules(cfg.Engine)
	app.announce(cfg, st.Driver())
	return app, nil
}

// announce logs the start line: every address the control plane serves,
// so whoever ran `make run` can open the dashboard or point a client at it
// without reading the docs. /metrics is named as it really is served: on
// its own listener, behind the metrics token, or not at all.
func (a *App) announce(cfg *config.Config, driver string) {
	base := a.URL()
	gateway := base + "/v1"
	if a.gatewayURL != "" {
		gateway += " and " + a.gatewayURL + "/v1"
	}
	var metrics []string
	if a.metricsURL != "" {
		metrics = append(metrics, a.metricsURL+"/metrics without authentication")
	}
	if cfg.MetricsToken != "" {
		metrics = append(metrics, base+"/metrics with the bearer token KLIQUE_METRICS_TOKEN")
	}
	if len(metrics) == 0 {
		metrics = append(metrics, "off (set KLIQUE_METRICS_LISTEN or KLIQUE_METRICS_TOKEN)")
	}
	a.log.Info("klique control plane serving",
		"dashboard", base+"/",
		"graphql", base+"/graphql",
		"graphiql", base+"/graphiql",
		"gateway", gateway,
		"mcp", base+"/mcp",
		"metrics", strings.Join(metrics, "; "),
		"store", driver)
}

// fallbackReseed is how often, while Redis cannot be reached, a replica
// reads its budgets' spend from the ledger again.
const fallbackReseed = 5 * time.Second

// startGateway builds the LLM gateway and mounts it under /v1. Its limits
// live in Redis when KLIQUE_REDIS_URL is set (falling back to this process
// while Redis cannot be reached), else in this process.
func startGateway(cfg *config.Config, log *slog.Logger, svc *platform.Service, auth *identity.Authenticator, h *Handler, reach appnet.Reacher) (*gateway.Gateway, func(), error) {
	metrics, err := gateway.NewMetrics(h.metrics.registry)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway metrics: %w", err)
	}
	var limiter limits.Limiter = limits.NewMemory()
	closeLimiter := func() {}
	if cfg.RedisURL != "" {
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("KLIQUE_REDIS_URL: %w", err)
		}
		limits.ClientOptions(opts)
		client := redis.NewClient(opts)
		closeLimiter = func() { _ = client.Close() }
		// While Redis is down, each replica keeps its own counts and reads
		// its budgets' spend from the ledger again every few seconds, so
		// that what the other replicas spend reaches it.
		limiter = &limits.Failover{Primary: limits.NewRedis(client, "klique:"), Fallback: limits.NewReseedingMemory(fallbackReseed),
			Log: log.With("component", "gateway"), OnChange: metrics.SetDegraded}
	}
	gw := gateway.New(gateway.Options{Service: svc, Auth: auth, Limiter: limiter, Log: log.With("component", "gateway"),
		MaxBody: cfg.MaxBodyBytes, Metrics: metrics, Apps: appDialer{serving: svc.Serving(), reach: reach}, Journal: cfg.JournalDir()})
	// Budgets read what the limiter holds, and the Models page shows which
	// route endpoints the gateway set aside: the service's one late seam,
	// as the gateway is built over it.
	svc.ConnectGateway(platform.GatewayReads{Budgets: budgetReader(limiter), SetAside: gw.SetAside})
	h.route("/v1/", "gateway", gw)
	return gw, closeLimiter, nil
}

// openVault returns the vault that seals secrets: with KLIQUE_VAULT_KEY, or
// a key kept in the data directory (made on first start).
func openVault(cfg *config.Config, log *slog.Logger) (*vault.Vault, error) {
	var key []byte
	var err error
	if cfg.VaultKey != "" {
		if key, err = vault.ParseKey(cfg.VaultKey); err != nil {
			return nil, fmt.Errorf("KLIQUE_VAULT_KEY: %w", err)
		}
	} else {
		var made bool
		if key, made, err = vault.LoadOrCreateKeyFile(cfg.VaultKeyPath()); err != nil {
			return nil, err
		}
		if made {
			abs, _ := filepath.Abs(cfg.VaultKeyPath())
			log.Info("made a vault key for secrets; keep it safe (replicas sharing a database need the same key: set KLIQUE_VAULT_KEY)", "file", abs)
		}
	}
	return vault.New(key)
}

// bootstrap creates the first tenant, admin and key in an empty store, and
// writes a generated key to the data directory with mode 0600. The log names
// the file, never the key.
func bootstrap(ctx context.Context, cfg *config.Config, log *slog.Logger, svc *platform.Service) error {
	secret, err := svc.Bootstrap(ctx, cfg.BootstrapToken)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if secret == "" {
		return nil
	}
	if cfg.BootstrapToken != "" {
		log.Info("first start: created tenant default and platform admin 'admin' with the key from KLIQUE_BOOTSTRAP_TOKEN")
		return nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	path := cfg.AdminTokenPath()
	if err := writeSecretFile(path, secret+"\n"); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	log.Info("first start: created tenant default and platform admin 'admin'; the admin API key is in "+abs, "file", abs)
	return nil
}

// writeSecretFile writes a file only its owner can read, replacing any old
// one atomically.
func writeSecretFile(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// startEngine runs the compute policy engine's loop until Shutdown, woken
// by the events after which work may be placed.
func (a *App) startEngine(cfg *config.Config) {
	a.stopped = make(chan struct{})
	if !cfg.Engine {
		close(a.stopped)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	go a.pruneIdempotencyKeys(ctx)
	a.Engine = &loop.Loop{State: platform.EngineState{Store: a.Store}, Planner: a.Service, Log: a.log.With("component", "engine"), Interval: cfg.EngineInterval,
		MaxRetries: cfg.TaskMaxRetries, Grace: cfg.WorkerLease, WorkerLease: cfg.WorkerLease}
	if err := a.Engine.Register(a.Handler.metrics.registry); err != nil {
		a.log.Warn("engine metrics not registered", "err", err)
	}
	sub := a.Events.Subscribe(1024, loop.WakeOn)
	go func() {
		for range sub.C {
			a.Engine.Wake()
		}
	}()
	go func() {
		defer close(a.stopped)
		defer sub.Close()
		if err := a.Engine.Run(ctx); err != nil {
			a.log.Error("engine stopped", "err", err)
		}
	}()
	a.log.Info("compute policy engine running", "interval", cfg.EngineInterval)
}

// URL is the base URL the server listens on.
func (a *App) URL() string { return "http://" + a.listener.Addr().String() }

// Shutdown stops accepting requests, lets those in flight finish within the
// context's deadline, and closes the store.
func (a *App) Shutdown(ctx context.Context) error {
	err := a.server.Shutdown(ctx)
	if a.gatewaySrv != nil {
		_ = a.gatewaySrv.Shutdown(ctx)
	}
	if a.metricsSrv != nil {
		_ = a.metricsSrv.Close()
	}
	if a.debug != nil {
		_ = a.debug.Close()
	}
	if a.gateway != nil {
		// Settle and record the calls answered so far.
		if gerr := a.gateway.Close(ctx); gerr != nil {
			a.log.Warn("gateway: not every call was recorded before shutdown", "err", gerr)
		}
	}
	if a.closeLimiter != nil {
		a.closeLimiter()
	}
	if a.stopServing != nil {
		a.stopServing()
	}
	if a.stop != nil {
		a.stop()
	}
	if a.stopIdle != nil {
		a.stopIdle()
	}
	if a.stopPipelines != nil {
		a.stopPipelines()
	}
	if a.stopStudies != nil {
		a.stopStudies()
	}
	if a.stopSchedules != nil {
		a.stopSchedules()
	}
	select {
	case <-a.stopped:
	case <-ctx.Done():
	}
	if cerr := a.Store.Close(); err == nil {
		err = cerr
	}
	return err
}

// Run serves until ctx is cancelled (SIGTERM or SIGINT in `klique serve`),
// then shuts down gracefully.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	// A process-wide setting, so made here and not in Start (which tests
	// call many times in one process).
	if cfg.GCHeapFloor > 0 && gctune.Start(uint64(cfg.GCHeapFloor)) {
		log.Debug("collector heap floor set", "bytes", cfg.GCHeapFloor)
	}
	app, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing requests in flight", "timeout", cfg.ShutdownTimeout)
	case err := <-app.served:
		if !errors.Is(err, http.ErrServerClosed) {
			_ = app.Store.Close()
			return fmt.Errorf("http server: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := app.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// appHosts says where app instances are served (KLIQUE_APPS_DOMAIN), and
// warns when it is by path on the control plane's own origin.
func appHosts(cfg *config.Config, log *slog.Logger) model.AppHosts {
	hosts := model.AppHostsFor(cfg.AppsDomain, cfg.PublicURL)
	if !hosts.ByHost() {
		log.Warn("app instances are served by path on the control plane's own origin (/apps/{id}/): a page of one instance can read " +
			"another's responses and the dashboard's storage, so keep to this for a single trusted team; set KLIQUE_APPS_DOMAIN " +
			"(with a wildcard DNS record and certificate) to serve each instance on a host name of its own (docs/apps.md)")
	}
	return hosts
}

// publicOrigin is the scheme and host of the control plane's public URL.
func publicOrigin(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
