//! What every request handler and background loop shares.

use std::sync::Arc;

use sqlx::SqlitePool;

use crate::config::Settings;
use crate::domain::Clock;
use crate::provider::Providers;
use crate::telemetry::metrics::Metrics;

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
    /// Signs and checks the login form's pre-login CSRF token.
    pub login_key: crate::auth::csrf::LoginKey,
    /// Enabled cloud providers.
    pub providers: Providers,
    /// Renders and validates templates in the sandbox (with cloud-init's schema when found).
    pub renderer: crate::cloud_init::Renderer,
    /// Client for pin pre-flights (tarball downloads), under the outbound policy for pins.
    pub pin_client: crate::outbound::OutboundClient,
}
