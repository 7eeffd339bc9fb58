//! Log subscriber set-up and the request root span.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::Error;
use tracing::{Level, Span};
use tracing_actix_web::{DefaultRootSpanBuilder, RootSpanBuilder};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber writing to stderr; `RUST_LOG` refines the default `info`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,actix_server=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests spawning many apps) is harmless: keep the first subscriber.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Root span per request, with a request id; probes and scrapes log at DEBUG so they do not
/// drown the requests people make.
pub struct HeadroomRootSpan;

impl RootSpanBuilder for HeadroomRootSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        match request.path() {
            "/healthz" | "/readyz" | "/metrics" => {
                tracing_actix_web::root_span!(level = Level::DEBUG, request)
            }
            _ => tracing_actix_web::root_span!(level = Level::INFO, request),
        }
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}
