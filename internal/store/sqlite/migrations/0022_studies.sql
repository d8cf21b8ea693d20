-- Hyperparameter searches (docs/studies.md). A study clones trials from a
-- base task; spec is its search space, strategy, objective and budget as
-- JSON. version is bumped by every write of the controller, which writes
-- only from the version it read, so two replicas never act on one pass.
CREATE TABLE studies (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	project_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	compute_resource_id TEXT NOT NULL,
	name TEXT NOT NULL,
	base_task_id TEXT NOT NULL,
	spec TEXT NOT NULL,
	state TEXT NOT NULL,
	reason TEXT NOT NULL,
	best_task_id TEXT NOT NULL,
	version INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	finished_at INTEGER,
	UNIQUE (tenant_id, id),
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (tenant_id, owner_id) REFERENCES users (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (base_task_id) REFERENCES tasks (id) ON DELETE RESTRICT
);
CREATE INDEX studies_project ON studies (tenant_id, project_id, created_at);
CREATE INDEX studies_state ON studies (state);

-- A study's trials: the link from a study to the tasks it made (task_id,
-- unique, so a task shows the trial that made it). (study_id, number) is
-- the key: two replicas suggesting the same trial collide on it, and only
-- one enqueues. task_id is NULL while the trial's task is being enqueued.
CREATE TABLE study_trials (
	tenant_id TEXT NOT NULL,
	study_id TEXT NOT NULL,
	number INTEGER NOT NULL,
	task_id TEXT,
	params TEXT NOT NULL,
	state TEXT NOT NULL,
	rung INTEGER NOT NULL,
	objective REAL,
	objective_step INTEGER NOT NULL,
	reason TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	ended_at INTEGER,
	PRIMARY KEY (study_id, number),
	FOREIGN KEY (tenant_id, study_id) REFERENCES studies (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE RESTRICT
);
CREATE UNIQUE INDEX study_trials_task ON study_trials (tenant_id, task_id);
