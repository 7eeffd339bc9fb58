-- Indexes for questions asked of one fleet's or one config's history: "has this fleet an open
-- request?" (a fleet cannot be deleted while it has one) and "the config's last succeeded
-- provision" (the preview's diff). Without them both scan the whole history of the fleet or
-- config.
CREATE INDEX provisions_by_fleet_state ON provisions (fleet, state);
CREATE INDEX provisions_by_config_state ON provisions (machine_config, state, id);
