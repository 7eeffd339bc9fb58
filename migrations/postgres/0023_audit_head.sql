-- The audit chain's head: the highest audit_log id ever issued, which SQLite keeps in
-- sqlite_sequence for an AUTOINCREMENT table. `audit verify` compares it with the last row
-- it reads, so rows cut off the end of the log are noticed even though the rows left still
-- chain. A trigger keeps it in the inserting transaction; it only ever rises, and like the
-- log it cannot be deleted or truncated. (Yes/no columns, BOOLEAN here and 0/1 in SQLite,
-- are read through db::flag::Flag by sqlx's Any driver; the baseline's note on them
-- predates it.)

CREATE TABLE audit_head (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    seq BIGINT  NOT NULL CHECK (seq >= 0)
);
INSERT INTO audit_head (one, seq) SELECT TRUE, COALESCE(MAX(id), 0) FROM audit_log;

CREATE FUNCTION headroom_audit_head_rises() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE audit_head SET seq = GREATEST(seq, NEW.id);
    RETURN NEW;
END
$$;

CREATE TRIGGER audit_log_moves_head AFTER INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION headroom_audit_head_rises();
CREATE TRIGGER audit_head_never_lowered BEFORE UPDATE ON audit_head
    FOR EACH ROW WHEN (NEW.seq < OLD.seq)
    EXECUTE FUNCTION headroom_refuse_change('audit_head only rises');
CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head
    FOR EACH ROW EXECUTE FUNCTION headroom_refuse_change('audit_head is kept');
CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION headroom_refuse_change('audit_head is kept');
