package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/klique-ai/klique/internal/identity"
)

// The operation runner. Every mutation of the platform does the same
// things around its own rule: find the caller, check the right it needs,
// answer a retry with the first result (idempotency keys), run its change
// in one transaction, write one audit entry with the change, and publish
// the change's events only once it has committed. Op states those things
// as one value and Run does them, in that order, in one place; a domain
// writes only the rule (Op.Check, Op.Body).
//
//	task, err := kernel.Run(ctx, k, kernel.Op[*model.Task]{
//		Name: "enqueueTask", Right: kernel.RightWrite, What: "enqueue tasks",
//		IdempotencyKey: in.IdempotencyKey, Request: in,
//		Body: func(t *kernel.Txn) (*model.Task, kernel.Audit, error) {
//			task := ...; err := t.Q.CreateTask(t.Ctx, task)
//			return task, kernel.Audit{Action: "task.enqueued", Kind: "task", ID: task.ID, Name: task.Name}, err
//		},
//		ResultID: func(t *model.Task) string { return t.ID },
//		Replay:   s.Task,
//	})

// Right is what an operation needs of its caller.
type Right int

const (
	// RightRead: any signed-in caller (a viewer included), such as a
	// change to one's own API keys.
	RightRead Right = iota
	// RightWrite: anyone but a viewer.
	RightWrite
	// RightAdmin: an unscoped tenant admin.
	RightAdmin
	// RightPlatformAdmin: an unscoped platform admin.
	RightPlatformAdmin
)

// Require refuses p when it lacks r; what completes the refusal ("only a
// tenant admin can <what>").
func (r Right) Require(p *identity.Principal, what string) error {
	switch r {
	case RightRead:
		return nil
	case RightWrite:
		return RequireWrite(p, what)
	case RightAdmin:
		return RequireAdmin(p, what)
	case RightPlatformAdmin:
		return RequirePlatformAdmin(p, what)
	}
	return fmt.Errorf("operation right %d is not a right", r)
}

// Audit is the one audit entry of an operation (Txn.Record's arguments):
// what was done, to which object, in which group, and a one-line detail.
// Its event is published after commit.
type Audit struct {
	Action, Kind, ID, Name, GroupID, Detail string
	Events                                  []EventOption
}

// Op is one mutation. Name, Right, What and Body are required.
type Op[Out any] struct {
	// Name names the operation ("runPipeline"): an idempotency key is
	// recorded under it, so a key reused for another operation is new.
	Name string
	// Right is what the caller needs; What is what it allows, for the
	// refusal ("run pipelines").
	Right Right
	What  string
	// Check runs after the right and before the transaction: the rules
	// that read only the input and the caller. Optional.
	Check func(p *identity.Principal) error
	// Prepare runs after a retry was answered and before the transaction:
	// the checks that read the store and would be wasted on a retry
	// (a retry answers the first result even when they would now fail).
	// Optional.
	Prepare func(p *identity.Principal) error
	// IdempotencyKey and Request make the operation idempotent: a retry
	// with the same key and request answers Replay(the first result's id)
	// instead of running Body again; the same key with another request is
	// a CONFLICT. Without a key (here or in the request's header), or
	// without ResultID and Replay, every call runs Body.
	IdempotencyKey string
	Request        any
	// ResultID is the id recorded with the key: what Replay finds.
	ResultID func(Out) string
	Replay   func(ctx context.Context, id string) (Out, error)
	// Body makes the change in the transaction t and returns the result
	// and the operation's audit entry. An error rolls back everything
	// (the change, the audit entry, the key) and publishes nothing.
	Body func(t *Txn) (Out, Audit, error)
	// Unaudited lets Body return the empty Audit and commit: a change
	// the audit trail does not keep (a local run's metrics and logs, an
	// idle warning cleared, the engine switched to the state it is in),
	// whose events Body queues with Txn.Publish. An entry it does return
	// is recorded.
	Unaudited bool
}

// Run runs op as the request's caller: the right, Check, the idempotency
// key (a retry answers here), Prepare, Body in one transaction with op's
// audit entry and key, and the events after commit.
func Run[Out any](ctx context.Context, k *Kernel, op Op[Out]) (Out, error) {
	var zero Out
	p, err := Caller(ctx)
	if err != nil {
		return zero, err
	}
	return RunAs(ctx, k, p, op)
}

// RunAs is Run with the caller given: a system actor (System) doing work
// of its own, or a principal the operation has already found.
func RunAs[Out any](ctx context.Context, k *Kernel, p *identity.Principal, op Op[Out]) (Out, error) {
	var zero Out
	var err error
	if op.Body == nil || op.Name == "" {
		return zero, k.Internal(ctx, fmt.Errorf("operation %q has no body or no name", op.Name))
	}
	if err := op.Right.Require(p, op.What); err != nil {
		return zero, err
	}
	if op.Check != nil {
		if err := op.Check(p); err != nil {
			return zero, err
		}
	}
	var idem *Idem
	if op.ResultID != nil && op.Replay != nil {
		if idem, err = Idempotency(ctx, p, op.Name, op.IdempotencyKey, op.Request); err != nil {
			return zero, err
		}
		if out, done, err := replay(ctx, k, idem, op); done {
			return out, err
		}
	}
	if op.Prepare != nil {
		if err := op.Prepare(p); err != nil {
			return zero, err
		}
	}
	var out Out
	err = k.Write(ctx, p, func(t *Txn) error {
		var a Audit
		var err error
		if out, a, err = op.Body(t); err != nil {
			return err
		}
		if a.Action == "" && !op.Unaudited {
			return fmt.Errorf("operation %s wrote no audit entry: its body must say what it did", op.Name)
		}
		if idem != nil {
			if err := t.RecordIdempotency(idem, op.ResultID(out)); err != nil {
				return err
			}
		}
		if a.Action != "" {
			t.Record(a.Action, a.Kind, a.ID, a.Name, a.GroupID, a.Detail, a.Events...)
		}
		return nil
	})
	if errors.Is(err, ErrIdempotencyRace) {
		// A retry with the same key committed first: answer as it.
		if out, done, rerr := replay(ctx, k, idem, op); done {
			return out, rerr
		}
	}
	if err != nil {
		return zero, err
	}
	return out, nil
}

// replay answers a retry: done when the key was used before, with the
// first result (or the CONFLICT of a key used for another request).
func replay[Out any](ctx context.Context, k *Kernel, idem *Idem, op Op[Out]) (Out, bool, error) {
	var zero Out
	id, err := k.Replay(ctx, idem)
	if err != nil {
		return zero, true, err
	}
	if id == "" {
		return zero, false, nil
	}
	out, err := op.Replay(ctx, id)
	return out, true, err
}
