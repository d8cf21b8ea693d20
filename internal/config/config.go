// Package config reads the server's configuration from the environment. With
// nothing set, the server runs on its embedded defaults: state in SQLite
// under ./klique-data, listening on 127.0.0.1:8080.
package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config is everything `klique serve` needs.
type Config struct {
	// Listen is the address of the HTTP server (KLIQUE_LISTEN).
	Listen string
	// DataDir holds the SQLite file and the bootstrap admin token
	// (KLIQUE_DATA_DIR).
	DataDir string
	// DatabaseURL, when set, keeps state in PostgreSQL instead of SQLite
	// (KLIQUE_DATABASE_URL).
	DatabaseURL string
	// RedisURL carries the gateway's rate-limit and budget counters
	// between replicas (KLIQUE_REDIS_URL). Not needed by a single replica:
	// without it they are kept in process.
	RedisURL string
	// GatewayListen, when set, serves the LLM gateway (/v1) on a listener
	// of its own as well (KLIQUE_GATEWAY_LISTEN), such as 0.0.0.0:4000.
	GatewayListen string
	// GatewayJournal is the directory of the gateway's ledger journal
	// (KLIQUE_GATEWAY_JOURNAL; default gateway-journal in DataDir; "off":
	// none, and answers wait for the ledger's write). See docs/gateway.md.
	GatewayJournal string
	// BootstrapToken, when set, is the admin API key created on first start
	// instead of a generated one (KLIQUE_BOOTSTRAP_TOKEN).
	BootstrapToken string
	// PublicURL is how clients reach the server; it is the issuer of access
	// tokens (KLIQUE_PUBLIC_URL, default http://<listen>).
	PublicURL string
	// TokenTTL is the lifetime of access tokens (KLIQUE_TOKEN_TTL).
	TokenTTL time.Duration
	// MaxBodyBytes bounds request bodies (KLIQUE_MAX_BODY_BYTES).
	MaxBodyBytes int64
	// GraphQLReadSlots is how many GraphQL queries execute at once
	// (KLIQUE_GRAPHQL_READ_SLOTS; 0: two per CPU). Mutations never wait
	// for a slot, so that writes go ahead of reads (docs/api.md).
	GraphQLReadSlots int
	// LogFormat is "text" or "json" (KLIQUE_LOG_FORMAT); LogLevel is debug,
	// info, warn or error (KLIQUE_LOG_LEVEL).
	LogFormat string
	LogLevel  string
	// OIDC configures an external identity provider (KLIQUE_OIDC_*). Empty
	// OIDCIssuer means no SSO.
	OIDCIssuer        string
	OIDCJWKSURL       string
	OIDCAudience      string
	OIDCGroupsClaim   string
	OIDCUsernameClaim string
	OIDCTenant        string
	// ShutdownTimeout bounds a graceful shutdown (KLIQUE_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// Engine runs the compute policy engine in this process
	// (KLIQUE_ENGINE=off turns it off, for a replica that only serves the
	// API). EngineInterval is the time between passes
	// (KLIQUE_ENGINE_INTERVAL, default 1s).
	Engine         bool
	EngineInterval time.Duration
	// VaultKey (KLIQUE_VAULT_KEY, base64 of 32 bytes) seals secrets at
	// rest. When unset the server keeps a generated key in the data
	// directory (vault.key); replicas sharing a database must share a key.
	VaultKey string
	// WorkerLease is how long a claimed task stays a worker's without a
	// heartbeat (KLIQUE_WORKER_LEASE, default 60s); TaskLogLimit bounds one
	// task's stored log (KLIQUE_TASK_LOG_LIMIT, bytes, default 16 MiB).
	WorkerLease  time.Duration
	TaskLogLimit int64
	// TaskMaxRetries is how many times a task whose worker was lost is
	// requeued before it fails (KLIQUE_TASK_MAX_RETRIES, default 3). As the
	// engine's MaxRetries: 0 is the default, -1 none.
	TaskMaxRetries int
	// DebugListen, when set, serves Go's profiler (net/http/pprof) on a
	// separate address (KLIQUE_DEBUG_LISTEN, e.g. 127.0.0.1:6060). It has
	// no authentication: keep it on loopback.
	DebugListen string
	// MetricsListen, when set, serves Prometheus metrics (/metrics) on a
	// separate address without authentication (KLIQUE_METRICS_LISTEN, e.g.
	// 127.0.0.1:9090): keep it where only the scraper reaches it.
	// MetricsToken, when set, also serves them on the main listener to
	// callers that send it as 'Authorization: Bearer <token>'
	// (KLIQUE_METRICS_TOKEN, at least 16 characters). With neither, the main
	// listener does not serve /metrics: their labels name every tenant's
	// model aliases and routes.
	MetricsListen string
	MetricsToken  string
	// SubscriptionsPerConnection caps the GraphQL subscriptions one
	// WebSocket connection runs at once (KLIQUE_SUBSCRIPTIONS_PER_CONNECTION,
	// default 100); SubscriptionConnectionsPerUser caps one user's open
	// WebSocket connections per replica
	// (KLIQUE_SUBSCRIPTION_CONNECTIONS_PER_USER, default 20). Zero means the
	// default.
	SubscriptionsPerConnection     int
	SubscriptionConnectionsPerUser int
	// ScheduleMinInterval is the shortest time between two firings of a
	// schedule, for every tenant (KLIQUE_SCHEDULE_MIN_INTERVAL, default
	// 1m; a tenant admin may raise it for the tenant). SchedulesPerUser
	// and SchedulesPerProject cap the schedules a user owns and a project
	// holds (KLIQUE_SCHEDULES_PER_USER, default 50;
	// KLIQUE_SCHEDULES_PER_PROJECT, default 200); TriggerRunsPerHour caps
	// the runs one trigger schedule starts an hour
	// (KLIQUE_TRIGGER_RUNS_PER_HOUR, default 60). Zero means the default.
	ScheduleMinInterval time.Duration
	SchedulesPerUser    int
	SchedulesPerProject int
	TriggerRunsPerHour  int
	// GCHeapFloor is the heap size below which `klique serve` does not run
	// Go's collector (KLIQUE_GC_HEAP_FLOOR, bytes, default 64 MiB; 0 turns
	// it off). It spaces out collections in a process with a small live
	// heap and a high allocation rate, such as a busy LLM gateway (see
	// internal/gctune). A GOGC or GOMEMLIMIT in the environment wins.
	GCHeapFloor int64
	// Artifacts says where stored artifacts go and how large they may be
	// (KLIQUE_ARTIFACT_*, artifacts.go).
	Artifacts Artifacts
	// AppsDomain, when set, serves each app instance on a host name of
	// its own under it (KLIQUE_APPS_DOMAIN=apps.klique.example.com:
	// {id}.apps.klique.example.com, with the scheme and port of
	// KLIQUE_PUBLIC_URL), so that a page of one instance is a different
	// origin from the dashboard, the API and every other instance. It
	// needs a wildcard DNS record (and certificate) for *.AppsDomain
	// pointing at the control plane. Unset, instances are served by path
	// on the control plane's own origin (/apps/{id}/), for a single
	// trusted team only; the server warns at start.
	AppsDomain string
}

