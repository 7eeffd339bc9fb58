-- How many machines of each fleet still have a server (created and not destroyed: booting,
-- created, or failed after creation), per monthly price of their request's plan. The plan
-- checks' "machines still running" read this fleet's few rows instead of every request the
-- fleet ever filed and each one's plan JSON. Kept by the triggers below in the transaction
-- of each machine change, whichever code writes it; filled here from the history.
CREATE TABLE fleet_running_machines (
    fleet         TEXT    NOT NULL,
    -- The plan's `monthly_price` per machine, as stored ('' when the plan has none).
    monthly_price TEXT    NOT NULL,
    machines      INTEGER NOT NULL,
    PRIMARY KEY (fleet, monthly_price)
) WITHOUT ROWID;

INSERT INTO fleet_running_machines (fleet, monthly_price, machines)
SELECT p.fleet, COALESCE(json_extract(p.plan, '$.monthly_price'), ''), COUNT(*)
FROM provision_machines m JOIN provisions p ON p.id = m.provision_id
WHERE m.server_id IS NOT NULL AND m.status != 'destroyed'
GROUP BY 1, 2;

CREATE TRIGGER fleet_running_machines_insert AFTER INSERT ON provision_machines
WHEN NEW.server_id IS NOT NULL AND NEW.status != 'destroyed'
BEGIN
    INSERT INTO fleet_running_machines (fleet, monthly_price, machines)
    SELECT fleet, COALESCE(json_extract(plan, '$.monthly_price'), ''), 1 FROM provisions
    WHERE id = NEW.provision_id
    ON CONFLICT (fleet, monthly_price) DO UPDATE SET machines = machines + 1;
END;

CREATE TRIGGER fleet_running_machines_update AFTER UPDATE OF provision_id, server_id, status
ON provision_machines
WHEN (OLD.server_id IS NOT NULL AND OLD.status != 'destroyed')
     IS NOT (NEW.server_id IS NOT NULL AND NEW.status != 'destroyed')
  OR OLD.provision_id != NEW.provision_id
BEGIN
    UPDATE fleet_running_machines SET machines = machines - 1
    WHERE OLD.server_id IS NOT NULL AND OLD.status != 'destroyed'
      AND (fleet, monthly_price) = (SELECT fleet, COALESCE(json_extract(plan, '$.monthly_price'), '')
                                    FROM provisions WHERE id = OLD.provision_id);
    INSERT INTO fleet_running_machines (fleet, monthly_price, machines)
    SELECT fleet, COALESCE(json_extract(plan, '$.monthly_price'), ''), 1 FROM provisions
    WHERE id = NEW.provision_id AND NEW.server_id IS NOT NULL AND NEW.status != 'destroyed'
    ON CONFLICT (fleet, monthly_price) DO UPDATE SET machines = machines + 1;
END;

CREATE TRIGGER fleet_running_machines_delete AFTER DELETE ON provision_machines
WHEN OLD.server_id IS NOT NULL AND OLD.status != 'destroyed'
BEGIN
    UPDATE fleet_running_machines SET machines = machines - 1
    WHERE (fleet, monthly_price) = (SELECT fleet, COALESCE(json_extract(plan, '$.monthly_price'), '')
                                    FROM provisions WHERE id = OLD.provision_id);
END;
