//! What machines ask of the server: liveness, readiness and Prometheus metrics.

use actix_web::{web, HttpResponse};

use crate::domain::Caller;
use crate::state::AppState;
use crate::telemetry::fleet_metrics::{self, ScrapeTotals};

/// Liveness: the process answers.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// Readiness: the database answers.
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let ok = state.ctx.database_ready().await;
    if ok {
        HttpResponse::Ok()
            .content_type("text/plain")
            .body("ready\n")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("database unreachable\n")
    }
}

/// Prometheus exposition, text format 0.0.4: request counters and latency, password hashing,
/// then one gauge of each kind per fleet (read from the fleets' status, one row a fleet, so
/// the cost does not grow with history) and the scrape loops' totals.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let board = crate::capacity::board::board(&state.ctx, &Caller::system()).await;
    let board = match &board {
        Ok(fleets) => Some(fleets.as_slice()),
        Err(e) => {
            // The request counters are still worth scraping: the fleet series are left out
            // and `headroom_fleet_board_ok` says so.
            tracing::warn!(error = %e, "cannot read the fleets' status for /metrics");
            None
        }
    };
    // Copied out here, so `telemetry` renders plain numbers and imports no scraper.
    let stats = &state.scrape_stats;
    let scrape = ScrapeTotals {
        ticks: stats.ticks(),
        missed_ticks: stats.missed_ticks(),
        failures: stats.failures(),
        lag_p99_ms: stats.lag_p99_ms(),
    };
    let fleets = fleet_metrics::render(board, &scrape);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render() + &state.ctx.hashing.metrics_text() + &fleets)
}
