//! What every request handler and background loop shares.

use std::sync::Arc;

use sqlx::SqlitePool;

use crate::config::Settings;
use crate::domain::Clock;
use crate::http::metrics::Metrics;

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
}
