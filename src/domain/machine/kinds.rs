//! The closed choices of a machine config: provider, CPU architecture, yubaba channel, and
//! the declared allocatable capacity.

use serde::{Deserialize, Serialize};

use crate::domain::FieldError;

/// Which cloud creates the machine.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Hetzner Cloud.
    Hetzner,
    /// The demo's simulated cloud.
    Simulated,
}

impl ProviderKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Hetzner => "hetzner",
            ProviderKind::Simulated => "simulated",
        }
    }

    /// Parses a submitted provider.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, FieldError> {
        match raw.trim() {
            "hetzner" => Ok(ProviderKind::Hetzner),
            "simulated" => Ok(ProviderKind::Simulated),
            "" => Err(FieldError::new(field, "is required")),
            _ => Err(FieldError::new(field, "must be hetzner or simulated")),
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// CPU architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl Arch {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The arch a server type implies: `cax*` → aarch64, `cx*`/`cpx*`/`ccx*` → x86_64.
    pub fn of_server_type(server_type: &str) -> Option<Arch> {
        if server_type.starts_with("cax") {
            Some(Arch::Aarch64)
        } else if ["cx", "cpx", "ccx"]
            .iter()
            .any(|p| server_type.starts_with(p))
        {
            Some(Arch::X86_64)
        } else {
            None
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// yubaba release channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Stable,
    Beta,
}

impl Channel {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Stable => "stable",
            Channel::Beta => "beta",
        }
    }
}

/// Declared allocatable capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
pub struct Allocatable {
    pub memory_mb: Option<u64>,
    pub cpu_millis: Option<u64>,
}
