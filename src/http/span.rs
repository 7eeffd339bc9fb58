//! The request root span: one per request, with a request id and the client as the
//! trusted-proxy rule sees it.

use std::net::IpAddr;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Version};
use actix_web::{web, Error, HttpMessage};
use tracing::{Level, Span};
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};

use crate::http::client::{client_addr, over_tls};
use crate::state::AppState;

/// Root span per request, with a request id; probes and scrapes log at DEBUG so they do not
/// drown the requests people make.
///
/// The span is built here rather than with `tracing_actix_web::root_span!`: that macro takes
/// the client address, host and scheme from `ConnectionInfo`, which believes `Forwarded` and
/// `X-Forwarded-*` from any peer. Here they follow the same trusted-proxy rule as the audit
/// log and the login throttle ([`client_addr`], [`over_tls`]), so a forged header never shows
/// up as the client.
pub struct HeadroomRootSpan;

/// The request facts the root span records, each taken only from what we can vouch for.
struct RequestFacts {
    method: String,
    route: String,
    flavor: &'static str,
    client_ip: String,
    scheme: &'static str,
    host: String,
    target: String,
    user_agent: String,
    request_id: String,
}

impl RequestFacts {
    /// The facts of `request`, believing forwarded headers only from `trusted` peers.
    fn of(request: &ServiceRequest, trusted: &[IpAddr], tls_configured: bool) -> Self {
        let http = request.request();
        let text = |name: header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        RequestFacts {
            method: request.method().as_str().to_owned(),
            route: request
                .match_pattern()
                .unwrap_or_else(|| "default".to_owned()),
            flavor: match request.version() {
                Version::HTTP_09 => "0.9",
                Version::HTTP_10 => "1.0",
                Version::HTTP_2 => "2.0",
                Version::HTTP_3 => "3.0",
                _ => "1.1",
            },
            client_ip: client_addr(http, trusted).map_or_else(String::new, |a| a.to_string()),
            scheme: if over_tls(http, tls_configured, trusted) {
                "https"
            } else {
                "http"
            },
            // The Host header as the client sent it, never X-Forwarded-Host.
            host: request
                .uri()
                .authority()
                .map_or_else(|| text(header::HOST), |a| a.to_string()),
            target: request
                .uri()
                .path_and_query()
                .map_or_else(String::new, |p| p.as_str().to_owned()),
            user_agent: text(header::USER_AGENT),
            request_id: request
                .extensions()
                .get::<RequestId>()
                .map_or_else(String::new, ToString::to_string),
        }
    }
}

/// One `HTTP request` span at a constant level (tracing needs the level at compile time),
/// with the fields `DefaultRootSpanBuilder` fills in on the way out.
macro_rules! request_span {
    ($level:expr, $facts:expr) => {{
        let f: &RequestFacts = $facts;
        tracing::span!(
            $level,
            "HTTP request",
            http.method = %f.method,
            http.route = %f.route,
            http.flavor = f.flavor,
            http.scheme = f.scheme,
            http.host = %f.host,
            http.client_ip = %f.client_ip,
            http.user_agent = %f.user_agent,
            http.target = %f.target,
            http.status_code = tracing::field::Empty,
            otel.name = %format!("{} {}", f.method, f.route),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            request_id = %f.request_id,
            exception.message = tracing::field::Empty,
            exception.details = tracing::field::Empty,
        )
    }};
}

impl RootSpanBuilder for HeadroomRootSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let probe = matches!(request.path(), "/healthz" | "/readyz" | "/metrics");
        // The facts cost some ten allocations a request: none of them when nobody listens
        // (the dashboard's profile under load, with logging off, still paid for them).
        let listened = if probe {
            tracing::enabled!(Level::DEBUG)
        } else {
            tracing::enabled!(Level::INFO)
        };
        if !listened {
            return Span::none();
        }
        let settings = request
            .app_data::<web::Data<AppState>>()
            .map(|s| s.ctx.settings.clone());
        let facts = match &settings {
            Some(s) => RequestFacts::of(request, &s.trusted_proxies, s.cookie_secure),
            None => RequestFacts::of(request, &[], false),
        };
        if probe {
            request_span!(Level::DEBUG, &facts)
        } else {
            request_span!(Level::INFO, &facts)
        }
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn forged() -> TestRequest {
        TestRequest::default()
            .peer_addr("198.51.100.7:40000".parse().unwrap())
            .insert_header(("x-forwarded-for", "6.6.6.6"))
            .insert_header(("forwarded", "for=6.6.6.6;proto=https;host=evil.example"))
            .insert_header(("x-forwarded-host", "evil.example"))
            .insert_header(("x-forwarded-proto", "https"))
            .insert_header((header::HOST, "console.example"))
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_its_headers_claim() {
        let facts = RequestFacts::of(&forged().to_srv_request(), &[], false);
        assert_eq!(facts.client_ip, "198.51.100.7");
        assert_eq!(facts.host, "console.example");
        assert_eq!(facts.scheme, "http");
    }

    #[test]
    fn a_trusted_proxy_names_the_client_it_forwarded() {
        let proxy: IpAddr = "198.51.100.7".parse().unwrap();
        let facts = RequestFacts::of(&forged().to_srv_request(), &[proxy], false);
        assert_eq!(facts.client_ip, "6.6.6.6");
        assert_eq!(facts.scheme, "https");
    }
}
