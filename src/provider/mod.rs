//! Cloud providers behind one object-safe trait: read the catalogue (locations, server types,
//! images), create a server, find servers by name or label, read a server, poll an action,
//! destroy a server. A provider never touches the database; the provisioning runner records
//! what it asked and what it was told.

pub mod fake;
pub mod hetzner;
pub mod simulated;

use std::collections::BTreeMap;

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
    /// Hourly gross price per location, as the provider states it. Empty in catalogues cached
    /// before hourly prices were kept.
    #[serde(default)]
    pub hourly_price: Vec<(String, String)>,
}

/// The currency every price in a catalogue is stated in (Hetzner bills in euros).
pub const CURRENCY: &str = "EUR";

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

/// What the provider said when it refused: its own error code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// The provider's code (`invalid_input`, `uniqueness_error`, …); empty when it sent none.
    pub code: String,
    /// The provider's message, cut to a readable length.
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.code.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{} ({})", self.message, self.code)
        }
    }
}

/// A provider call that failed, typed so callers decide whether to retry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 401, `forbidden`, `token_readonly`: nothing will work until the token is fixed.
    #[error("the provider refused the credentials (check HETZNER_API_TOKEN): {0}")]
    Unauthorized(ApiError),
    /// `invalid_input`, `json_error`: the request itself is wrong; never retried.
    #[error("the provider rejected the request: {0}")]
    InvalidInput(ApiError),
    /// `uniqueness_error`: the server name is taken in the project; never retried.
    #[error("the name is already taken at the provider: {0}")]
    NameConflict(ApiError),
    /// 429 / `rate_limit_exceeded`, after the client's own waiting gave up.
    #[error("rate limited by the provider; retry in {} s", .retry_after.as_secs())]
    RateLimited { retry_after: Duration },
    /// 5xx, transport errors, timeouts and the codes Hetzner calls transient, after retries.
    #[error("temporary provider failure: {0}")]
    Transient(String),
    /// 404 / `not_found`.
    #[error("not found at the provider: {0}")]
    NotFound(ApiError),
    /// Anything else (`resource_limit_exceeded`, `protected`, an unreadable answer, …).
    #[error("provider error: {0}")]
    Other(ApiError),
}

impl ProviderError {
    /// Whether trying the same call again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. } | ProviderError::Transient(_)
        )
    }

    /// An error with only a message (an unreadable answer, a fake's fault).
    pub fn other(message: impl Into<String>) -> Self {
        ProviderError::Other(ApiError {
            code: String::new(),
            message: message.into(),
        })
    }
}

/// The label every created server carries with its provision's id.
pub const PROVISION_LABEL: &str = "headroom-provision";
/// The label every created server carries with its fleet's name.
pub const FLEET_LABEL: &str = "headroom-fleet";

/// What to create. `user_data` is the real payload (it may hold render-time secrets), so it is
/// kept secret and never printed.
#[derive(Clone)]
pub struct ServerSpec {
    pub name: String,
    pub server_type: String,
    pub image: String,
    pub location: String,
    pub user_data: secrecy::SecretString,
    pub labels: BTreeMap<String, String>,
    pub ssh_keys: Vec<i64>,
}

impl std::fmt::Debug for ServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSpec")
            .field("name", &self.name)
            .field("server_type", &self.server_type)
            .field("image", &self.image)
            .field("location", &self.location)
            .field("user_data", &"«redacted»")
            .field("labels", &self.labels)
            .field("ssh_keys", &self.ssh_keys)
            .finish()
    }
}

#[cfg(test)]
impl ServerSpec {
    /// A small x86 Debian server carrying one label and a minimal payload, for the tests of
    /// the providers and of the simulated fleet.
    pub(crate) fn sample(name: &str, (key, value): (&str, &str)) -> Self {
        ServerSpec {
            name: name.into(),
            server_type: "cx22".into(),
            image: "debian-12".into(),
            location: "fsn1".into(),
            user_data: secrecy::SecretString::from("#cloud-config\n".to_owned()),
            labels: BTreeMap::from([(key.to_owned(), value.to_owned())]),
            ssh_keys: vec![],
        }
    }
}

/// A server as the provider describes it (no root password: it is dropped on parse).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Server {
    pub id: i64,
    pub name: String,
    /// `initializing`, `starting`, `running`, `off`, … as the provider says.
    pub status: String,
    pub ipv4: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// When the provider says it was created (RFC 3339 text), if it said.
    pub created: Option<String>,
}

/// Where a provider action stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    Running,
    Success,
    Error,
}

/// A provider action (e.g. `create_server`), polled until it is no longer running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderAction {
    pub id: i64,
    pub command: String,
    pub status: ActionStatus,
    pub progress: u8,
    /// The provider's error when the action ended in `error`.
    pub error: Option<ApiError>,
}

/// The answer to a create: the server and the action that boots it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub server: Server,
    /// `None` when the provider started no action (the server is already up).
    pub action: Option<ProviderAction>,
}

/// A cloud that can create machines.
pub trait MachineProvider: Send + Sync {
    /// Stable name (`hetzner`, `simulated`, `fake`), recorded with every call in a
    /// provision's timeline.
    fn name(&self) -> &'static str;
    /// What the provider offers, for form choices and validation.
    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>>;
    /// Creates one server. Callers look the server up by label first: a create is not
    /// idempotent at the provider.
    fn create_server<'a>(
        &'a self,
        spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>>;
    /// Servers carrying `key=value`.
    fn find_by_label<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>>;
    /// The server with exactly this name, if any.
    fn find_by_name<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>>;
    /// One server; `None` when it is gone.
    fn server(&self, id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>>;
    /// One action.
    fn action(&self, id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>>;
    /// Deletes a server; a server already gone is not an error.
    fn destroy(&self, id: i64) -> BoxFuture<'_, Result<(), ProviderError>>;
}

/// The providers this instance may use.
#[derive(Clone, Default)]
pub struct Providers {
    hetzner: Option<std::sync::Arc<dyn MachineProvider>>,
    simulated: Option<std::sync::Arc<dyn MachineProvider>>,
    /// The same simulated cloud as `simulated`, with its own type kept: the simulated yubaba
    /// fleets watch its servers to join them as spares. `None` once a test replaces it.
    simulated_cloud: Option<std::sync::Arc<simulated::Simulated>>,
}

impl Providers {
    /// Hetzner when a token is configured; the simulated cloud when asked for (demo).
    pub fn new(hetzner: Option<std::sync::Arc<dyn MachineProvider>>, simulated: bool) -> Self {
        let simulated_cloud =
            simulated.then(|| std::sync::Arc::new(simulated::Simulated::default()));
        let simulated = simulated_cloud
            .clone()
            .map(|c| c as std::sync::Arc<dyn MachineProvider>);
        Self {
            hetzner,
            simulated,
            simulated_cloud,
        }
    }

    /// The simulated cloud, when it is enabled and not replaced (the demo's fleets follow its
    /// servers).
    pub fn simulated(&self) -> Option<std::sync::Arc<simulated::Simulated>> {
        self.simulated_cloud.clone()
    }

    /// Replaces (or enables) the provider of a kind: tests put the fake in place.
    pub fn with(
        mut self,
        kind: crate::domain::machine::ProviderKind,
        provider: std::sync::Arc<dyn MachineProvider>,
    ) -> Self {
        match kind {
            crate::domain::machine::ProviderKind::Hetzner => self.hetzner = Some(provider),
            crate::domain::machine::ProviderKind::Simulated => {
                self.simulated = Some(provider);
                self.simulated_cloud = None;
            }
        }
        self
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
