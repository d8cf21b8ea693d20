-- Log lines are numbered by the worker within an attempt (agentapi.LogLine.N).
-- The highest number stored, and the attempt it belongs to, let a batch
-- that is sent again (its answer was lost) be stored once.
ALTER TABLE tasks ADD COLUMN log_received_attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN log_received INTEGER NOT NULL DEFAULT 0;
