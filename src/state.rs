//! What every request handler and background loop shares.

use std::sync::Arc;

use sqlx::SqlitePool;

use crate::config::Settings;
use crate::domain::Clock;
use crate::http::metrics::Metrics;
use crate::provider::Providers;

/// Shared application state, cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub pool: SqlitePool,
    /// "Now", swappable in tests.
    pub clock: Arc<dyn Clock>,
    /// Loaded settings.
    pub settings: Arc<Settings>,
    /// Request counters and latency histograms for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Enabled cloud providers.
    pub providers: Providers,
    /// cloud-init's JSON schema, when found.
    pub cloud_init_schema: Option<Arc<jsonschema::Validator>>,
    /// Client for pin pre-flights (tarball downloads).
    pub pin_client: reqwest::Client,
}
