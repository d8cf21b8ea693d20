-- model_calls is the usage ledger of model tokens: one row per call through
-- the LLM gateway, keyed by the gateway's request id. Names are copied so
-- the ledger reads the same after renames, like placements.
CREATE TABLE model_calls (
	id TEXT PRIMARY KEY,
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	at INTEGER NOT NULL,
	user_id TEXT NOT NULL,
	user_name TEXT NOT NULL,
	project_id TEXT NOT NULL,
	project_name TEXT NOT NULL,
	group_id TEXT NOT NULL,
	group_name TEXT NOT NULL,
	endpoint TEXT NOT NULL,
	alias TEXT NOT NULL,
	model TEXT NOT NULL,
	target TEXT NOT NULL,
	stream INTEGER NOT NULL,
	input_tokens INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cost_micros INTEGER NOT NULL,
	currency TEXT NOT NULL,
	latency_micros INTEGER NOT NULL,
	status INTEGER NOT NULL,
	outcome TEXT NOT NULL,
	guardrail TEXT NOT NULL
) STRICT;
-- Budgets are summed per project (and user) over a period.
CREATE INDEX model_calls_project ON model_calls (tenant_id, project_id, at);
CREATE INDEX model_calls_at ON model_calls (tenant_id, at);
