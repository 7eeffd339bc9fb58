-- Machine configs, cloud-init templates (both versioned, versions immutable), the provider
-- catalogue cache, and pin pre-flight verdicts.

CREATE TABLE catalogue (
    provider     TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('location', 'server_type', 'image')),
    name         TEXT    NOT NULL,
    details      TEXT    NOT NULL,
    refreshed_at INTEGER NOT NULL,
    PRIMARY KEY (provider, kind, name)
);

CREATE TABLE templates (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE template_versions (
    id          INTEGER PRIMARY KEY,
    template_id INTEGER NOT NULL REFERENCES templates (id),
    version     INTEGER NOT NULL,
    body        TEXT    NOT NULL,
    author      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    UNIQUE (template_id, version)
);

CREATE TABLE machine_configs (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE machine_config_versions (
    id         INTEGER PRIMARY KEY,
    config_id  INTEGER NOT NULL REFERENCES machine_configs (id),
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL,
    author     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (config_id, version)
);

-- Edits never overwrite: provisions will reference exact versions.
CREATE TRIGGER template_versions_immutable BEFORE UPDATE ON template_versions
BEGIN SELECT RAISE(ABORT, 'template versions are immutable'); END;
CREATE TRIGGER template_versions_kept BEFORE DELETE ON template_versions
BEGIN SELECT RAISE(ABORT, 'template versions are kept'); END;
CREATE TRIGGER machine_config_versions_immutable BEFORE UPDATE ON machine_config_versions
BEGIN SELECT RAISE(ABORT, 'machine config versions are immutable'); END;
CREATE TRIGGER machine_config_versions_kept BEFORE DELETE ON machine_config_versions
BEGIN SELECT RAISE(ABORT, 'machine config versions are kept'); END;

-- The latest verdict per (url, sha256).
CREATE TABLE pin_checks (
    url        TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    verdict    TEXT    NOT NULL CHECK (verdict IN ('verified', 'mismatch', 'error')),
    message    TEXT    NOT NULL,
    checked_at INTEGER NOT NULL,
    checked_by TEXT    NOT NULL,
    PRIMARY KEY (url, sha256)
);