// Defaults.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultDataDir      = "klique-data"
	DefaultTokenTTL     = time.Hour
	DefaultMaxBodyBytes = 8 << 20
)

// FromEnv reads the configuration from the environment, using getenv
// (os.Getenv when nil). The error names the variable to fix.
func FromEnv(getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{
		Listen:            or(getenv("KLIQUE_LISTEN"), DefaultListen),
		DataDir:           or(getenv("KLIQUE_DATA_DIR"), DefaultDataDir),
		DatabaseURL:       getenv("KLIQUE_DATABASE_URL"),
		RedisURL:          getenv("KLIQUE_REDIS_URL"),
		GatewayListen:     getenv("KLIQUE_GATEWAY_LISTEN"),
		GatewayJournal:    getenv("KLIQUE_GATEWAY_JOURNAL"),
		BootstrapToken:    getenv("KLIQUE_BOOTSTRAP_TOKEN"),
		PublicURL:         getenv("KLIQUE_PUBLIC_URL"),
		LogFormat:         or(getenv("KLIQUE_LOG_FORMAT"), "text"),
		LogLevel:          or(getenv("KLIQUE_LOG_LEVEL"), "info"),
		OIDCIssuer:        getenv("KLIQUE_OIDC_ISSUER"),
		OIDCJWKSURL:       getenv("KLIQUE_OIDC_JWKS_URL"),
		OIDCAudience:      getenv("KLIQUE_OIDC_AUDIENCE"),
		OIDCGroupsClaim:   getenv("KLIQUE_OIDC_GROUPS_CLAIM"),
		OIDCUsernameClaim: getenv("KLIQUE_OIDC_USERNAME_CLAIM"),
		OIDCTenant:        getenv("KLIQUE_OIDC_TENANT"),
	}
	var err error
	if c.TokenTTL, err = duration(getenv, "KLIQUE_TOKEN_TTL", DefaultTokenTTL); err != nil {
		return nil, err
	}
	if c.ShutdownTimeout, err = duration(getenv, "KLIQUE_SHUTDOWN_TIMEOUT", 20*time.Second); err != nil {
		return nil, err
	}
	switch v := getenv("KLIQUE_ENGINE"); v {
	case "", "on":
		c.Engine = true
	case "off":
	default:
		return nil, fmt.Errorf("KLIQUE_ENGINE=%q: use on or off", v)
	}
	if c.EngineInterval, err = duration(getenv, "KLIQUE_ENGINE_INTERVAL", time.Second); err != nil {
		return nil, err
	}
	c.VaultKey = getenv("KLIQUE_VAULT_KEY")
	c.AppsDomain = strings.ToLower(strings.TrimSpace(getenv("KLIQUE_APPS_DOMAIN")))
	c.DebugListen = getenv("KLIQUE_DEBUG_LISTEN")
	c.MetricsListen = getenv("KLIQUE_METRICS_LISTEN")
	c.MetricsToken = getenv("KLIQUE_METRICS_TOKEN")
	if c.WorkerLease, err = duration(getenv, "KLIQUE_WORKER_LEASE", 60*time.Second); err != nil {
		return nil, err
	}
	if v := getenv("KLIQUE_TASK_MAX_RETRIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return nil, fmt.Errorf("KLIQUE_TASK_MAX_RETRIES=%q: give a whole number from 0 to 100", v)
		}
		c.TaskMaxRetries = n
		if n == 0 {
			c.TaskMaxRetries = -1
		}
	}
	c.GCHeapFloor = 64 << 20
	if v := getenv("KLIQUE_GC_HEAP_FLOOR"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return nil, fmt.Errorf("KLIQUE_GC_HEAP_FLOOR=%q: give a number of bytes (0 turns the floor off), such as 67108864 for 64 MiB", v)
		}
		c.GCHeapFloor = n
	}
	c.TaskLogLimit = 16 << 20
	if v := getenv("KLIQUE_TASK_LOG_LIMIT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1<<10 {
			return nil, fmt.Errorf("KLIQUE_TASK_LOG_LIMIT=%q: give a number of bytes, at least 1024", v)
		}
		c.TaskLogLimit = n
	}
	for _, lim := range []struct {
		env string
		to  *int
	}{
		{"KLIQUE_SUBSCRIPTIONS_PER_CONNECTION", &c.SubscriptionsPerConnection},
		{"KLIQUE_SUBSCRIPTION_CONNECTIONS_PER_USER", &c.SubscriptionConnectionsPerUser},
		{"KLIQUE_SCHEDULES_PER_USER", &c.SchedulesPerUser},
		{"KLIQUE_SCHEDULES_PER_PROJECT", &c.SchedulesPerProject},
		{"KLIQUE_TRIGGER_RUNS_PER_HOUR", &c.TriggerRunsPerHour},
		{"KLIQUE_GRAPHQL_READ_SLOTS", &c.GraphQLReadSlots},
	} {
		if v := getenv(lim.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100000 {
				return nil, fmt.Errorf("%s=%q: give a whole number between 1 and 100000", lim.env, v)
			}
			*lim.to = n
		}
	}
	if c.ScheduleMinInterval, err = duration(getenv, "KLIQUE_SCHEDULE_MIN_INTERVAL", 0); err != nil {
		return nil, err
	}
	if v := c.ScheduleMinInterval; v != 0 && (v < time.Second || v > 24*time.Hour) {
		return nil, fmt.Errorf("KLIQUE_SCHEDULE_MIN_INTERVAL=%s: give a duration between 1s and 24h", v)
	}
	if c.Artifacts, err = artifactsFromEnv(getenv); err != nil {
		return nil, err
	}
	c.MaxBodyBytes = DefaultMaxBodyBytes
	if v := getenv("KLIQUE_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1<<10 {
			return nil, fmt.Errorf("KLIQUE_MAX_BODY_BYTES=%q: give a number of bytes, at least 1024", v)
		}
		c.MaxBodyBytes = n
	}
	return c, c.Validate()
}

