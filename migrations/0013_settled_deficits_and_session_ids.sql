-- Two durability fixes (issue 9, carried over from its closing note).

-- 1. A deficit that was left is settled after the sample's commit (its proposal, if nobody
-- approved it yet, is superseded and `fleet.deficit_left` is sent). A crash or an error in
-- between used to leave it unsettled for good; `settled_at` records the settlement so
-- `deficit::resume` finds and finishes the ones left over. Deficits that ended before this
-- migration are taken as settled (their settlement ran or cannot be told apart now; doing it
-- again could send a second webhook).
ALTER TABLE fleet_deficits ADD COLUMN settled_at INTEGER;
UPDATE fleet_deficits SET settled_at = ended_at WHERE ended_at IS NOT NULL;
-- Normally empty: the rows `resume` looks for, read without touching any other deficit.
CREATE INDEX fleet_deficits_unsettled ON fleet_deficits (id)
    WHERE ended_at IS NOT NULL AND settled_at IS NULL;

-- 2. Session ids are never reused. SQLite hands out the highest id + 1, so a session deleted
-- by another process (the CLI disabling a user) could see its id taken by a new session
-- while this server still held the old row in its one-second cache; a logout, flash or
-- expiry acting on that id would then have touched the newcomer's session. AUTOINCREMENT
-- never reuses an id. The rows are kept (nobody is signed out by the upgrade).
CREATE TABLE sessions_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash   TEXT    NOT NULL UNIQUE,
    user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    flash        TEXT
);
INSERT INTO sessions_new (id, token_hash, user_id, created_at, last_seen_at, flash)
    SELECT id, token_hash, user_id, created_at, last_seen_at, flash FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_user ON sessions (user_id);
