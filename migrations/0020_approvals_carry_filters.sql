-- "Approved by" combined with another filter of the provision list (fleet, machine config,
-- requester, state) seeks the approver's approvals of exactly those requests: each approval
-- carries copies of its request's filter columns, each with an (approver, column,
-- provision_id) index. Without them a combination no request matches walked every approval
-- that approver ever gave. Fleet, config and requester never change after filing; the state
-- follows the request's through the trigger below, in the transaction of the change.
ALTER TABLE provision_approvals ADD COLUMN fleet TEXT NOT NULL DEFAULT '';
ALTER TABLE provision_approvals ADD COLUMN machine_config TEXT NOT NULL DEFAULT '';
ALTER TABLE provision_approvals ADD COLUMN requester TEXT NOT NULL DEFAULT '';
ALTER TABLE provision_approvals ADD COLUMN state TEXT NOT NULL DEFAULT '';
UPDATE provision_approvals SET (fleet, machine_config, requester, state) =
    (SELECT p.fleet, p.machine_config, p.requester, p.state FROM provisions p
     WHERE p.id = provision_approvals.provision_id);
CREATE INDEX provision_approvals_by_approver_fleet
    ON provision_approvals (approver, fleet, provision_id);
CREATE INDEX provision_approvals_by_approver_config
    ON provision_approvals (approver, machine_config, provision_id);
CREATE INDEX provision_approvals_by_approver_requester
    ON provision_approvals (approver, requester, provision_id);
CREATE INDEX provision_approvals_by_approver_state
    ON provision_approvals (approver, state, provision_id);
CREATE TRIGGER provision_approvals_follow_state AFTER UPDATE OF state ON provisions
WHEN NEW.state IS NOT OLD.state
BEGIN
    UPDATE provision_approvals SET state = NEW.state WHERE provision_id = NEW.id;
END;
