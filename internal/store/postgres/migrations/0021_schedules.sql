-- Schedules and triggers (docs/schedules.md). A schedule starts a task,
-- pipeline or study as its owner, on a cron expression or an event. The
-- firing of a cron schedule is claimed by a conditional update of
-- next_run_at, so replicas running the pass at once fire it once;
-- parameters and trigger are JSON documents.
CREATE TABLE schedules (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	owner_id TEXT COLLATE "C" NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	target_kind TEXT NOT NULL,
	target_id TEXT COLLATE "C" NOT NULL,
	parameters TEXT NOT NULL DEFAULT '{}',
	cron TEXT NOT NULL DEFAULT '',
	trigger_doc TEXT NOT NULL DEFAULT '',
	missed_runs TEXT NOT NULL,
	paused BOOLEAN NOT NULL DEFAULT FALSE,
	paused_reason TEXT NOT NULL DEFAULT '',
	next_run_at BIGINT,
	last_run_at BIGINT,
	last_run_id TEXT NOT NULL DEFAULT '',
	last_result TEXT NOT NULL DEFAULT '',
	last_error TEXT NOT NULL DEFAULT '',
	checked_at BIGINT,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX schedules_owner_name ON schedules (tenant_id, owner_id, name);
CREATE INDEX schedules_next_run ON schedules (next_run_at) WHERE NOT paused;

-- Every firing of a schedule, once: key is the firing's due time or its
-- event (fire_key). What it started is run_id.
CREATE TABLE schedule_runs (
	tenant_id TEXT COLLATE "C" NOT NULL,
	schedule_id TEXT COLLATE "C" NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
	fire_key TEXT COLLATE "C" NOT NULL,
	target_kind TEXT NOT NULL,
	run_id TEXT COLLATE "C" NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (schedule_id, fire_key)
);
CREATE INDEX schedule_runs_run ON schedule_runs (tenant_id, run_id);
CREATE INDEX schedule_runs_at ON schedule_runs (schedule_id, at);

-- Tags on tasks (klique enqueue --tag), a JSON list: a trigger fires when
-- a task of a project completes with a tag.
ALTER TABLE tasks ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
CREATE INDEX tasks_finished ON tasks (tenant_id, project_id, finished_at) WHERE finished_at IS NOT NULL;
