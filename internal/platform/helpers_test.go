package platform_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/vault"
)

// testBundle is one platform service over a fresh, bootstrapped store, and
// the means to act as its users.
type testBundle struct {
	store store.Store
	svc   *platform.Service
	auth  *identity.Authenticator
	logs  *logRecorder
	// admin acts as the platform admin of tenant "default", over the CLI
	// channel.
	admin   context.Context
	adminID string
	tenant  string
}

// forEachStore runs fn against SQLite and, when KLIQUE_TEST_DATABASE_URL
// is set, against PostgreSQL, each in a subtest with a store of its own.
func forEachStore(t *testing.T, fn func(t *testing.T, b *testBundle)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "k.db"))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		fn(t, setup(t, st))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.RequirePostgresURL(t)
		st, err := postgres.Open(t.Context(), url)
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		fn(t, setup(t, st))
	})
}

// setup builds the service over st, bootstraps it and signs in as the
// platform admin with the bootstrap key.
func setup(t *testing.T, st store.Store) *testBundle {
	t.Helper()
	// Cleanups run last in, first out: the store closes before pgtest,
	// which registered earlier, drops the schema under it.
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	ctx := context.Background()
	signer, err := identity.LoadOrCreateSigner(ctx, st, "https://klique.test", "klique", time.Hour)
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	logs := &logRecorder{}
	b := &testBundle{
		store: st,
		auth:  identity.NewAuthenticator(st, signer, nil, nil),
		logs:  logs,
	}
	v, err := vault.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatalf("vault: %v", err)
	}
	b.svc = platform.New(platform.Options{Store: st, Auth: b.auth, Logger: slog.New(logs), Vault: v})
	secret, err := b.svc.Bootstrap(ctx, "")
	if err != nil || secret == "" {
		t.Fatalf("Bootstrap = %q, %v", secret, err)
	}
	b.admin = b.signIn(t, secret)
	p, _ := identity.PrincipalFrom(b.admin)
	if p.Role != model.RolePlatformAdmin || p.UserName != "admin" {
		t.Fatalf("bootstrap principal %+v", p)
	}
	b.adminID, b.tenant = p.UserID, p.TenantID
	return b
}

// signIn authenticates an API key secret the way the HTTP layer does and
// returns a context carrying the principal, on the CLI channel.
func (b *testBundle) signIn(t *testing.T, secret string) context.Context {
	t.Helper()
	p, err := b.auth.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return identity.WithChannel(identity.WithPrincipal(context.Background(), p), identity.ChannelCLI)
}

// user creates a user with role in the given groups ("ml-research" for a
// member, "lead:ml-research" for a lead) and returns a context acting as
// them through an API key of their own.
func (b *testBundle) user(t *testing.T, name string, role model.Role, groups ...string) context.Context {
	t.Helper()
	in := platform.UserInput{Name: &name, Role: &role}
	for _, g := range groups {
		gr := model.GroupRoleMember
		if rest, ok := strings.CutPrefix(g, "lead:"); ok {
			g, gr = rest, model.GroupRoleLead
		}
		in.Groups = append(in.Groups, platform.GroupGrantInput{Group: g, Role: gr})
	}
	if _, err := b.svc.CreateUser(b.admin, in); err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return b.key(t, name, "")
}

// key creates an API key for an existing user, scoped to project when it is
// set, and returns a context acting through it.
func (b *testBundle) key(t *testing.T, user, project string) context.Context {
	t.Helper()
	_, secret, err := b.svc.CreateAPIKey(b.admin, platform.APIKeyInput{Name: "test key", User: user, Project: project})
	if err != nil {
		t.Fatalf("create API key for %s: %v", user, err)
	}
	return b.signIn(t, secret)
}

// applyExample applies examples/estate.yaml as the admin.
func (b *testBundle) applyExample(t *testing.T) *platform.EstateResult {
	t.Helper()
	res, err := b.svc.ApplyEstate(b.admin, exampleYAML(t), false)
	if err != nil {
		t.Fatalf("apply example: %v", err)
	}
	return res
}

