//! Log subscriber set-up, the request metrics registry, and the rendering of the per-fleet
//! gauges and scrape totals from values the `/metrics` handler passes in (this module sits
//! below the operations and the scraper, so it reads neither). The request span is in
//! `http::span`.

pub mod fleet_metrics;
pub mod metrics;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// The filter directive that keeps sqlx's passfile warnings out of every log.
pub const PASSFILE_SILENCE: &str = "sqlx_postgres::options::pgpass=off";

/// Installs the global subscriber writing to stderr; `RUST_LOG` refines the default `info`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,actix_server=warn"))
        // sqlx reads the PostgreSQL passfile on every new connection and logs a malformed
        // line whole, password included; no `RUST_LOG` turns that back on.
        .add_directive(PASSFILE_SILENCE.parse().expect("a valid directive"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests spawning many apps) is harmless: keep the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
