-- Klique schema, SQLite.
--
-- Conventions (shared with the PostgreSQL schema): times are INTEGER unix
-- microseconds, UTC; ids are TEXT; optional references are NULL when unset;
-- maps and lists are JSON text. Tenant objects refer to each other through
-- composite foreign keys on (tenant_id, id), so a reference can never cross
-- tenants; every table that is referenced that way has UNIQUE (tenant_id, id).
-- Tables are STRICT so a wrongly typed value fails instead of being stored.

-- Counters behind task queue order and audit order. Writes are serialised
-- (transactions begin IMMEDIATE), so an increment inside the writing
-- transaction is strictly increasing in commit order.
CREATE TABLE seqs (
	name TEXT PRIMARY KEY,
	value INTEGER NOT NULL
) STRICT;
INSERT INTO seqs (name, value) VALUES ('task_queue_seq', 0), ('audit_seq', 0);

CREATE TABLE tenants (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL UNIQUE,
	display_name TEXT NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE users (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	display_name TEXT NOT NULL,
	email TEXT NOT NULL,
	role TEXT NOT NULL,
	service INTEGER NOT NULL,
	external_id TEXT NOT NULL,
	disabled INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
) STRICT;
-- Users without SSO all have external_id ''.
CREATE UNIQUE INDEX users_external_id ON users (tenant_id, external_id) WHERE external_id <> '';

CREATE TABLE groups (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
) STRICT;

CREATE TABLE memberships (
	tenant_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	role TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	-- tenant_id leads the key so that an upsert from another tenant cannot
	-- land on this row: it inserts, and its foreign keys fail.
	PRIMARY KEY (tenant_id, group_id, user_id),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE INDEX memberships_user ON memberships (tenant_id, user_id);

CREATE TABLE gpu_classes (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	memory_gb INTEGER NOT NULL,
	price_micros INTEGER NOT NULL,
	currency TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
) STRICT;

CREATE TABLE pools (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	kind TEXT NOT NULL,
	capacity_gpus INTEGER NOT NULL,
	gpu_class_id TEXT,
	gpu_memory_gb INTEGER NOT NULL,
	region TEXT NOT NULL,
	labels TEXT NOT NULL,        -- JSON object
	profile_order TEXT NOT NULL, -- JSON array of profile ids
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, gpu_class_id) REFERENCES gpu_classes (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE INDEX pools_gpu_class ON pools (tenant_id, gpu_class_id);

CREATE TABLE profiles (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	size_nodes INTEGER NOT NULL,
	size_per_node_milli INTEGER NOT NULL,
	size_parameter TEXT NOT NULL,
	gpu_class_id TEXT,
	min_gpu_memory_gb INTEGER NOT NULL,
	time_weight_milli INTEGER NOT NULL,
	queuing_order TEXT NOT NULL, -- JSON array of policy ids
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, gpu_class_id) REFERENCES gpu_classes (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE INDEX profiles_gpu_class ON profiles (tenant_id, gpu_class_id);

-- A profile's pools, in placement order. Deleting a profile drops its links;
-- a linked pool cannot be deleted.
CREATE TABLE profile_pools (
	tenant_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	pool_id TEXT NOT NULL,
	rank INTEGER NOT NULL,
	PRIMARY KEY (profile_id, rank),
	UNIQUE (profile_id, pool_id),
	FOREIGN KEY (tenant_id, profile_id) REFERENCES profiles (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE INDEX profile_pools_profile ON profile_pools (tenant_id, profile_id, rank);
CREATE INDEX profile_pools_pool ON profile_pools (tenant_id, pool_id);

CREATE TABLE policies (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	group_id TEXT NOT NULL,
	reservation_gpus INTEGER NOT NULL,
	limit_gpus INTEGER NOT NULL,
	budget_milli_hours INTEGER, -- NULL: no time budget
	budget_period TEXT,
	low_watermark_us INTEGER NOT NULL,
	alert_threshold_percent INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, group_id),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE RESTRICT
) STRICT;

CREATE TABLE compute_resources (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	policy_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (policy_id, profile_id),
	UNIQUE (policy_id, name),
	FOREIGN KEY (tenant_id, policy_id) REFERENCES policies (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (tenant_id, profile_id) REFERENCES profiles (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE INDEX compute_resources_policy ON compute_resources (tenant_id, policy_id);
CREATE INDEX compute_resources_profile ON compute_resources (tenant_id, profile_id);

CREATE TABLE projects (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT NOT NULL,
	description TEXT NOT NULL,
	group_id TEXT,
	output_destination TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE INDEX projects_group ON projects (tenant_id, group_id);

-- A key scoped to a project keeps the project (RESTRICT): deleting it would
-- otherwise silently widen the key to every project.
CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	user_id TEXT NOT NULL,
	name TEXT NOT NULL,
	prefix TEXT NOT NULL,
	hash BLOB NOT NULL,
	project_id TEXT,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	last_used_at INTEGER,
	revoked_at INTEGER,
	FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);
CREATE INDEX api_keys_user ON api_keys (tenant_id, user_id, created_at);
CREATE INDEX api_keys_project ON api_keys (tenant_id, project_id);

-- compute_resource_id, policy_id, profile_id, group_id, pool_id and
-- cloned_from_id are copies for queries and history, not references: a
-- compute resource can be disconnected once no work waits or runs on it,
-- and its ended tasks keep its id.
CREATE TABLE tasks (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	project_id TEXT,
	owner_id TEXT NOT NULL,
	compute_resource_id TEXT NOT NULL,
	policy_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	name TEXT NOT NULL,
	spec TEXT NOT NULL, -- JSON
	size_nodes INTEGER NOT NULL,
	size_per_node_milli INTEGER NOT NULL,
	status TEXT NOT NULL,
	reason TEXT NOT NULL,
	queue_seq INTEGER NOT NULL,
	pool_id TEXT NOT NULL,
	cloned_from_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	placed_at INTEGER,
	finished_at INTEGER,
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (tenant_id, owner_id) REFERENCES users (tenant_id, id) ON DELETE RESTRICT
) STRICT;
CREATE UNIQUE INDEX tasks_seq ON tasks (tenant_id, queue_seq);
CREATE INDEX tasks_queue ON tasks (tenant_id, compute_resource_id, status, queue_seq);
CREATE INDEX tasks_owner ON tasks (tenant_id, owner_id, queue_seq);
CREATE INDEX tasks_group ON tasks (tenant_id, group_id, status);
CREATE INDEX tasks_project ON tasks (tenant_id, project_id);

CREATE TABLE audit_log (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	at INTEGER NOT NULL,
	actor_id TEXT NOT NULL,
	actor_name TEXT NOT NULL,
	channel TEXT NOT NULL,
	action TEXT NOT NULL,
	object_kind TEXT NOT NULL,
	object_id TEXT NOT NULL,
	object_name TEXT NOT NULL,
	detail TEXT NOT NULL
) STRICT;
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);

CREATE TABLE settings (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
