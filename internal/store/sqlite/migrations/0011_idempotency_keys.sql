-- The first request made with a client's idempotency key, per tenant, user
-- and operation: a retry with the key returns the object it created
-- (result_id) instead of creating another. Rows older than 24 hours are
-- pruned.
CREATE TABLE idempotency_keys (
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	user_id TEXT NOT NULL,
	operation TEXT NOT NULL,
	key TEXT NOT NULL,
	request_hash TEXT NOT NULL,
	result_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, user_id, operation, key)
) STRICT;
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
