-- A team lead's rights (issue 32): the priority order of a team's projects,
-- and moving a waiting task in its compute resource's queue.
--
-- project_priorities is a team's ordered list of projects (position from
-- 0). A task's place in its queue is (queue_rank, queue_order, queue_seq):
-- queue_rank is its project's position in its team's list (65536, the
-- unlisted rank, when the project is not listed or the task has none), and
-- queue_order starts as queue_seq and changes only when a lead moves the
-- task. queue_seq itself stays the task's creation order, which task lists
-- and their cursors follow.
CREATE TABLE project_priorities (
	tenant_id TEXT NOT NULL,
	group_id TEXT NOT NULL,
	project_id TEXT NOT NULL,
	position INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, group_id, project_id),
	FOREIGN KEY (tenant_id, group_id) REFERENCES groups (tenant_id, id) ON DELETE CASCADE,
	FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX project_priorities_project ON project_priorities (tenant_id, project_id);

ALTER TABLE tasks ADD COLUMN queue_rank INTEGER NOT NULL DEFAULT 65536;
ALTER TABLE tasks ADD COLUMN queue_order BIGINT NOT NULL DEFAULT 0;
UPDATE tasks SET queue_order = queue_seq;
-- The engine reads each compute resource's first queued tasks in queue
-- order from this index, LIMIT rows per resource, as it read them by
-- queue_seq before.
CREATE INDEX tasks_queue_order ON tasks (tenant_id, compute_resource_id, status, queue_rank, queue_order, queue_seq);
