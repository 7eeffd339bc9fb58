//! Request counters and latency histograms per route, in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, Error};

use crate::state::AppState;

/// Upper bounds (seconds) of the latency buckets.
const BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// In-process metrics registry. A mutex is plenty: one short critical section per request.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
}

impl Metrics {
    /// Records one finished request. `route` is the matched pattern, never the raw path, so
    /// label cardinality stays bounded.
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        if let Ok(mut m) = self.requests.lock() {
            *m.entry((method.to_owned(), route.to_owned(), status))
                .or_default() += 1;
        }
        if let Ok(mut m) = self.latency.lock() {
            let h = m.entry((method.to_owned(), route.to_owned())).or_default();
            for (i, le) in BUCKETS.iter().enumerate() {
                if seconds <= *le {
                    h.counts[i] += 1;
                }
            }
            h.count += 1;
            h.sum += seconds;
        }
    }

    /// The Prometheus exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP headroom_http_requests_total HTTP requests by method, route and status.\n",
        );
        out.push_str("# TYPE headroom_http_requests_total counter\n");
        if let Ok(m) = self.requests.lock() {
            for ((method, route, status), n) in m.iter() {
                let _ = writeln!(out, "headroom_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}", escape(route));
            }
        }
        out.push_str(
            "# HELP headroom_http_request_duration_seconds Request latency by method and route.\n",
        );
        out.push_str("# TYPE headroom_http_request_duration_seconds histogram\n");
        if let Ok(m) = self.latency.lock() {
            for ((method, route), h) in m.iter() {
                let labels = format!("method=\"{method}\",route=\"{}\"", escape(route));
                for (i, le) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "headroom_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {}",
                        h.counts[i]
                    );
                }
                let _ = writeln!(
                    out,
                    "headroom_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(
                    out,
                    "headroom_http_request_duration_seconds_sum{{{labels}}} {}",
                    h.sum
                );
                let _ = writeln!(
                    out,
                    "headroom_http_request_duration_seconds_count{{{labels}}} {}",
                    h.count
                );
            }
        }
        out
    }
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware feeding [`Metrics`].
pub async fn record(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let method = req.method().to_string();
    let res = next.call(req).await?;
    if let Some(state) = state {
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".into());
        state.metrics.observe(
            &method,
            &route,
            res.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
    Ok(res)
}
