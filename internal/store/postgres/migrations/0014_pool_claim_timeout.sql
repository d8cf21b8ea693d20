-- A pool's claim timeout in milliseconds (model.Pool.ClaimTimeout): how
-- long placed work waits for a worker of the pool while none is online
-- before it goes back to its compute resource. NULL takes the default
-- (off with an autoscaler, 5 minutes otherwise); 0 turns it off.
ALTER TABLE pools ADD COLUMN claim_timeout_ms BIGINT;
