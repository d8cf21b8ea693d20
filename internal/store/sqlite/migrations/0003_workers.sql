-- Worker daemons (SQLite): credentials, registrations, claims with leases, logs,
-- metrics, and the vault of secrets injected into tasks.

CREATE TABLE worker_credentials (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	pool_id TEXT NOT NULL,
	name TEXT NOT NULL,
	prefix TEXT NOT NULL,
	hash BLOB NOT NULL,
	created_by TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE UNIQUE INDEX worker_credentials_hash ON worker_credentials (hash);
CREATE INDEX worker_credentials_pool ON worker_credentials (tenant_id, pool_id);

CREATE TABLE workers (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	pool_id TEXT NOT NULL,
	credential_id TEXT NOT NULL,
	hostname TEXT NOT NULL,
	version TEXT NOT NULL,
	mode TEXT NOT NULL,
	kind TEXT NOT NULL,
	gpus TEXT NOT NULL,
	registered_at INTEGER NOT NULL,
	last_heartbeat_at INTEGER NOT NULL,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE UNIQUE INDEX workers_host ON workers (tenant_id, pool_id, hostname);

ALTER TABLE tasks ADD COLUMN worker_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN lease_expires_at INTEGER;
ALTER TABLE tasks ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN started_at INTEGER;
ALTER TABLE tasks ADD COLUMN exit_code INTEGER;
ALTER TABLE tasks ADD COLUMN outputs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN log_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN log_truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN metric_seq INTEGER NOT NULL DEFAULT 0;
-- A pool's hidden queue, in the order workers claim from it.
CREATE INDEX tasks_pool_queue ON tasks (tenant_id, pool_id, status, placed_at, queue_seq);
CREATE INDEX tasks_leases ON tasks (status, lease_expires_at);

CREATE TABLE task_logs (
	tenant_id TEXT NOT NULL,
	task_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	at INTEGER NOT NULL,
	stream TEXT NOT NULL,
	line TEXT NOT NULL,
	PRIMARY KEY (tenant_id, task_id, seq)
) STRICT;

CREATE TABLE task_metrics (
	tenant_id TEXT NOT NULL,
	task_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	attempt INTEGER NOT NULL,
	at INTEGER NOT NULL,
	name TEXT NOT NULL,
	value REAL NOT NULL,
	step INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, task_id, seq)
) STRICT;
CREATE INDEX task_metrics_name ON task_metrics (tenant_id, task_id, name, seq);

CREATE TABLE secrets (
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	scope TEXT NOT NULL,
	scope_id TEXT NOT NULL,
	name TEXT NOT NULL,
	ciphertext BLOB NOT NULL,
	updated_by TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, scope, scope_id, name)
) STRICT;
