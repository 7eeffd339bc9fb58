-- Per-instance secret keys, made from the OS random source on first start and never shown or
-- exported. `purpose` names what a key signs (`login_csrf`, later webhook deliveries), so each
-- use has its own key and one purpose's tokens are never valid for another.
CREATE TABLE instance_keys (
    purpose    TEXT PRIMARY KEY NOT NULL,
    key        BLOB NOT NULL CHECK (length(key) = 32),
    created_at INTEGER NOT NULL
);
