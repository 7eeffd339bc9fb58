//! cloud-init's own JSON schema, from a configured path or where Debian's cloud-init package
//! installs it. Compiled once; absent schema means the check is skipped (and said so).

use std::path::{Path, PathBuf};

/// Where Debian's `cloud-init` package puts the schema.
pub const DEBIAN_SCHEMA: &str =
    "/usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-cloud-config-v1.json";

/// The schema file to use: the configured one, else Debian's if present.
pub fn locate(configured: Option<&Path>) -> Option<PathBuf> {
    match configured {
        Some(p) => Some(p.to_path_buf()),
        None => Some(PathBuf::from(DEBIAN_SCHEMA)).filter(|p| p.exists()),
    }
}

/// Compiles the schema at `path` (draft 4, as cloud-init writes it).
pub fn load(path: &Path) -> anyhow::Result<jsonschema::Validator> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read cloud-init schema {}: {e}", path.display()))?;
    let schema: serde_json::Value = serde_json::from_str(&text)?;
    jsonschema::draft4::options()
        .should_validate_formats(false)
        .build(&schema)
        .map_err(|e| anyhow::anyhow!("cannot compile cloud-init schema {}: {e}", path.display()))
}
