// Package kerneltest builds what a domain's own tests stand on: a fresh
// SQLite store with one tenant, an estate applied through the kernel's one
// way of changing it, and users to act as. A domain's tests build their
// domain on it directly, with no facade and no other domain.
package kerneltest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// Tenant is the id of the one tenant Store creates ("acme").
const Tenant = "t1"

// Store opens a fresh SQLite store in a temporary directory, with tenant
// Tenant, closed when t ends.
func Store(t testing.TB) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "klique.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTenant(ctx, &model.Tenant{ID: Tenant, Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// ApplyEstate changes the tenant's estate to the estate file doc as the
// caller of ctx, through kernel.ChangeEstate (so it is validated whole and
// audited like any change).
func ApplyEstate(ctx context.Context, k *kernel.Kernel, doc string, dryRun bool) (*kernel.EstateResult, error) {
	d, err := estate.ParseDocument([]byte(doc))
	if err != nil {
		return nil, err
	}
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	return k.ChangeEstate(ctx, p, "apply an estate file", dryRun, func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		applied, err := d.Apply(cur, Tenant, model.NewID, t.Now)
		if err != nil {
			return "", err
		}
		*next = *applied
		return "", nil
	})
}

// User creates a user of role and returns a context acting as them, a
// member of the groups named in e ("lead:ml" makes them ml's lead).
func User(t testing.TB, st store.Store, e *estate.Estate, name string, role model.Role, groups ...string) context.Context {
	t.Helper()
	u := &model.User{ID: model.NewID(), TenantID: Tenant, Name: name, Role: role}
	if err := st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	p := &identity.Principal{TenantID: Tenant, UserID: u.ID, UserName: name, Role: role}
	for _, g := range groups {
		gr := model.GroupRoleMember
		if rest, ok := strings.CutPrefix(g, "lead:"); ok {
			g, gr = rest, model.GroupRoleLead
		}
		grp := e.GroupByName(g)
		if grp == nil {
			t.Fatalf("the estate has no group %s", g)
		}
		p.Groups = append(p.Groups, identity.GroupGrant{GroupID: grp.ID, GroupName: g, Role: gr})
	}
	return identity.WithPrincipal(context.Background(), p)
}
