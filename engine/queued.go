package engine

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

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
	// PoolID and PlacedAt are set for placed and running tasks.
	PoolID   string
	PlacedAt time.Time
}
