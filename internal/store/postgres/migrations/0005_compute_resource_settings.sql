-- How the tasks of a compute resource run: the image of tasks that name
-- none, environment variables (a JSON object) and extra container mounts in
-- Docker mode (a JSON array of docker -v specs).
ALTER TABLE compute_resources ADD COLUMN image TEXT NOT NULL DEFAULT '';
ALTER TABLE compute_resources ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE compute_resources ADD COLUMN mounts TEXT NOT NULL DEFAULT '[]';
