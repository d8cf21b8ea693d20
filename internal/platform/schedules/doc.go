// Package schedules starts tasks, pipelines and studies on a cron
// expression (UTC) or when an event happens, as the schedule's owner
// (docs/schedules.md).
//
// A schedule owns no compute: each firing goes through the ordinary
// governed path (a task clone is tasks.CloneTask; a pipeline run or a
// study is started by its own domain through a Starter), as the owner,
// so their policies, limits, budgets and the ledger apply. If the owner
// can no longer do it (disabled, out of the group, the compute resource
// closed to them), the schedule pauses with the reason.
//
// Exactly once across replicas: a firing has a key (the due time of a
// cron firing, the event of a trigger). The start is made with an
// idempotency key derived from it, so replicas that start it at once get
// the same run; then the firing is claimed by a conditional write (the
// next run moves on only from the due time it was read at) and recorded
// under its key, which is unique in the schedule. A pass that dies
// between the start and the claim starts the same run again on its next
// pass, which the idempotency key answers with the first run.
//
// TickSchedules is the periodic pass: the source of truth, run on the replica that
// runs the engine. Events (a task completing) only make it run sooner.
package schedules