// people is the cast of the access and task tests, over the example estate.
type people struct {
	rita   context.Context // member of ml-research
	lead   context.Context // lead of ml-research
	vic    context.Context // member of vision
	both   context.Context // member of ml-research and vision
	viewer context.Context // viewer in ml-research
	nobody context.Context // member of no group
}

func (b *testBundle) people(t *testing.T) people {
	t.Helper()
	return people{
		rita:   b.user(t, "rita", model.RoleMember, "ml-research"),
		lead:   b.user(t, "lena", model.RoleMember, "lead:ml-research"),
		vic:    b.user(t, "vic", model.RoleMember, "vision"),
		both:   b.user(t, "bo", model.RoleMember, "ml-research", "vision"),
		viewer: b.user(t, "val", model.RoleViewer, "ml-research"),
		nobody: b.user(t, "nod", model.RoleMember),
	}
}

func userID(ctx context.Context) string {
	p, _ := identity.PrincipalFrom(ctx)
	return p.UserID
}

// snapshot is what a refused change must leave as it was.
type snapshot struct {
	estate *estate.Estate
	audit  int
}

func (b *testBundle) snapshot(t *testing.T) snapshot {
	t.Helper()
	e, err := b.svc.Estate(b.admin)
	if err != nil {
		t.Fatalf("load estate: %v", err)
	}
	return snapshot{estate: e, audit: len(b.auditLog(t))}
}

// unchanged fails the test if the allocation model or the audit trail moved
// since before.
func (b *testBundle) unchanged(t *testing.T, before snapshot) {
	t.Helper()
	after := b.snapshot(t)
	if cs := estate.Diff(before.estate, after.estate); len(cs) > 0 {
		var s []string
		for _, c := range cs {
			s = append(s, c.String())
		}
		t.Fatalf("a refused change changed the estate: %s", strings.Join(s, "; "))
	}
	if after.audit != before.audit {
		t.Fatalf("a refused change wrote %d audit entries", after.audit-before.audit)
	}
}

func (b *testBundle) auditLog(t *testing.T) []*model.AuditEntry {
	t.Helper()
	es, err := b.svc.AuditLog(b.admin, platform.AuditFilter{}, store.Page{})
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return es
}

// wantError fails the test unless err has code and its message holds every
// one of words.
func wantError(t *testing.T, err error, code platform.Code, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s holding %q", code, words)
	}
	if got := platform.ErrorCode(err); got != code {
		t.Fatalf("error %q has code %s, want %s", err, got, code)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not hold %q", err, w)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v (code %s)", err, platform.ErrorCode(err))
	}
}

func ptr[T any](v T) *T { return &v }

func exampleYAML(t testing.TB) []byte {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the test's own file")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "examples", "estate.yaml"))
	if err != nil {
		t.Fatalf("read example estate: %v", err)
	}
	return data
}

// logRecorder is a slog.Handler that keeps every record at warning level
// and above.
type logRecorder struct {
	mu      sync.Mutex
	records []string
}

func (l *logRecorder) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelWarn }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, sb.String())
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.records...)
}

// enqueue sends a small command task as ctx.
func enqueue(t *testing.T, b *testBundle, ctx context.Context, project, cr, group string, params map[string]string) *model.Task {
	t.Helper()
	task, err := b.svc.EnqueueTask(ctx, platform.EnqueueInput{
		Name: "train", Project: project, ComputeResource: cr, Group: group,
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}, Parameters: params},
	})
	if err != nil {
		t.Fatalf("enqueue on %s: %v (code %s)", cr, err, platform.ErrorCode(err))
	}
	return task
}

// computeResource finds a group's compute resource by name, as the admin.
func (b *testBundle) computeResource(t *testing.T, group, name string) *model.ComputeResource {
	t.Helper()
	e, err := b.svc.Estate(b.admin)
	if err != nil {
		t.Fatal(err)
	}
	g := e.GroupByName(group)
	if g == nil {
		t.Fatalf("no group %s", group)
	}
	pol := e.PolicyOfGroup(g.ID)
	if pol == nil {
		t.Fatalf("group %s has no policy", group)
	}
	for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
		if cr.Name == name {
			return cr
		}
	}
	t.Fatalf("group %s has no compute resource %q", group, name)
	return nil
}