// Validate checks the values and fills derived defaults.
func (c *Config) Validate() error {
	if c.TokenTTL < time.Minute || c.TokenTTL > 7*24*time.Hour {
		return fmt.Errorf("KLIQUE_TOKEN_TTL=%s: give a duration between 1m and 168h", c.TokenTTL)
	}
	if c.DatabaseURL != "" {
		u, err := url.Parse(c.DatabaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return fmt.Errorf("KLIQUE_DATABASE_URL must be a postgres:// URL (leave it unset for the embedded SQLite store)")
		}
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			return fmt.Errorf("KLIQUE_REDIS_URL must be a redis:// or rediss:// URL (leave it unset to keep limits in process)")
		}
	}
	if c.Engine && (c.EngineInterval < 10*time.Millisecond || c.EngineInterval > time.Minute) {
		return fmt.Errorf("KLIQUE_ENGINE_INTERVAL=%s: give a duration between 10ms and 1m", c.EngineInterval)
	}
	if c.WorkerLease != 0 && (c.WorkerLease < 5*time.Second || c.WorkerLease > time.Hour) {
		return fmt.Errorf("KLIQUE_WORKER_LEASE=%s: give a duration between 5s and 1h", c.WorkerLease)
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("KLIQUE_PUBLIC_URL=%q must be an http(s) URL such as https://klique.example.com", c.PublicURL)
	}
	if c.AppsDomain != "" {
		if err := checkAppsDomain(c.AppsDomain, c.PublicURL); err != nil {
			return err
		}
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("KLIQUE_LOG_FORMAT=%q: use text or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("KLIQUE_LOG_LEVEL=%q: use debug, info, warn or error", c.LogLevel)
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		return fmt.Errorf("KLIQUE_METRICS_TOKEN is %d characters: give at least 16 (for example the output of 'openssl rand -hex 24')", len(c.MetricsToken))
	}
	if c.OIDCIssuer != "" && (c.OIDCJWKSURL == "" || c.OIDCAudience == "") {
		return fmt.Errorf("KLIQUE_OIDC_ISSUER is set: also set KLIQUE_OIDC_JWKS_URL and KLIQUE_OIDC_AUDIENCE")
	}
	return nil
}

