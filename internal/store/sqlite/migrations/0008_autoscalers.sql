-- Cloud autoscalers: one per pool at most. The spec (instance types,
-- maximum, timeouts, market, the names of vault secrets with provider
-- credentials) and the status the daemon last reported (its instances)
-- are JSON documents: they are read and written whole.
CREATE TABLE autoscalers (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	pool_id TEXT NOT NULL,
	name TEXT NOT NULL,
	spec TEXT NOT NULL,
	status TEXT NOT NULL DEFAULT '{}',
	created_by TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	last_heartbeat_at INTEGER,
	FOREIGN KEY (tenant_id, pool_id) REFERENCES pools (tenant_id, id) ON DELETE CASCADE
) STRICT;
CREATE UNIQUE INDEX autoscalers_pool ON autoscalers (tenant_id, pool_id);
CREATE UNIQUE INDEX autoscalers_name ON autoscalers (tenant_id, name);
