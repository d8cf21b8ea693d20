-- model_calls is the usage ledger of model tokens: one row per call through
-- the LLM gateway, keyed by the gateway's request id. Names are copied so
-- the ledger reads the same after renames, like placements.
CREATE TABLE model_calls (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	at BIGINT NOT NULL,
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
	stream BIGINT NOT NULL,
	input_tokens BIGINT NOT NULL,
	output_tokens BIGINT NOT NULL,
	cost_micros BIGINT NOT NULL,
	currency TEXT NOT NULL,
	latency_micros BIGINT NOT NULL,
	status BIGINT NOT NULL,
	outcome TEXT NOT NULL,
	guardrail TEXT NOT NULL
);
-- Budgets are summed per project (and user) over a period.
CREATE INDEX model_calls_project ON model_calls (tenant_id, project_id, at);
CREATE INDEX model_calls_at ON model_calls (tenant_id, at);
