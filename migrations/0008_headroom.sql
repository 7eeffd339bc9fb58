-- Headroom: what the scraper saw of each fleet, rolled up so a chart's cost follows its width,
-- the current view of each fleet, and every deficit with its restore proposal.

-- One row per scrape tick. A failed scrape is a row too (ok = 0, error set): a gap, never
-- "healthy". Kept raw for `samples_raw_hours`, then only the rollups remain.
CREATE TABLE fleet_samples (
    id          INTEGER PRIMARY KEY,
    fleet_id    INTEGER NOT NULL REFERENCES fleets(id) ON DELETE CASCADE,
    at          INTEGER NOT NULL,                 -- unix ms, when the tick started
    ok          INTEGER NOT NULL CHECK (ok IN (0, 1)),
    source      TEXT    NOT NULL CHECK (source IN ('native', 'derived', 'none')),
    spare       INTEGER,                          -- NULL unless ok
    required    INTEGER,                          -- NULL unless ok
    voters      INTEGER,
    learners    INTEGER,
    leader_id   INTEGER,
    term        INTEGER,
    latency_ms  INTEGER NOT NULL,
    error       TEXT,                             -- why the tick failed (coarse, for people)
    CHECK ((ok = 1 AND spare IS NOT NULL AND required IS NOT NULL AND error IS NULL)
        OR (ok = 0 AND error IS NOT NULL))
);
-- Every read is one fleet over a time range; retention deletes by time across fleets.
CREATE INDEX fleet_samples_fleet_at ON fleet_samples (fleet_id, at);
CREATE INDEX fleet_samples_at ON fleet_samples (at);

-- Per-minute (resolution 60) and per-hour (resolution 3600) summaries of the samples, written
-- with each sample (an upsert into both), so they are never behind the raw rows.
CREATE TABLE fleet_rollups (
    fleet_id      INTEGER NOT NULL REFERENCES fleets(id) ON DELETE CASCADE,
    resolution    INTEGER NOT NULL CHECK (resolution IN (60, 3600)),
    bucket        INTEGER NOT NULL,               -- unix ms of the bucket's start
    samples       INTEGER NOT NULL,
    ok_samples    INTEGER NOT NULL,
    spare_min     INTEGER,                        -- NULL while no ok sample fell in the bucket
    spare_max     INTEGER,
    spare_last    INTEGER,
    required_min  INTEGER,
    required_max  INTEGER,
    required_last INTEGER,
    last_at       INTEGER NOT NULL,               -- time of the newest sample in the bucket
    source_last   TEXT    NOT NULL,
    PRIMARY KEY (fleet_id, resolution, bucket)
) WITHOUT ROWID;
CREATE INDEX fleet_rollups_resolution_bucket ON fleet_rollups (resolution, bucket);

-- Every deficit a fleet entered: when it started (first sample below), when it was detected
-- (the threshold's sample), the restore it proposed and when it was left.
CREATE TABLE fleet_deficits (
    id           INTEGER PRIMARY KEY,
    fleet_id     INTEGER NOT NULL REFERENCES fleets(id) ON DELETE CASCADE,
    started_at   INTEGER NOT NULL,
    detected_at  INTEGER NOT NULL,
    spare        INTEGER NOT NULL,
    required     INTEGER NOT NULL,
    -- The restore request it filed; NULL when one was already open (then `note` says which)
    -- or when filing failed (then `note` says why).
    provision_id INTEGER REFERENCES provisions(id),
    note         TEXT    NOT NULL DEFAULT '',
    -- JSON: the leader's status body and the samples that crossed the threshold.
    evidence     TEXT    NOT NULL,
    ended_at     INTEGER,
    CHECK (ended_at IS NULL OR ended_at >= detected_at)
);
CREATE INDEX fleet_deficits_fleet_detected ON fleet_deficits (fleet_id, detected_at);
CREATE INDEX fleet_deficits_provision ON fleet_deficits (provision_id);

-- What the dashboard, /metrics and the fleet API show: one row per scraped fleet, replaced by
-- every sample, so reading "now" never scans history.
CREATE TABLE fleet_status (
    fleet_id        INTEGER PRIMARY KEY REFERENCES fleets(id) ON DELETE CASCADE,
    sampled_at      INTEGER NOT NULL,             -- the newest sample, ok or not
    ok              INTEGER NOT NULL CHECK (ok IN (0, 1)),
    source          TEXT    NOT NULL CHECK (source IN ('native', 'derived', 'none')),
    spare           INTEGER,                      -- from the newest ok sample
    required        INTEGER,
    ok_at           INTEGER,                      -- the newest ok sample
    leader_id       INTEGER,
    leader_url      TEXT,
    term            INTEGER,
    voters          INTEGER,
    learners        INTEGER,
    -- JSON array of {"id", "addr", "voter"} from the newest ok sample.
    members         TEXT    NOT NULL DEFAULT '[]',
    latency_ms      INTEGER NOT NULL,
    error           TEXT,
    -- The deficit tracker (see domain::headroom::DeficitTracker): consecutive ok samples below
    -- and at-or-above required, and the open deficit, if any.
    below_streak    INTEGER NOT NULL DEFAULT 0,
    healthy_streak  INTEGER NOT NULL DEFAULT 0,
    open_deficit_id INTEGER REFERENCES fleet_deficits(id) ON DELETE SET NULL
);
