-- Where an app instance's current attempt answers on its health path
-- (host:port as reachable from its worker's site), as its worker reports it
-- in heartbeats; empty while it is not ready (and for every other task).
ALTER TABLE tasks ADD COLUMN app_address TEXT NOT NULL DEFAULT '';
