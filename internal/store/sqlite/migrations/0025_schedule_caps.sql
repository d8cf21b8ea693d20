-- Caps on schedules (issue 39, docs/schedules.md): a project holds at
-- most so many schedules, whoever owns them, so a schedule keeps the
-- project of what it starts. Those saved before are filled in from their
-- targets: a task's, a pipeline run's or a study's project.
ALTER TABLE schedules ADD COLUMN project_id TEXT NOT NULL DEFAULT '';
UPDATE schedules SET project_id = COALESCE((SELECT t.project_id FROM tasks t WHERE t.id = schedules.target_id), '')
	WHERE target_kind = 'task';
UPDATE schedules SET project_id = COALESCE((SELECT r.project_id FROM pipeline_runs r WHERE r.id = schedules.target_id), '')
	WHERE target_kind = 'pipeline';
UPDATE schedules SET project_id = COALESCE((SELECT s.project_id FROM studies s WHERE s.id = schedules.target_id), '')
	WHERE target_kind = 'study';
CREATE INDEX schedules_project ON schedules (tenant_id, project_id);