// SQLitePath is where the embedded store keeps its file.
func (c *Config) SQLitePath() string { return filepath.Join(c.DataDir, "klique.db") }

// VaultKeyPath is where the server keeps a generated vault key.
func (c *Config) VaultKeyPath() string { return filepath.Join(c.DataDir, "vault.key") }

// AdminTokenPath is where the first start writes the admin API key.
func (c *Config) AdminTokenPath() string { return filepath.Join(c.DataDir, "admin.token") }

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: give a duration such as 30s, 15m or 1h", name, v)
	}
	return d, nil
}

// appsDomainRE is a DNS name of at least two labels: lowercase letters,
// digits and dashes.
var appsDomainRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// checkAppsDomain refuses a KLIQUE_APPS_DOMAIN that is not a host name, or
// whose instances would share the control plane's own host.
func checkAppsDomain(domain, publicURL string) error {
	if len(domain) > 200 || !appsDomainRE.MatchString(domain) {
		return fmt.Errorf("KLIQUE_APPS_DOMAIN=%q must be a DNS name such as apps.klique.example.com (no scheme, port or path): each instance is served at {id}.<domain>, with the scheme and port of KLIQUE_PUBLIC_URL", domain)
	}
	u, _ := url.Parse(publicURL)
	if h := strings.ToLower(u.Hostname()); h == domain || strings.HasSuffix(h, "."+domain) {
		return fmt.Errorf("KLIQUE_APPS_DOMAIN=%s would put the control plane's own host (%s) among the instances' hosts: give a domain of their own, such as apps.%s", domain, h, h)
	}
	return nil
}

// JournalDir is the gateway's ledger journal directory: GatewayJournal, by
// default gateway-journal in the data directory, and "" when it is "off".
func (c *Config) JournalDir() string {
	switch c.GatewayJournal {
	case "off":
		return ""
	case "":
		return filepath.Join(c.DataDir, "gateway-journal")
	}
	return c.GatewayJournal
}
