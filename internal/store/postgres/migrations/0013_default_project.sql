-- A user's default project: the one their model calls and tasks are for when
-- they name none ('klique project use NAME'); '' when unset.
ALTER TABLE users ADD COLUMN default_project_id TEXT NOT NULL DEFAULT '';
