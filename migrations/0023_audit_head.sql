-- Twin of migrations/postgres/0023_audit_head.sql, which gives PostgreSQL the audit log's
-- "highest id ever issued". SQLite keeps that itself for an AUTOINCREMENT table, in
-- sqlite_sequence, so nothing changes here.
SELECT 1;
