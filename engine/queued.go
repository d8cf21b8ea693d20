package engine

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// QueueKey is the task's place in its queue as one number: the snapshot's
// Seq, which orders a queue's waiting tasks and compares a task the pass
// sends back with the queue's head.
func (t SchedTask) QueueKey() int64 { return model.QueueKey(t.QueueRank, t.QueueOrder) }

// SchedTask is a task as a pass reads it: where it waits or holds
// capacity, and how much. The loop reads them through its State (the
// store, through the allocation domain's adapter), so the engine and its
// loop name their inputs in their own types and import no store.
type SchedTask struct {
	ID                string
	Name              string
	ComputeResourceID string
	OwnerID           string
	ProjectID         string
	Status            model.TaskStatus
	Size              model.Size
	QueueSeq          int64
	// QueueRank and QueueOrder are its place in its queue: its project's
	// place in its team's project priority, then the order a lead may
	// change (model.Task has the rules). QueueKey folds them into the
	// snapshot's Seq.
	QueueRank  int
	QueueOrder int64
	// PoolID and PlacedAt are set for placed and running tasks.
	PoolID   string
	PlacedAt time.Time
}
