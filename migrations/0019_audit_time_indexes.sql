-- Every filter of the audit page (actor, action, target kind, target kind and id) walks its
-- index in time order, ties by id, so a filter with a time window is a range seek: with the
-- `(…, id)` indexes they replace, an actor and one day walked all of that actor's entries
-- newer than the day. Replaced, not added: every index costs each audit append.
DROP INDEX audit_log_actor;
DROP INDEX audit_log_action;
DROP INDEX audit_log_target;
DROP INDEX audit_log_target_kind;
CREATE INDEX audit_log_actor_at ON audit_log (actor, at, id);
CREATE INDEX audit_log_action_at ON audit_log (action, at, id);
CREATE INDEX audit_log_target_at ON audit_log (target_kind, target_id, at, id);
CREATE INDEX audit_log_target_kind_at ON audit_log (target_kind, at, id);
