-- The app catalogue of a tenant (its own entries, its overrides of the
-- built-ins, and its launch rules), kept as one JSON document: it is read
-- and changed whole, with the estate.
CREATE TABLE app_catalogues (
	tenant_id TEXT COLLATE "C" PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
	doc TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
