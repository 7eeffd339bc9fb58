-- Follow-up proposals (issue 9, review S3): a deficit that outlives its proposal (rejected,
-- expired, failed, cancelled, or a restore too small) files another one, recorded on the same
-- deficit.

-- Earlier requests of this deficit, oldest first (JSON array of ids, at most 100): the
-- deficit's `provision_id` is always its latest.
ALTER TABLE fleet_deficits ADD COLUMN earlier_provisions TEXT NOT NULL DEFAULT '[]';
-- Ok samples below required seen since the deficit's latest proposal finished (or was
-- refused): a follow-up is filed once this reaches `deficit_enter_samples`.
ALTER TABLE fleet_deficits ADD COLUMN followup_below INTEGER NOT NULL DEFAULT 0;
-- When the latest proposal was settled (filed, found open, or refused): the cool-down between
-- two proposals of one fleet counts from it. NULL until the first one.
ALTER TABLE fleet_deficits ADD COLUMN proposed_at INTEGER;
