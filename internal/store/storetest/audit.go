package storetest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func auditID(e *model.AuditEntry) string { return e.ID }

func exerciseAudit(t *testing.T, setup setupFunc) {
	t.Run("InsertAudit assigns Seq and ID, and ListAudit returns every field", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := &model.AuditEntry{TenantID: b.tenant.ID, At: b.at(1), ActorID: "u1", ActorName: "ada", Channel: "cli",
			Action: "pool.update", ObjectKind: "pool", ObjectID: "p1", ObjectName: "farm", Detail: "capacity 8 → 16"}
		must(t, b.store.InsertAudit(b.ctx, in))
		if in.ID == "" || in.Seq <= 0 {
			t.Fatalf("ID %q, Seq %d: want both assigned", in.ID, in.Seq)
		}
		e2 := b.audit(t)
		if e2.Seq <= in.Seq {
			t.Fatalf("second Seq %d, want more than %d", e2.Seq, in.Seq)
		}
		want := *in
		want.At = norm(in.At)
		got, err := b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{ObjectID: "p1"}, store.Page{})
		must(t, err)
		checkEqual(t, "ListAudit", got, []*model.AuditEntry{&want})
		checkTimeUTC(t, "At", got[0].At)
	})

	t.Run("InsertAudit keeps a given ID and returns ErrConflict for one in use", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := model.NewID()
		e := b.audit(t, func(e *model.AuditEntry) { e.ID = id })
		checkEqual(t, "ID", e.ID, id)
		dup := &model.AuditEntry{ID: id, TenantID: b.tenant.ID, At: b.now, Action: "x"}
		wantErr(t, b.store.InsertAudit(b.ctx, dup), store.ErrConflict)
		checkEqual(t, "Seq after a failed insert", dup.Seq, int64(0))
	})

	t.Run("InsertAudit returns ErrNotFound for a missing tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := &model.AuditEntry{TenantID: model.NewID(), At: b.now, Action: "x"}
		wantErr(t, b.store.InsertAudit(b.ctx, e), store.ErrNotFound)
		if e.ID != "" || e.Seq != 0 {
			t.Fatalf("ID %q and Seq %d left after a failed insert", e.ID, e.Seq)
		}
	})

	t.Run("ListAudit lists newest first and pages join up", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var oldest []string
		for i := range 6 {
			oldest = append(oldest, b.audit(t, func(e *model.AuditEntry) { e.At = b.at(i) }).ID)
		}
		b.audit(t, func(e *model.AuditEntry) { e.TenantID = b.other.ID })
		want := reversed(oldest)
		all, err := b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{}, store.Page{})
		must(t, err)
		checkEqual(t, "whole list", names(all, auditID), want)
		for _, limit := range []int{1, 4, 6, 7} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > 8 {
					t.Fatalf("limit %d: paging does not end", limit)
				}
				page, err := b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{}, store.Page{After: after, Limit: limit})
				must(t, err)
				if len(page) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				got = append(got, names(page, auditID)...)
				after = strconv.FormatInt(page[len(page)-1].Seq, 10)
			}
			checkEqual(t, fmt.Sprintf("pages of %d joined", limit), got, want)
		}
		_, err = b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{}, store.Page{After: "x1"})
		if err == nil {
			t.Fatal("no error for page key \"x1\"")
		}
	})

	t.Run("ListAudit filters by actor, object and a time window from Since up to but not including Until", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		entry := func(minute int, actor, kind, id string) *model.AuditEntry {
			return b.audit(t, func(e *model.AuditEntry) {
				e.At, e.ActorID, e.ObjectKind, e.ObjectID = b.at(minute), actor, kind, id
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
			{"since", store.AuditFilter{Since: b.at(2)}, []*model.AuditEntry{e4, e3, e2}},
			{"until", store.AuditFilter{Until: b.at(3)}, []*model.AuditEntry{e2, e1}},
			{"window", store.AuditFilter{Since: b.at(2), Until: b.at(4)}, []*model.AuditEntry{e3, e2}},
			{"window within a microsecond", store.AuditFilter{Since: b.at(2).Add(time.Microsecond), Until: b.at(4)}, []*model.AuditEntry{e3}},
			{"actor and window", store.AuditFilter{ActorID: "bob", Since: b.at(1)}, []*model.AuditEntry{e4, e2}},
		} {
			got, err := b.store.ListAudit(b.ctx, b.tenant.ID, c.f, store.Page{})
			must(t, err)
			checkEqual(t, c.name, names(got, auditID), names(c.want, auditID))
		}
	})

	t.Run("ListAudit sees only the tenant's entries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mine := b.audit(t)
		theirs := b.audit(t, func(e *model.AuditEntry) { e.TenantID = b.other.ID })
		got, err := b.store.ListAudit(b.ctx, b.tenant.ID, store.AuditFilter{}, store.Page{})
		must(t, err)
		checkEqual(t, "mine", names(got, auditID), []string{mine.ID})
		got, err = b.store.ListAudit(b.ctx, b.other.ID, store.AuditFilter{}, store.Page{})
		must(t, err)
		checkEqual(t, "theirs", names(got, auditID), []string{theirs.ID})
	})
}
