-- Bounds on deficit history (issue 9, after the attacker's pass).

-- A deficit entered within the proposal cool-down after the fleet's last proposal was
-- superseded by recovery files nothing at once: this is when its proposal becomes due (the
-- first sample at or after it files one if the deficit is still open). NULL: proposed at
-- once, or released for filing when it fell due; still set on an ended deficit: it ended
-- inside the cool-down and never filed (nor announced) anything.
ALTER TABLE fleet_deficits ADD COLUMN proposal_due_at INTEGER;

-- Retention deletes ended deficits by their end, across fleets, in batches: this index finds
-- exactly the old ones instead of walking every deficit kept. Open deficits (NULL) are never
-- deleted, so they are left out of it.
CREATE INDEX fleet_deficits_ended ON fleet_deficits (ended_at) WHERE ended_at IS NOT NULL;

-- Deleting a deficit makes SQLite look for status rows pointing at it (`ON DELETE SET NULL`):
-- without this index every deleted row would scan the whole status table.
CREATE INDEX fleet_status_open_deficit ON fleet_status (open_deficit_id);
