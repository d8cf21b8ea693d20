-- Klique schema, PostgreSQL.
--
-- Conventions (shared with the SQLite schema): times are BIGINT unix
-- microseconds, UTC; ids are TEXT; optional references are NULL when unset;
-- maps and lists are JSON text. Tenant objects refer to each other through
-- composite foreign keys on (tenant_id, id), so a reference can never cross
-- tenants; every table that is referenced that way has UNIQUE (tenant_id, id).
-- Name columns use the "C" collation so that lists sort by bytes, as on
-- SQLite, and both drivers page through names in the same order. No name is
-- schema-qualified: the connection's search_path picks the schema.

-- Counters behind task queue order and audit order. nextval never hands out a
-- value twice, also across concurrent transactions.
CREATE SEQUENCE task_queue_seq;
CREATE SEQUENCE audit_seq;

CREATE TABLE tenants (
	id TEXT COLLATE "C" PRIMARY KEY,
	name TEXT COLLATE "C" NOT NULL UNIQUE,
	display_name TEXT NOT NULL,
	created_at BIGINT NOT NULL
);

CREATE TABLE users (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	display_name TEXT NOT NULL,
	email TEXT NOT NULL,
	role TEXT NOT NULL,
	service BOOLEAN NOT NULL,
	external_id TEXT NOT NULL,
	disabled BOOLEAN NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
);
-- Users without SSO all have external_id ''.
CREATE UNIQUE INDEX users_external_id ON users (tenant_id, external_id) WHERE external_id <> '';

CREATE TABLE groups (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
);

CREATE TABLE memberships (
	tenant_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	role TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	-- tenant_id leads the key so that an upsert from another tenant cannot
	-- land on this row: it inserts, and its foreign keys fail.
	PRIMARY KEY (tenant_id, group_id, user_id),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX memberships_user ON memberships (tenant_id, user_id);

CREATE TABLE gpu_classes (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	memory_gb BIGINT NOT NULL,
	price_micros BIGINT NOT NULL,
	currency TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name)
);

CREATE TABLE pools (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	kind TEXT NOT NULL,
	capacity_gpus BIGINT NOT NULL,
	gpu_class_id TEXT,
	gpu_memory_gb BIGINT NOT NULL,
	region TEXT NOT NULL,
	labels TEXT NOT NULL,        -- JSON object
	profile_order TEXT NOT NULL, -- JSON array of profile ids
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, gpu_class_id) REFERENCES gpu_classes (tenant_id, id) ON DELETE RESTRICT
);
CREATE INDEX pools_gpu_class ON pools (tenant_id, gpu_class_id);

CREATE TABLE profiles (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	size_nodes BIGINT NOT NULL,
	size_per_node_milli BIGINT NOT NULL,
	size_parameter TEXT NOT NULL,
	gpu_class_id TEXT,
	min_gpu_memory_gb BIGINT NOT NULL,
	time_weight_milli BIGINT NOT NULL,
	queuing_order TEXT NOT NULL, -- JSON array of policy ids
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, gpu_class_id) REFERENCES gpu_classes (tenant_id, id) ON DELETE RESTRICT
);
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
);
CREATE INDEX profile_pools_profile ON profile_pools (tenant_id, profile_id, rank);
CREATE INDEX profile_pools_pool ON profile_pools (tenant_id, pool_id);

CREATE TABLE policies (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	group_id TEXT NOT NULL,
	reservation_gpus BIGINT NOT NULL,
	limit_gpus BIGINT NOT NULL,
	budget_milli_hours BIGINT, -- NULL: no time budget
	budget_period TEXT,
	low_watermark_us BIGINT NOT NULL,
	alert_threshold_percent BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, group_id),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE RESTRICT
);

CREATE TABLE compute_resources (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	policy_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (policy_id, profile_id),
	UNIQUE (policy_id, name),
	FOREIGN KEY (tenant_id, policy_id) REFERENCES policies (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (tenant_id, profile_id) REFERENCES profiles (tenant_id, id) ON DELETE RESTRICT
);
CREATE INDEX compute_resources_policy ON compute_resources (tenant_id, policy_id);
CREATE INDEX compute_resources_profile ON compute_resources (tenant_id, profile_id);

CREATE TABLE projects (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	name TEXT COLLATE "C" NOT NULL,
	description TEXT NOT NULL,
	group_id TEXT,
	output_destination TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	UNIQUE (tenant_id, id),
	UNIQUE (tenant_id, name),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE RESTRICT
);
CREATE INDEX projects_group ON projects (tenant_id, group_id);

-- A key scoped to a project keeps the project (RESTRICT): deleting it would
-- otherwise silently widen the key to every project.
CREATE TABLE api_keys (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	user_id TEXT NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	prefix TEXT NOT NULL,
	hash BYTEA NOT NULL,
	project_id TEXT,
	created_at BIGINT NOT NULL,
	expires_at BIGINT,
	last_used_at BIGINT,
	revoked_at BIGINT,
	FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);
CREATE INDEX api_keys_user ON api_keys (tenant_id, user_id, created_at);
CREATE INDEX api_keys_project ON api_keys (tenant_id, project_id);

-- compute_resource_id, policy_id, profile_id, group_id, pool_id and
-- cloned_from_id are copies for queries and history, not references: a
-- compute resource can be disconnected once no work waits or runs on it,
-- and its ended tasks keep its id.
CREATE TABLE tasks (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	project_id TEXT,
	owner_id TEXT NOT NULL,
	compute_resource_id TEXT NOT NULL,
	policy_id TEXT NOT NULL,
	profile_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	spec TEXT NOT NULL, -- JSON
	size_nodes BIGINT NOT NULL,
	size_per_node_milli BIGINT NOT NULL,
	status TEXT NOT NULL,
	reason TEXT NOT NULL,
	queue_seq BIGINT NOT NULL,
	pool_id TEXT NOT NULL,
	cloned_from_id TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	placed_at BIGINT,
	finished_at BIGINT,
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE RESTRICT,
	FOREIGN KEY (tenant_id, owner_id) REFERENCES users (tenant_id, id) ON DELETE RESTRICT
);
CREATE UNIQUE INDEX tasks_seq ON tasks (tenant_id, queue_seq);
CREATE INDEX tasks_queue ON tasks (tenant_id, compute_resource_id, status, queue_seq);
CREATE INDEX tasks_owner ON tasks (tenant_id, owner_id, queue_seq);
CREATE INDEX tasks_group ON tasks (tenant_id, group_id, status);
CREATE INDEX tasks_project ON tasks (tenant_id, project_id);

CREATE TABLE audit_log (
	seq BIGINT PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	at BIGINT NOT NULL,
	actor_id TEXT NOT NULL,
	actor_name TEXT NOT NULL,
	channel TEXT NOT NULL,
	action TEXT NOT NULL,
	object_kind TEXT NOT NULL,
	object_id TEXT NOT NULL,
	object_name TEXT NOT NULL,
	detail TEXT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);

CREATE TABLE settings (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
