//! The middleware that feeds the metrics registry ([`crate::telemetry::metrics`]) with every
//! request's method, route pattern, status and latency.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error};

use crate::state::AppState;
use crate::telemetry::metrics::method_label;

/// Middleware feeding the metrics registry.
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let method = method_label(req.method());
    // Looked up before the call as well: an inner layer that fails hands back no request.
    let pattern_before = req.match_pattern();
    let res = next.call(req).await;
    if let Some(state) = state {
        let (pattern, status) = match &res {
            Ok(r) => (r.request().match_pattern(), r.status()),
            Err(e) => (pattern_before, e.as_response_error().status_code()),
        };
        state.metrics.observe(
            method,
            state.metrics.route_label(pattern.as_deref()),
            status.as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
    res
}
