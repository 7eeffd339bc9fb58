//! Fleets: a yubaba cluster headroom watches and restores. Types and their parsing rules only;
//! the operations live in `crate::fleets`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Approvals a fleet may require, at most.
pub const APPROVALS_MAX: u8 = 5;
/// Default approvals needed before a request runs.
pub const APPROVALS_DEFAULT: u8 = 1;
/// Default hours an approval stays valid.
pub const APPROVAL_TTL_HOURS_DEFAULT: u32 = 4;
/// Default seconds between two scrapes.
pub const SCRAPE_INTERVAL_SECS_DEFAULT: u32 = 15;
/// Default seconds one scrape may take.
pub const SCRAPE_TIMEOUT_SECS_DEFAULT: u32 = 5;

/// The render-time secrets a fleet may name a source for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretName {
    /// The mesh (tailscale/headscale) pre-auth key.
    MeshPreauthKey,
    /// The cloudflared tunnel token.
    TunnelToken,
}

impl SecretName {
    /// Both, in display order.
    pub const ALL: [SecretName; 2] = [SecretName::MeshPreauthKey, SecretName::TunnelToken];

    /// The wire and form name.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretName::MeshPreauthKey => "mesh_preauth_key",
            SecretName::TunnelToken => "tunnel_token",
        }
    }
}

/// Where a secret is read from when a payload is rendered. Only the source is stored and
/// shown; the value never leaves the render.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum SecretSource {
    /// `env:VARIABLE`: the server's environment variable.
    Env(String),
    /// `file:/absolute/path`: a file's contents, trailing newline trimmed.
    File(PathBuf),
}

impl From<SecretSource> for String {
    fn from(s: SecretSource) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for SecretSource {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        SecretSource::parse("secrets", &raw).map_err(|e| e.message)
    }
}

impl std::fmt::Display for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Env(v) => write!(f, "env:{v}"),
            SecretSource::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

impl SecretSource {
    /// Parses `env:VARIABLE` (A-Z, 0-9, `_`, not starting with a digit, ≤ 128) or
    /// `file:/absolute/path` (≤ 1024 bytes, no `..` component, no control characters).
    pub fn parse(field: &str, raw: &str) -> Result<Self, super::FieldError> {
        let v = raw.trim();
        let rule = "must be env:VARIABLE (A-Z, 0-9, _) or file:/absolute/path";
        if let Some(var) = v.strip_prefix("env:") {
            let ok = !var.is_empty()
                && var.len() <= 128
                && var
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
                && !var.as_bytes()[0].is_ascii_digit();
            return if ok {
                Ok(SecretSource::Env(var.to_owned()))
            } else {
                Err(super::FieldError::new(field, rule))
            };
        }
        if let Some(path) = v.strip_prefix("file:") {
            let p = std::path::Path::new(path);
            let ok = p.is_absolute()
                && path.len() <= 1024
                && !path.chars().any(char::is_control)
                && !p
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
            return if ok {
                Ok(SecretSource::File(p.to_path_buf()))
            } else {
                Err(super::FieldError::new(field, rule))
            };
        }
        Err(super::FieldError::new(field, rule))
    }
}

/// A fleet as stored: every field already valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSpec {
    /// RFC 1123 label, unique.
    pub name: String,
    /// yubaba base URLs (`http` or `https`, no credentials, no query), 1–16 of them.
    pub endpoints: Vec<String>,
    /// The machine config a restore provisions.
    pub restore_machine_config: String,
    /// Distinct approvers a request needs (1–5).
    pub approvals_required: u8,
    /// Hours an approval stays valid before the request expires (1–168).
    pub approval_ttl_hours: u32,
    /// Seconds between scrapes (5–3600).
    pub scrape_interval_secs: u32,
    /// Seconds one scrape may take (1–60, below the interval).
    pub scrape_timeout_secs: u32,
    /// Spare nodes required, overriding the N+1 / N+2 rule (0–100).
    pub required_override: Option<u32>,
    /// Where each render-time secret comes from.
    pub secrets: BTreeMap<SecretName, SecretSource>,
}
