-- Worker daemons (PostgreSQL): credentials, registrations, claims with leases, logs,
-- metrics, and the vault of secrets injected into tasks.

CREATE TABLE worker_credentials (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	pool_id TEXT COLLATE "C" NOT NULL,
	name TEXT NOT NULL,
	prefix TEXT NOT NULL,
	hash BYTEA NOT NULL,
	created_by TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX worker_credentials_hash ON worker_credentials (hash);
CREATE INDEX worker_credentials_pool ON worker_credentials (tenant_id, pool_id);

CREATE TABLE workers (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	pool_id TEXT COLLATE "C" NOT NULL,
	credential_id TEXT NOT NULL,
	hostname TEXT COLLATE "C" NOT NULL,
	version TEXT NOT NULL,
	mode TEXT NOT NULL,
	kind TEXT NOT NULL,
	gpus TEXT NOT NULL,
	registered_at BIGINT NOT NULL,
	last_heartbeat_at BIGINT NOT NULL,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX workers_host ON workers (tenant_id, pool_id, hostname);

ALTER TABLE tasks ADD COLUMN worker_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN attempt BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN lease_expires_at BIGINT;
ALTER TABLE tasks ADD COLUMN retries BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN started_at BIGINT;
ALTER TABLE tasks ADD COLUMN exit_code BIGINT;
ALTER TABLE tasks ADD COLUMN outputs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN log_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN log_truncated BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN metric_seq BIGINT NOT NULL DEFAULT 0;
-- A pool's hidden queue, in the order workers claim from it.
CREATE INDEX tasks_pool_queue ON tasks (tenant_id, pool_id, status, placed_at, queue_seq);
CREATE INDEX tasks_leases ON tasks (status, lease_expires_at);

CREATE TABLE task_logs (
	tenant_id TEXT COLLATE "C" NOT NULL,
	task_id TEXT COLLATE "C" NOT NULL,
	seq BIGINT NOT NULL,
	attempt BIGINT NOT NULL,
	at BIGINT NOT NULL,
	stream TEXT NOT NULL,
	line TEXT NOT NULL,
	PRIMARY KEY (tenant_id, task_id, seq)
);

CREATE TABLE task_metrics (
	tenant_id TEXT COLLATE "C" NOT NULL,
	task_id TEXT COLLATE "C" NOT NULL,
	seq BIGINT NOT NULL,
	attempt BIGINT NOT NULL,
	at BIGINT NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	value DOUBLE PRECISION NOT NULL,
	step BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, task_id, seq)
);
CREATE INDEX task_metrics_name ON task_metrics (tenant_id, task_id, name, seq);

CREATE TABLE secrets (
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	scope TEXT COLLATE "C" NOT NULL,
	scope_id TEXT COLLATE "C" NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	ciphertext BYTEA NOT NULL,
	updated_by TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (tenant_id, scope, scope_id, name)
);
