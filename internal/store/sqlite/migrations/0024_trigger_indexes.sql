-- Schedule triggers (docs/schedules.md): the schedules pass reads, every
-- few seconds, the artifacts of a name published in a time window
-- (artifact.published) and the runs of a pipeline that ended in one
-- (pipeline.finished). These indexes keep those reads to the window.
CREATE INDEX artifacts_published ON artifacts (tenant_id, name, created_at);
CREATE INDEX pipeline_runs_finished ON pipeline_runs (tenant_id, project_id, name, finished_at);
