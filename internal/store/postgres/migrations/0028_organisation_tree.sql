-- The organisation tree (docs/estate.md, "Departments"): a group is a team
-- ('team', every group before this) or a department, and sits in the
-- department parent_id names ('' for directly under the tenant). The estate
-- validator keeps parents whole (no foreign key: a file may create a
-- department after the groups that name it in one change). A resource
-- policy gains its weight among siblings; 0 is the default, read as 1.
ALTER TABLE groups ADD COLUMN kind TEXT NOT NULL DEFAULT 'team';
ALTER TABLE groups ADD COLUMN parent_id TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX groups_parent ON groups (tenant_id, parent_id);
ALTER TABLE policies ADD COLUMN weight BIGINT NOT NULL DEFAULT 0;
