-- The router's address rule (issue 39, defect 7): a direct dial to an app
-- instance reaches only the network its worker reports from, or networks
-- the estate declares for the pool; a pool declared local may report any
-- address (loopback included).
ALTER TABLE pools ADD COLUMN app_networks TEXT NOT NULL DEFAULT '[]';
ALTER TABLE pools ADD COLUMN app_local BOOLEAN NOT NULL DEFAULT FALSE;
-- What the platform decided when the address was reported: the networks a
-- direct dial may reach ('*' for a local pool), and why the address was
-- refused ('' when it was accepted).
ALTER TABLE tasks ADD COLUMN app_allow TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN app_refused TEXT NOT NULL DEFAULT '';
