//! What every request handler shares: the operations' context plus what only HTTP needs.

use std::sync::Arc;

use crate::context::Ctx;
use crate::telemetry::metrics::Metrics;

/// Shared application state, cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// What operations work with; handlers pass it on and never reach into it for storage.
    pub ctx: Ctx,
    /// Request counters and latency histograms for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Signs and checks the login form's pre-login CSRF token.
    pub login_key: crate::auth::csrf::LoginKey,
    /// Live sessions' activity, held in memory so reading a page writes nothing.
    pub sessions: Arc<crate::auth::sessions::Activity>,
    /// The scraper's tick, miss, failure and lag counters: `/metrics` copies them out as
    /// plain numbers for `telemetry` to render.
    pub scrape_stats: Arc<crate::scraper::ScrapeStats>,
    /// The dashboard's cards, rendered once a second for every viewer of the same board.
    pub cards: Arc<crate::board_html::BoardHtml>,
}
