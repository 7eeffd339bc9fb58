-- The audit page filters by target (`user:alice`); with id last, the newest-first page is read
-- straight off the index instead of scanning the log.
CREATE INDEX audit_log_target ON audit_log (target_kind, target_id, id);
