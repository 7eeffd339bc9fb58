-- A created server is not yet a spare: a request now follows each machine until it appears
-- as a member of its fleet (issue 16). When it was first seen as a member, and as which raft
-- node; both NULL until then (and for requests that ended before joins were followed).
ALTER TABLE provision_machines ADD COLUMN joined_at INTEGER;
ALTER TABLE provision_machines ADD COLUMN member_id INTEGER;
