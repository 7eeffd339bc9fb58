//! Cloud providers behind one object-safe trait. Today the trait reads the catalogue
//! (locations, server types, images); creating, finding, polling and destroying servers join it
//! with provisioning. A provider never touches the database.

pub mod hetzner;
pub mod simulated;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A boxed future, so the trait stays object safe without an extra crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A datacenter location.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub name: String,
    pub description: String,
    pub city: String,
    pub country: String,
    pub network_zone: String,
}

/// A server type (size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerType {
    pub name: String,
    pub description: String,
    pub cores: u32,
    pub memory_gb: f64,
    pub disk_gb: u64,
    /// `x86_64` or `aarch64`.
    pub arch: String,
    pub deprecated: bool,
    /// Monthly gross price per location, as the provider states it (text, to keep precision).
    pub monthly_price: Vec<(String, String)>,
}

/// A system image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub name: String,
    pub description: String,
    /// Architectures it exists for.
    pub archs: Vec<String>,
}

/// Everything a provider offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalogue {
    pub locations: Vec<Location>,
    pub server_types: Vec<ServerType>,
    pub images: Vec<Image>,
}

/// A provider call that failed, typed so callers decide whether to retry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("the provider refused the credentials (check HETZNER_API_TOKEN)")]
    Unauthorized,
    #[error("the provider rejected the request: {0}")]
    InvalidInput(String),
    #[error("the name is already taken at the provider: {0}")]
    NameConflict(String),
    #[error("rate limited by the provider; retry in {} s", .retry_after.as_secs())]
    RateLimited { retry_after: Duration },
    #[error("temporary provider failure: {0}")]
    Transient(String),
    #[error("provider error: {0}")]
    Other(String),
}

/// A cloud that can create machines.
pub trait MachineProvider: Send + Sync {
    /// Stable name (`hetzner`, `simulated`).
    fn name(&self) -> &'static str;
    /// What the provider offers, for form choices and validation.
    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>>;
}

/// The providers this instance may use.
#[derive(Clone, Default)]
pub struct Providers {
    hetzner: Option<std::sync::Arc<dyn MachineProvider>>,
    simulated: Option<std::sync::Arc<dyn MachineProvider>>,
}

impl Providers {
    /// Hetzner when a token is configured; the simulated cloud when asked for (demo).
    pub fn new(hetzner: Option<std::sync::Arc<dyn MachineProvider>>, simulated: bool) -> Self {
        let simulated = simulated.then(|| {
            std::sync::Arc::new(simulated::Simulated) as std::sync::Arc<dyn MachineProvider>
        });
        Self { hetzner, simulated }
    }

    /// The provider of a kind, if enabled.
    pub fn get(
        &self,
        kind: crate::domain::machine::ProviderKind,
    ) -> Option<&std::sync::Arc<dyn MachineProvider>> {
        match kind {
            crate::domain::machine::ProviderKind::Hetzner => self.hetzner.as_ref(),
            crate::domain::machine::ProviderKind::Simulated => self.simulated.as_ref(),
        }
    }

    /// Kinds that are enabled.
    pub fn enabled(&self) -> Vec<crate::domain::machine::ProviderKind> {
        use crate::domain::machine::ProviderKind;
        [ProviderKind::Hetzner, ProviderKind::Simulated]
            .into_iter()
            .filter(|k| self.get(*k).is_some())
            .collect()
    }
}
