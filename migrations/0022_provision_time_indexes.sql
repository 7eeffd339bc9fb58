-- A provision listing with an equality filter and a time window (a fleet's requests of one
-- day, say) walked the filter's `(column, id)` index over every newer request of that fleet
-- before reaching the window: 23x at ten times the history. With `(column, created_at, id)` it
-- is a range seek walked in time order, like a time bound alone on `provisions_by_created`.
-- The `(column, id)` indexes stay: a filter without a window walks ids, and the runner and
-- the deficit rule read by state. Requests are filed a few a day, so four more indexes cost
-- their writes nothing that matters.
-- What a request is for never changes once filed (only its state, expiry and finish do): the
-- approvals' copies of its columns (0020) and the per-fleet running-machine counts (0021,
-- found again by fleet and plan when a machine goes) rely on it, so a change is refused here
-- rather than left to corrupt them quietly.
CREATE TRIGGER provisions_filed_columns_fixed
BEFORE UPDATE OF fleet, machine_config, requester, plan ON provisions
WHEN OLD.fleet IS NOT NEW.fleet OR OLD.machine_config IS NOT NEW.machine_config
     OR OLD.requester IS NOT NEW.requester OR OLD.plan IS NOT NEW.plan
BEGIN
    SELECT RAISE(ABORT, 'a filed request''s fleet, machine config, requester and plan never change');
END;

CREATE INDEX provisions_by_fleet_created ON provisions (fleet, created_at, id);
CREATE INDEX provisions_by_config_created ON provisions (machine_config, created_at, id);
CREATE INDEX provisions_by_requester_created ON provisions (requester, created_at, id);
CREATE INDEX provisions_by_state_created ON provisions (state, created_at, id);
