-- Chart annotations ask "the state changes of this fleet's requests in [from, to)". A
-- request's state changes all lie between its created_at and its finished_at (the terminal
-- change), so only requests still open or finished at or after `from` can have one: this
-- index finds exactly those, instead of walking every request the fleet ever had.
CREATE INDEX provisions_by_fleet_finished ON provisions (fleet, finished_at);
