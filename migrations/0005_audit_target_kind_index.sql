-- A filter on the target kind alone (`target=user`) walks this index in id order, instead of
-- sorting every entry of that kind for each page (audit_log_target orders by target_id first).
CREATE INDEX audit_log_target_kind ON audit_log (target_kind, id);
