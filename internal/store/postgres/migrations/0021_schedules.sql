-- Tags on tasks (klique enqueue --tag), a JSON list: a trigger fires when
-- a task of a project completes with a tag.
ALTER TABLE tasks ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
CREATE INDEX tasks_finished ON tasks (tenant_id, project_id, finished_at) WHERE finished_at IS NOT NULL;
