package server_test

// scheduleIsolationCases are the isolation cases of schedules: alice's
// schedule "nightly-fraud" of her task is hers (and her tenant admins');
// anyone else gets NOT_FOUND, and cannot schedule her task.
var scheduleIsolationCases = []isoCase{
	{field: "Query.schedules", as: otherAdmin, name: "sees none of tenant default's schedules",
		query: `{ schedules { id name targetId } }`, check: wantPlainList("schedules", []string{"name"})},
	{field: "Query.schedules", as: victor, name: "does not see alice's schedule",
		query: `{ schedules { id name targetId } }`, check: wantPlainList("schedules", []string{"name"})},
	{field: "Query.schedules", as: viewer, name: "does not see alice's schedule, though in her group",
		query: `{ schedules { id name } }`, check: wantPlainList("schedules", []string{"name"})},
	{field: "Query.schedule", as: otherAdmin, name: "cannot read alice's schedule",
		query: `query($id: ID!) { schedule(id: $id) { name cron } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Query.schedule", as: victor, name: "cannot read alice's schedule",
		query: `query($id: ID!) { schedule(id: $id) { name cron } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.createSchedule", as: otherAdmin, name: "cannot schedule alice's task",
		query: `mutation($t: ID!) { createSchedule(input: {name: "steal", task: $t, cron: "@daily"}) { id } }`,
		vars:  map[string]any{"t": ref("task")}, code: notFound},
	{field: "Mutation.createSchedule", as: victor, name: "cannot schedule alice's task",
		query: `mutation($t: ID!) { createSchedule(input: {name: "steal", task: $t, cron: "@daily"}) { id } }`,
		vars:  map[string]any{"t": ref("task")}, code: notFound},
	{field: "Mutation.createSchedule", as: victor, name: "cannot trigger on fraud-models's tasks",
		query: `mutation($t: ID!) { createSchedule(input: {name: "spy", task: $t, trigger: {event: "task.completed", project: "fraud-models", tag: "x"}}) { id } }`,
		vars:  map[string]any{"t": ref("task")}, code: notFound},
	{field: "Mutation.createSchedule", as: viewer, name: "may not create schedules",
		query: `mutation($t: ID!) { createSchedule(input: {name: "mine", task: $t, cron: "@daily"}) { id } }`,
		vars:  map[string]any{"t": ref("task")}, code: forbidden},
	{field: "Mutation.updateSchedule", as: otherAdmin, name: "cannot change alice's schedule",
		query: `mutation($id: ID!) { updateSchedule(id: $id, input: {cron: "* * * * *"}) { id } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.updateSchedule", as: victor, name: "cannot change alice's schedule",
		query: `mutation($id: ID!) { updateSchedule(id: $id, input: {cron: "* * * * *"}) { id } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.pauseSchedule", as: otherAdmin, name: "cannot pause alice's schedule",
		query: `mutation($id: ID!) { pauseSchedule(id: $id) { paused } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.pauseSchedule", as: victor, name: "cannot pause alice's schedule",
		query: `mutation($id: ID!) { pauseSchedule(id: $id) { paused } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.resumeSchedule", as: otherAdmin, name: "cannot resume alice's schedule",
		query: `mutation($id: ID!) { resumeSchedule(id: $id) { paused } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.resumeSchedule", as: victor, name: "cannot resume alice's schedule",
		query: `mutation($id: ID!) { resumeSchedule(id: $id) { paused } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.deleteSchedule", as: otherAdmin, name: "cannot delete alice's schedule",
		query: `mutation($id: ID!) { deleteSchedule(id: $id) { id } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.deleteSchedule", as: victor, name: "cannot delete alice's schedule",
		query: `mutation($id: ID!) { deleteSchedule(id: $id) { id } }`, vars: map[string]any{"id": ref("schedule")}, code: notFound},
	{field: "Mutation.deleteSchedule", as: viewer, name: "may not delete alice's schedule",
		query: `mutation($id: ID!) { deleteSchedule(id: $id) { id } }`, vars: map[string]any{"id": ref("schedule")}, code: forbidden},
	{field: "Query.scheduleMinimumInterval", as: otherAdmin, name: "reads its own tenant's minimum interval",
		query: `{ scheduleMinimumInterval }`, check: wantString("scheduleMinimumInterval", "1m")},
	{field: "Query.scheduleMinimumInterval", as: victor, name: "reads the tenant's minimum interval",
		query: `{ scheduleMinimumInterval }`, check: wantString("scheduleMinimumInterval", "1m")},
	{field: "Mutation.setScheduleMinimumInterval", as: otherAdmin, name: "sets its own tenant's minimum interval, not tenant default's",
		query: `mutation { setScheduleMinimumInterval(interval: "") }`, check: wantString("setScheduleMinimumInterval", "1m")},
	{field: "Mutation.setScheduleMinimumInterval", as: victor, name: "may not set the minimum interval",
		query: `mutation { setScheduleMinimumInterval(interval: "5m") }`, code: forbidden},
}

// wantString asserts that the answer's field at key is want.
func wantString(key, want string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		if got := str(res.Data, key); got != want {
			r.errorf("%s is %q, want %q", key, got, want)
		}
	}
}
