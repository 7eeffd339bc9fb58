-- Four-eyes covers the cause (issue 14). A restore headroom proposes is computed from its
-- fleet's settings, so whoever set them must not approve it alone: that needs to know who last
-- changed each setting, and as of when the proposal was filed.

-- Every create, update and delete of a fleet: who, when, and each field changed with its value
-- before and after (the spec holds secret references, never values, so it is recorded whole).
-- Keyed by the fleet's name, not its row: the history outlives a delete, and a fleet created
-- again under the same name continues it (so a delete-and-recreate shows).
CREATE TABLE fleet_changes (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    fleet   TEXT    NOT NULL,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL CHECK (kind IN ('created', 'updated', 'deleted', 'baseline')),
    -- JSON object: field name → {"before": …, "after": …} (null before a create, after a delete).
    changes TEXT    NOT NULL
);
CREATE INDEX fleet_changes_by_fleet ON fleet_changes (fleet, id);

-- Fleets stored before this migration: who changed which field is unknown, so their last
-- changer is taken to have set every field (the strict reading for four-eyes).
INSERT INTO fleet_changes (fleet, at, actor, kind, changes)
    SELECT f.name, f.updated_at, f.updated_by, 'baseline',
           (SELECT json_group_object(e.key, json_object('before', NULL, 'after', e.value))
              FROM json_each(f.spec) AS e)
      FROM fleets AS f ORDER BY f.id;

-- Who last changed each fleet setting a request was computed from, as of its filing (read
-- from `fleet_changes` in the filing's own transaction). Approving a proposal filed by
-- `system` is refused to anyone named here.
CREATE TABLE provision_causes (
    provision_id INTEGER NOT NULL REFERENCES provisions (id) ON DELETE CASCADE,
    field        TEXT    NOT NULL,
    changed_by   TEXT    NOT NULL,
    changed_at   INTEGER NOT NULL,
    PRIMARY KEY (provision_id, field)
) WITHOUT ROWID;

-- Proposals awaiting approval at the upgrade: their fleet's last changer, for every setting.
INSERT INTO provision_causes (provision_id, field, changed_by, changed_at)
    SELECT p.id, c.field, f.updated_by, f.updated_at
      FROM provisions AS p
      JOIN fleets AS f ON f.name = p.fleet
      CROSS JOIN (SELECT 'endpoints' AS field UNION ALL SELECT 'required_override'
                  UNION ALL SELECT 'restore_machine_config' UNION ALL SELECT 'approvals_required'
                  UNION ALL SELECT 'approval_ttl_hours' UNION ALL SELECT 'max_restore_machines'
                  UNION ALL SELECT 'secrets') AS c
     WHERE p.requester = 'system' AND p.state = 'pending_approval';
