// Package workflow holds the SQL store's queries of what runs tasks for
// users over time: pipeline runs and their steps, schedules and their
// firings, studies and their trials, and the artifacts runs publish. Its
// Workflows is embedded in package sqlstore's queries, which is the
// store; see sqlstore's documentation for the conventions every query
// follows.
package workflow

import "github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"

// Workflows runs the workflow queries on a connection of the store.
type Workflows struct {
	*sqlbase.Q
}
