-- Artifacts (docs/experiments.md, "Artifacts and output destinations"):
-- the files and models a run published. A stored artifact's bytes are in
-- the control plane's artifact storage under storage_key; a pointer
-- artifact names where its bytes stay (pointer) and has no storage key.
-- A name is unique in its run: a later upload of the same name replaces
-- the row (the platform deletes the old one and its blob).
CREATE TABLE artifacts (
	id TEXT COLLATE "C" PRIMARY KEY,
	tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants (id) ON DELETE RESTRICT,
	task_id TEXT COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	name TEXT COLLATE "C" NOT NULL,
	size BIGINT NOT NULL,
	sha256 TEXT NOT NULL,
	content_type TEXT NOT NULL,
	pointer TEXT NOT NULL,
	storage_key TEXT NOT NULL,
	created_by TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX artifacts_task_name ON artifacts (tenant_id, task_id, name);

-- A pool's output destination: where tasks placed on it write outputs,
-- before their project's (empty: the project's).
ALTER TABLE pools ADD COLUMN output_destination TEXT NOT NULL DEFAULT '';
