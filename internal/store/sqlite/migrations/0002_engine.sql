-- The compute policy engine and the usage ledger (SQLite).

-- placements is the usage ledger of GPU time: one row per interval a task
-- held capacity on a pool, opened with the placement and closed with its
-- release in the same transactions. Names are copied at placement so the
-- ledger reads the same after objects change; ids are copies, not
-- references, for the same reason.
CREATE TABLE placements (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	task_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	user_name TEXT NOT NULL,
	project_id TEXT NOT NULL,
	project_name TEXT NOT NULL,
	group_id TEXT NOT NULL,
	group_name TEXT NOT NULL,
	policy_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	profile_name TEXT NOT NULL,
	compute_resource_id TEXT NOT NULL,
	compute_resource_name TEXT NOT NULL,
	pool_id TEXT NOT NULL,
	pool_name TEXT NOT NULL,
	gpu_class_id TEXT NOT NULL,
	gpu_class_name TEXT NOT NULL,
	size_milli INTEGER NOT NULL,
	weight_milli INTEGER NOT NULL,
	price_micros INTEGER NOT NULL,
	currency TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at INTEGER,
	end_reason TEXT NOT NULL
) STRICT;
-- At most one open interval per task.
CREATE UNIQUE INDEX placements_open ON placements (tenant_id, task_id) WHERE ended_at IS NULL;
CREATE INDEX placements_task ON placements (tenant_id, task_id, started_at);
CREATE INDEX placements_started ON placements (tenant_id, started_at);
CREATE INDEX placements_policy ON placements (tenant_id, policy_id, started_at);

-- queue_states holds why each compute resource's head waits, as the last
-- pass found it; rows go when nothing waits.
CREATE TABLE queue_states (
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	compute_resource_id TEXT NOT NULL,
	task_id TEXT NOT NULL,
	constraint_code TEXT NOT NULL,
	reason TEXT NOT NULL,
	until_at INTEGER,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, compute_resource_id)
) STRICT;

-- engine_pauses are the intervals an admin had a tenant's engine disabled.
CREATE TABLE engine_pauses (
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	started_at INTEGER NOT NULL,
	ended_at INTEGER,
	by_user_id TEXT NOT NULL,
	by_name TEXT NOT NULL,
	PRIMARY KEY (tenant_id, started_at)
) STRICT;
CREATE UNIQUE INDEX engine_pauses_open ON engine_pauses (tenant_id) WHERE ended_at IS NULL;

-- leases let one replica at a time run a job (the engine pass).
CREATE TABLE leases (
	name TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT;

-- estate_versions counts changes to each tenant's allocation model, so that
-- readers can keep the model in memory and reload it only when it changed.
CREATE TABLE estate_versions (
	tenant_id TEXT PRIMARY KEY REFERENCES tenants (id) ON DELETE RESTRICT,
	version INTEGER NOT NULL
) STRICT;
