// Package work is the part of the store conformance suite (package
// storetest) on what happens on an estate over time: tasks, the engine's
// placements and ledger, workers, autoscalers, the gateway's model calls
// and the audit trail; and on the store as a whole (transactions, locks,
// settings), whose lock tests lean on tasks. Exercise runs it; each
// function here is one group of subtests.
package work
