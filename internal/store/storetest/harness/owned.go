package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Owned describes a kind of object a tenant owns (a group, a pool, a
// project...) for the checks every such kind passes alike, so that each
// kind's suite states them once rather than in copies: what is written is
// read back whole, a missing ID or another tenant's is refused with
// ErrNotFound, a name taken in the tenant with ErrConflict, and a delete
// takes the object away.
type Owned[E any] struct {
	// Kind names the kind as the store's methods do ("GPUClass"), Noun as
	// the subtests' names do ("class").
	Kind, Noun string
	// Make creates a valid object in b.Tenant, as the bundle's fixture
	// builders do; mods may rename it.
	Make func(b *Bundle, t *testing.T, mods ...func(*E)) *E
	// Fields points at the fields the checks read and change.
	Fields func(*E) Fields
	Create func(s store.Store, ctx context.Context, e *E) error
	Get    func(s store.Store, ctx context.Context, tenantID, id string) (*E, error)
	// GetByName, Update and Delete are nil for a kind without them.
	GetByName func(s store.Store, ctx context.Context, tenantID, name string) (*E, error)
	Update    func(s store.Store, ctx context.Context, e *E) error
	Delete    func(s store.Store, ctx context.Context, tenantID, id string) error
}

// Fields points at an object's keys and time stamps. Name is nil for a kind
// whose names need not be unique in a tenant, UpdatedAt for one that has no
// such stamp.
type Fields struct {
	ID, TenantID, Name   *string
	CreatedAt, UpdatedAt *time.Time
}

// Stored returns a copy of e as the store gives it back: its time stamps in
// UTC, to the microsecond.
func (o Owned[E]) Stored(e *E) *E {
	want := *e
	f := o.Fields(&want)
	*f.CreatedAt = Norm(*f.CreatedAt)
	if f.UpdatedAt != nil {
		*f.UpdatedAt = Norm(*f.UpdatedAt)
	}
	return &want
}

// CheckCreate creates in and checks that it is read back whole.
func (o Owned[E]) CheckCreate(t *testing.T, b *Bundle, in *E) *E {
	t.Helper()
	Must(t, o.Create(b.Store, b.Ctx, in))
	return o.CheckStored(t, b, "Get"+o.Kind, o.Stored(in))
}

// CheckUpdate updates old to upd and checks that every field was written
// but CreatedAt, which stays old's.
func (o Owned[E]) CheckUpdate(t *testing.T, b *Bundle, old, upd *E) *E {
	t.Helper()
	Must(t, o.Update(b.Store, b.Ctx, upd))
	want := o.Stored(upd)
	*o.Fields(want).CreatedAt = Norm(*o.Fields(old).CreatedAt)
	return o.CheckStored(t, b, "after Update"+o.Kind, want)
}

// CheckStored checks that Get, and GetByName where the kind has it, read
// back want, and returns what Get read.
func (o Owned[E]) CheckStored(t *testing.T, b *Bundle, what string, want *E) *E {
	t.Helper()
	f := o.Fields(want)
	got, err := o.Get(b.Store, b.Ctx, *f.TenantID, *f.ID)
	Must(t, err)
	CheckEqual(t, what, got, want)
	if o.GetByName != nil {
		byName, err := o.GetByName(b.Store, b.Ctx, *f.TenantID, *f.Name)
		Must(t, err)
		CheckEqual(t, what+" by name", byName, want)
	}
	return got
}

// CheckRefusals runs the subtests of the refusals every kind shares: reads,
// updates and deletes of a missing ID or another tenant's object, and names
// taken in the tenant.
func (o Owned[E]) CheckRefusals(t *testing.T, setup Setup) {
	setup.Run(t, fmt.Sprintf("Get%s returns ErrNotFound for a missing %s and another tenant's", o.Kind, o.Noun), o.checkGetRefusals)
	if o.Update != nil {
		setup.Run(t, fmt.Sprintf("Update%s returns ErrNotFound for a missing %s and another tenant's, and changes neither", o.Kind, o.Noun), o.checkUpdateRefusals)
	}
	if o.Fields(new(E)).Name != nil {
		setup.Run(t, fmt.Sprintf("Create%s and Update%s return ErrConflict for a name taken in the tenant, not in another", o.Kind, o.Kind), o.checkNameTaken)
	}
	if o.Delete != nil {
		setup.Run(t, fmt.Sprintf("Delete%s deletes a %s and returns ErrNotFound for a missing one and another tenant's", o.Kind, o.Noun), o.checkDelete)
	}
}

func (o Owned[E]) checkGetRefusals(t *testing.T, b *Bundle) {
	_, err := o.Get(b.Store, b.Ctx, b.Tenant.ID, model.NewID())
	WantErr(t, err, store.ErrNotFound)
	theirs := o.Fields(o.Make(b.Swapped(), t))
	_, err = o.Get(b.Store, b.Ctx, b.Tenant.ID, *theirs.ID)
	WantErr(t, err, store.ErrNotFound)
	if o.GetByName != nil {
		_, err = o.GetByName(b.Store, b.Ctx, b.Tenant.ID, "no-such-name")
		WantErr(t, err, store.ErrNotFound)
		_, err = o.GetByName(b.Store, b.Ctx, b.Tenant.ID, *theirs.Name)
		WantErr(t, err, store.ErrNotFound)
	}
}

// checkUpdateRefusals writes a valid object of b.Tenant under a missing ID
// and under the ID of another tenant's object, which must stay as it was.
func (o Owned[E]) checkUpdateRefusals(t *testing.T, b *Bundle) {
	theirs := o.Make(b.Swapped(), t)
	before, err := o.Get(b.Store, b.Ctx, b.Other.ID, *o.Fields(theirs).ID)
	Must(t, err)
	for _, id := range []string{model.NewID(), *o.Fields(theirs).ID} {
		upd := o.Make(b, t)
		f := o.Fields(upd)
		*f.ID = id
		if f.Name != nil {
			*f.Name = b.Name("renamed")
		}
		WantErr(t, o.Update(b.Store, b.Ctx, upd), store.ErrNotFound)
	}
	after, err := o.Get(b.Store, b.Ctx, b.Other.ID, *o.Fields(theirs).ID)
	Must(t, err)
	CheckEqual(t, "another tenant's "+o.Noun+" after the refused update", after, before)
}

// checkNameTaken creates and renames objects to a name taken in b.Tenant,
// then creates one of that name in b.Other.
func (o Owned[E]) checkNameTaken(t *testing.T, b *Bundle) {
	taken := *o.Fields(o.Make(b, t)).Name
	dup := o.Make(b, t)
	again := *dup
	f := o.Fields(&again)
	*f.ID, *f.Name = model.NewID(), taken
	WantErr(t, o.Create(b.Store, b.Ctx, &again), store.ErrConflict)
	if o.Update != nil {
		*o.Fields(dup).Name = taken
		WantErr(t, o.Update(b.Store, b.Ctx, dup), store.ErrConflict)
	}
	o.Make(b.Swapped(), t, func(e *E) { *o.Fields(e).Name = taken })
}

// checkDelete deletes an object of b.Tenant, refusing the ID of another
// tenant's and, once gone, the object's own.
func (o Owned[E]) checkDelete(t *testing.T, b *Bundle) {
	mine, theirs := o.Fields(o.Make(b, t)), o.Fields(o.Make(b.Swapped(), t))
	WantErr(t, o.Delete(b.Store, b.Ctx, b.Tenant.ID, *theirs.ID), store.ErrNotFound)
	Must(t, o.Delete(b.Store, b.Ctx, b.Tenant.ID, *mine.ID))
	_, err := o.Get(b.Store, b.Ctx, b.Tenant.ID, *mine.ID)
	WantErr(t, err, store.ErrNotFound)
	WantErr(t, o.Delete(b.Store, b.Ctx, b.Tenant.ID, *mine.ID), store.ErrNotFound)
	_, err = o.Get(b.Store, b.Ctx, b.Other.ID, *theirs.ID)
	Must(t, err)
}
