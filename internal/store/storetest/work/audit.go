package work

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

func auditID(e *model.AuditEntry) string { return e.ID }

// Audit checks inserting the audit trail and listing it newest first,
// filtered and per tenant.
func Audit(t *testing.T, setup harness.Setup) {
	auditInserts(t, setup)
	auditLists(t, setup)
}

// auditInserts checks that an entry is written with its sequence number and
// id, and refused for an id in use or a missing tenant.
func auditInserts(t *testing.T, setup harness.Setup) {
	setup.Run(t, "InsertAudit assigns Seq and ID, and ListAudit returns every field", func(t *testing.T, b *harness.Bundle) {
		in := &model.AuditEntry{TenantID: b.Tenant.ID, At: b.At(1), ActorID: "u1", ActorName: "ada", Channel: "cli",
			Action: "pool.update", ObjectKind: "pool", ObjectID: "p1", ObjectName: "farm", Detail: "capacity 8 → 16"}
		harness.Must(t, b.Store.InsertAudit(b.Ctx, in))
		if in.ID == "" || in.Seq <= 0 {
			t.Fatalf("ID %q, Seq %d: want both assigned", in.ID, in.Seq)
		}
		e2 := b.Audit(t)
		if e2.Seq <= in.Seq {
			t.Fatalf("second Seq %d, want more than %d", e2.Seq, in.Seq)
		}
		want := *in
		want.At = harness.Norm(in.At)
		got, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{ObjectID: "p1"}, store.Page{})
		harness.Must(t, err)
		harness.CheckEqual(t, "ListAudit", got, []*model.AuditEntry{&want})
		harness.CheckTimeUTC(t, "At", got[0].At)
	})

	setup.Run(t, "InsertAudit keeps a given ID and returns ErrConflict for one in use", func(t *testing.T, b *harness.Bundle) {
		id := model.NewID()
		e := b.Audit(t, func(e *model.AuditEntry) { e.ID = id })
		harness.CheckEqual(t, "ID", e.ID, id)
		dup := &model.AuditEntry{ID: id, TenantID: b.Tenant.ID, At: b.Now, Action: "x"}
		harness.WantErr(t, b.Store.InsertAudit(b.Ctx, dup), store.ErrConflict)
		harness.CheckEqual(t, "Seq after a failed insert", dup.Seq, int64(0))
	})

	setup.Run(t, "InsertAudit returns ErrNotFound for a missing tenant", func(t *testing.T, b *harness.Bundle) {
		e := &model.AuditEntry{TenantID: model.NewID(), At: b.Now, Action: "x"}
		harness.WantErr(t, b.Store.InsertAudit(b.Ctx, e), store.ErrNotFound)
		if e.ID != "" || e.Seq != 0 {
			t.Fatalf("ID %q and Seq %d left after a failed insert", e.ID, e.Seq)
		}
	})
}

// auditLists checks ListAudit's order, pages, filters and tenant.
func auditLists(t *testing.T, setup harness.Setup) {
	setup.Run(t, "ListAudit lists newest first and pages join up", func(t *testing.T, b *harness.Bundle) {
		var oldest []string
		for i := range 6 {
			oldest = append(oldest, b.Audit(t, func(e *model.AuditEntry) { e.At = b.At(i) }).ID)
		}
		b.Audit(t, func(e *model.AuditEntry) { e.TenantID = b.Other.ID })
		want := reversed(oldest)
		all, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{}, store.Page{})
		harness.Must(t, err)
		harness.CheckEqual(t, "whole list", harness.Names(all, auditID), want)
		for _, limit := range []int{1, 4, 6, 7} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > 8 {
					t.Fatalf("limit %d: paging does not end", limit)
				}
				page, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{}, store.Page{After: after, Limit: limit})
				harness.Must(t, err)
				if len(page) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				got = append(got, harness.Names(page, auditID)...)
				after = strconv.FormatInt(page[len(page)-1].Seq, 10)
			}
			harness.CheckEqual(t, fmt.Sprintf("pages of %d joined", limit), got, want)
		}
		_, err = b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{}, store.Page{After: "x1"})
		if err == nil {
			t.Fatal("no error for page key \"x1\"")
		}
	})

	setup.Run(t, "ListAudit filters by actor, object and a time window from Since up to but not including Until", func(t *testing.T, b *harness.Bundle) {
		entry := func(minute int, actor, kind, id string) *model.AuditEntry {
			return b.Audit(t, func(e *model.AuditEntry) {
				e.At, e.ActorID, e.ObjectKind, e.ObjectID = b.At(minute), actor, kind, id
			})
		}
		e1 := entry(1, "ann", "pool", "p1")
		e2 := entry(2, "bob", "pool", "p2")
		e3 := entry(3, "ann", "group", "g1")
		e4 := entry(4, "bob", "pool", "p1")
		for _, c := range []struct {
			name string
			f    store.AuditFilter
			want []*model.AuditEntry
		}{
			{"none", store.AuditFilter{}, []*model.AuditEntry{e4, e3, e2, e1}},
			{"actor", store.AuditFilter{ActorID: "ann"}, []*model.AuditEntry{e3, e1}},
			{"object kind", store.AuditFilter{ObjectKind: "pool"}, []*model.AuditEntry{e4, e2, e1}},
			{"object", store.AuditFilter{ObjectKind: "pool", ObjectID: "p1"}, []*model.AuditEntry{e4, e1}},
			{"since", store.AuditFilter{Since: b.At(2)}, []*model.AuditEntry{e4, e3, e2}},
			{"until", store.AuditFilter{Until: b.At(3)}, []*model.AuditEntry{e2, e1}},
			{"window", store.AuditFilter{Since: b.At(2), Until: b.At(4)}, []*model.AuditEntry{e3, e2}},
			{"window within a microsecond", store.AuditFilter{Since: b.At(2).Add(time.Microsecond), Until: b.At(4)}, []*model.AuditEntry{e3}},
			{"actor and window", store.AuditFilter{ActorID: "bob", Since: b.At(1)}, []*model.AuditEntry{e4, e2}},
		} {
			got, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, c.f, store.Page{})
			harness.Must(t, err)
			harness.CheckEqual(t, c.name, harness.Names(got, auditID), harness.Names(c.want, auditID))
		}
	})

	setup.Run(t, "ListAudit sees only the tenant's entries", func(t *testing.T, b *harness.Bundle) {
		mine := b.Audit(t)
		theirs := b.Audit(t, func(e *model.AuditEntry) { e.TenantID = b.Other.ID })
		got, err := b.Store.ListAudit(b.Ctx, b.Tenant.ID, store.AuditFilter{}, store.Page{})
		harness.Must(t, err)
		harness.CheckEqual(t, "mine", harness.Names(got, auditID), []string{mine.ID})
		got, err = b.Store.ListAudit(b.Ctx, b.Other.ID, store.AuditFilter{}, store.Page{})
		harness.Must(t, err)
		harness.CheckEqual(t, "theirs", harness.Names(got, auditID), []string{theirs.ID})
	})
}
