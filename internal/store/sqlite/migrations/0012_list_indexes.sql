-- Every list is served by an index whose leading columns are the list's
-- equality filters and whose last column is the list's order, so a page
-- reads its rows in order and stops at its LIMIT: a list costs the same at a
-- million rows as at a thousand. sqlstore.ListTasks splits a member's
-- visibility rule (their groups' tasks or their own) and a status filter into
-- one index-ordered branch per group, owner and status (docs/performance.md,
-- "Task lists under load").

-- Tasks, newest first by queue_seq: a project (and its member's groups or
-- own tasks), a group, an owner, a status, a compute resource.
DROP INDEX tasks_project;
CREATE INDEX tasks_project ON tasks (tenant_id, project_id, queue_seq);
CREATE INDEX tasks_project_status ON tasks (tenant_id, project_id, status, queue_seq);
CREATE INDEX tasks_project_group ON tasks (tenant_id, project_id, group_id, queue_seq);
CREATE INDEX tasks_project_owner ON tasks (tenant_id, project_id, owner_id, queue_seq);
DROP INDEX tasks_group;
CREATE INDEX tasks_group ON tasks (tenant_id, group_id, status, queue_seq);
CREATE INDEX tasks_group_seq ON tasks (tenant_id, group_id, queue_seq);
CREATE INDEX tasks_owner_status ON tasks (tenant_id, owner_id, status, queue_seq);
CREATE INDEX tasks_status ON tasks (tenant_id, status, queue_seq);
CREATE INDEX tasks_compute_resource ON tasks (tenant_id, compute_resource_id, queue_seq);

-- The audit trail, newest first by seq: by actor, by object, by kind.
CREATE INDEX audit_log_actor ON audit_log (tenant_id, actor_id, seq);
CREATE INDEX audit_log_object ON audit_log (tenant_id, object_id, seq);
CREATE INDEX audit_log_kind ON audit_log (tenant_id, object_kind, seq);

-- Model calls, newest first by id: a tenant's, a project's, a user's.
CREATE INDEX model_calls_id ON model_calls (tenant_id, id);
CREATE INDEX model_calls_project_id ON model_calls (tenant_id, project_id, id);
CREATE INDEX model_calls_user_id ON model_calls (tenant_id, user_id, id);
