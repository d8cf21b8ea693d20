-- The session idle limits (docs/apps.md, "Idle limits"). app_active_at is
-- when an app instance's current attempt was last used, coarsely (written
-- at most about once a minute): traffic through a router or the gateway,
-- or GPU or CPU use over the idle thresholds as its worker reports them.
-- Every replica writes it, so the one that sweeps sees all traffic.
-- app_warned_at is when the instance was warned that it will be stopped
-- (null: not warned), so the warning is given once. A claim clears both.
ALTER TABLE tasks ADD COLUMN app_active_at INTEGER;
ALTER TABLE tasks ADD COLUMN app_warned_at INTEGER;
