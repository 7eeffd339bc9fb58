//! Request counters and latency histograms per route, in Prometheus text format.
//!
//! Every label comes from a closed set: the method from [`METHODS`] (anything else is
//! `other`), the route from the route table's patterns (anything else is `unmatched`), so no
//! request, however odd, can add a series.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::Mutex;

use actix_web::http::Method;

/// Upper bounds (seconds) of the latency buckets.
const BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// The methods that get their own label; the method is taken from the request line as sent,
/// so without this set `FOO1`, `FOO2`, … would each start new series.
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The `method` label of a request: one of [`METHODS`], else `other`.
pub fn method_label(method: &Method) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("other")
}

/// Label of requests whose path matched no route of the table.
pub const UNMATCHED: &str = "unmatched";

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// In-process metrics registry. A mutex is plenty: one short critical section per request.
pub struct Metrics {
    /// The route table's patterns: the only values the `route` label may take besides
    /// [`UNMATCHED`].
    routes: BTreeSet<&'static str>,
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    latency: Mutex<BTreeMap<(&'static str, &'static str), Histogram>>,
}

impl Metrics {
    /// A registry whose `route` label may take the given patterns (the route table's).
    pub fn for_routes(routes: impl IntoIterator<Item = &'static str>) -> Self {
        Self {
            routes: routes.into_iter().collect(),
            requests: Mutex::default(),
            latency: Mutex::default(),
        }
    }

    /// The `route` label for a matched pattern: the table's own `&'static str` when the
    /// pattern is one of its routes, else [`UNMATCHED`].
    pub fn route_label(&self, pattern: Option<&str>) -> &'static str {
        pattern
            .and_then(|p| self.routes.get(p).copied())
            .unwrap_or(UNMATCHED)
    }

    /// Records one finished request; `method` and `route` are labels from
    /// [`method_label`] and [`Metrics::route_label`].
    pub fn observe(&self, method: &'static str, route: &'static str, status: u16, seconds: f64) {
        if let Ok(mut m) = self.requests.lock() {
            *m.entry((method, route, status)).or_default() += 1;
        }
        if let Ok(mut m) = self.latency.lock() {
            let h = m.entry((method, route)).or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_fixed_set_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        for odd in ["FOO", "get", "TRACE", "CONNECT", "PROPFIND"] {
            let m = Method::from_bytes(odd.as_bytes()).unwrap();
            assert_eq!(method_label(&m), "other", "{odd}");
        }
    }

    #[test]
    fn only_patterns_of_the_route_table_become_route_labels() {
        let metrics = Metrics::for_routes(["/login", "/users/{username}/role"]);
        assert_eq!(metrics.route_label(Some("/login")), "/login");
        assert_eq!(
            metrics.route_label(Some("/users/{username}/role")),
            "/users/{username}/role"
        );
        assert_eq!(metrics.route_label(Some("/users/alice/role")), UNMATCHED);
        assert_eq!(metrics.route_label(None), UNMATCHED);
    }

    #[test]
    fn the_rendered_text_names_each_observed_series_once() {
        let metrics = Metrics::for_routes(["/login"]);
        for _ in 0..3 {
            metrics.observe("GET", "/login", 200, 0.02);
        }
        let text = metrics.render();
        assert!(text.contains(
            "headroom_http_requests_total{method=\"GET\",route=\"/login\",status=\"200\"} 3"
        ));
        assert!(text.contains(
            "headroom_http_request_duration_seconds_bucket{method=\"GET\",route=\"/login\",le=\"0.01\"} 0"
        ));
        assert!(text.contains(
            "headroom_http_request_duration_seconds_bucket{method=\"GET\",route=\"/login\",le=\"0.025\"} 3"
        ));
    }
}
