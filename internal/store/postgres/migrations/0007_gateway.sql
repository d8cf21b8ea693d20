-- The LLM gateway's configuration of a tenant (providers, routes, models,
-- aliases, token budgets, rate limits, entitlements, guardrails), kept as
-- one JSON document: it is read and changed whole, with the estate.
CREATE TABLE gateway_configs (
	tenant_id TEXT COLLATE "C" PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
	doc TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
