-- Leases (issue 19): several instances on one database each do their share of the work once.
-- A request being executed names the instance executing it and until when that claim holds
-- (renewed while it works); another instance resumes it through the provision label only once
-- the claim has run out. Periodic jobs and fleet scrapes hold named leases in `leases`.
-- Twin of migrations/0024_leases.sql.
ALTER TABLE provisions ADD COLUMN runner_id TEXT;
ALTER TABLE provisions ADD COLUMN lease_until BIGINT;

CREATE TABLE leases (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    held_until BIGINT NOT NULL
);
