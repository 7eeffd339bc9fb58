-- Leases (issue 19): several instances on one database each do their share of the work once.
-- A request being executed names the instance executing it and until when that claim holds
-- (renewed while it works); another instance resumes it through the provision label only once
-- the claim has run out. Periodic jobs and fleet scrapes hold named leases in `leases`.
-- Twin of migrations/postgres/0024_leases.sql.
ALTER TABLE provisions ADD COLUMN runner_id TEXT;
ALTER TABLE provisions ADD COLUMN lease_until INTEGER;

CREATE TABLE leases (
    -- What is leased: `scrape:<fleet>`, `job:<name>`.
    name       TEXT    PRIMARY KEY,
    -- The holding process: its instance name, `#`, its boot id.
    holder     TEXT    NOT NULL,
    -- Unix milliseconds at which the lease runs out unless renewed.
    held_until INTEGER NOT NULL
) WITHOUT ROWID;
