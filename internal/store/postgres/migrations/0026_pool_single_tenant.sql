-- A pool whose tasks need not be kept apart on a host (estate
-- singleTenant): a bare-metal worker whose tasks share one user then runs
-- tasks of different projects side by side (docs/worker.md).
ALTER TABLE pools ADD COLUMN single_tenant BOOLEAN NOT NULL DEFAULT FALSE;
