-- Fleets, provision requests with their plans, approvals, per-machine progress and timeline,
-- and the webhook outbox. Secrets are never stored: fleets keep only where each one is read.

CREATE TABLE fleets (
    id                     INTEGER PRIMARY KEY,
    name                   TEXT    NOT NULL UNIQUE,
    -- JSON of the whole FleetSpec (endpoints, policy, secret sources): read and written whole.
    spec                   TEXT    NOT NULL,
    restore_machine_config TEXT    NOT NULL,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    updated_by             TEXT    NOT NULL
);

CREATE TABLE provisions (
    id               INTEGER PRIMARY KEY,
    fleet            TEXT    NOT NULL,
    machine_config   TEXT    NOT NULL,
    config_version   INTEGER NOT NULL,
    template         TEXT    NOT NULL,
    template_version INTEGER NOT NULL,
    count            INTEGER NOT NULL CHECK (count BETWEEN 1 AND 20),
    reason           TEXT    NOT NULL,
    requester        TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('pending_approval', 'approved', 'executing',
                         'succeeded', 'failed', 'rejected', 'expired', 'cancelled', 'superseded')),
    -- Why it is in its state, for people (rejection reason, failure, what superseded it).
    state_reason     TEXT    NOT NULL DEFAULT '',
    -- JSON of the plan: machines (name, sha256, size, findings), cost, approvals policy.
    plan             TEXT    NOT NULL,
    plan_hash        TEXT    NOT NULL,
    approvals_required INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- When the approval window closes (set when the request is created, from the fleet's TTL).
    expires_at       INTEGER NOT NULL,
    approved_at      INTEGER,
    finished_at      INTEGER
);
CREATE INDEX provisions_by_state ON provisions (state, id);
CREATE INDEX provisions_by_fleet ON provisions (fleet, id);
CREATE INDEX provisions_by_config ON provisions (machine_config, id);
CREATE INDEX provisions_by_requester ON provisions (requester, id);
CREATE INDEX provisions_by_created ON provisions (created_at, id);

CREATE TABLE provision_approvals (
    provision_id INTEGER NOT NULL REFERENCES provisions (id),
    approver     TEXT    NOT NULL,
    -- The plan this approval was given for: a different plan voids it.
    plan_hash    TEXT    NOT NULL,
    approved_at  INTEGER NOT NULL,
    PRIMARY KEY (provision_id, approver)
);
CREATE INDEX provision_approvals_by_approver ON provision_approvals (approver, provision_id);

CREATE TABLE provision_machines (
    provision_id     INTEGER NOT NULL REFERENCES provisions (id),
    idx              INTEGER NOT NULL,
    name             TEXT    NOT NULL,
    sha256           TEXT    NOT NULL,
    size_bytes       INTEGER NOT NULL,
    -- The payload with secrets replaced by «redacted»; its sha256 above is of the real bytes.
    redacted_payload TEXT    NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN ('planned', 'creating', 'booting',
                         'created', 'failed', 'destroyed')),
    server_id        INTEGER,
    action_id        INTEGER,
    ipv4             TEXT,
    provider_status  TEXT,
    error            TEXT,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (provision_id, idx)
);
CREATE UNIQUE INDEX provision_machines_name ON provision_machines (name);

-- The timeline: state changes, every provider call and its (secret-free) answer.
CREATE TABLE provision_events (
    id           INTEGER PRIMARY KEY,
    provision_id INTEGER NOT NULL REFERENCES provisions (id),
    at           INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    machine      TEXT,
    message      TEXT    NOT NULL,
    details      TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX provision_events_by_provision ON provision_events (provision_id, id);

-- Webhook outbox: written in the transaction of the change it reports, delivered after.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    event           TEXT    NOT NULL,
    provision_id    INTEGER,
    body            TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
