-- Pipelines (docs/pipelines.md). A run carries the definition it runs
-- (JSON) and its parameter values; its steps are rows of pipeline_steps,
-- each advanced by the controller with conditional writes (WHERE state =
-- ... AND attempts = ...), so two replicas never both move a step.
-- pipeline_tasks says which run's step (and attempt) made a task.
CREATE TABLE pipeline_runs (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	project_id TEXT NOT NULL,
	group_id TEXT NOT NULL DEFAULT '',
	owner_id TEXT NOT NULL,
	name TEXT NOT NULL,
	definition TEXT NOT NULL,
	params TEXT NOT NULL DEFAULT '{}',
	state TEXT NOT NULL,
	reason TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	finished_at INTEGER
) STRICT;
CREATE UNIQUE INDEX pipeline_runs_tenant_id ON pipeline_runs (tenant_id, id);
CREATE INDEX pipeline_runs_project ON pipeline_runs (tenant_id, project_id, created_at);
CREATE INDEX pipeline_runs_active ON pipeline_runs (tenant_id, state);

CREATE TABLE pipeline_steps (
	tenant_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	name TEXT NOT NULL,
	position INTEGER NOT NULL,
	state TEXT NOT NULL,
	compute_resource_id TEXT NOT NULL DEFAULT '',
	task_id TEXT NOT NULL DEFAULT '',
	task_ids TEXT NOT NULL DEFAULT '[]',
	attempts INTEGER NOT NULL DEFAULT 0,
	cache_key TEXT NOT NULL DEFAULT '',
	cached_from_run_id TEXT NOT NULL DEFAULT '',
	reason TEXT NOT NULL DEFAULT '',
	started_at INTEGER,
	finished_at INTEGER,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, run_id, name),
	FOREIGN KEY (tenant_id, run_id) REFERENCES pipeline_runs (tenant_id, id) ON DELETE CASCADE
) STRICT;
-- The step cache: a completed step of the same name with the same key.
CREATE INDEX pipeline_steps_cache ON pipeline_steps (tenant_id, name, cache_key);

CREATE TABLE pipeline_tasks (
	tenant_id TEXT NOT NULL,
	task_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	step TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, task_id),
	FOREIGN KEY (tenant_id, run_id) REFERENCES pipeline_runs (tenant_id, id) ON DELETE CASCADE
) STRICT;
