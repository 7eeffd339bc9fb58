//! Hetzner's JSON shapes and its error answers, turned into the provider's own types.
//!
//! Only the fields headroom reads are declared; serde skips the rest. In particular the create
//! answer's `root_password` has no field anywhere, so it is dropped while parsing and never
//! reaches memory that outlives the response text.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

use crate::provider::{ActionStatus, ApiError, Created, ProviderAction, ProviderError, Server};

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

/// `{code, message}` as Hetzner sends it in errors and failed actions.
#[derive(Deserialize)]
pub(super) struct ErrorDetail {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
pub(super) struct Meta {
    pub(super) pagination: Option<Pagination>,
}

#[derive(Deserialize)]
pub(super) struct Pagination {
    pub(super) next_page: Option<u32>,
}

#[derive(Deserialize)]
pub(super) struct LocationJson {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) city: String,
    #[serde(default)]
    pub(super) country: String,
    #[serde(default)]
    pub(super) network_zone: String,
}

#[derive(Deserialize)]
pub(super) struct Money {
    pub(super) gross: String,
}

#[derive(Deserialize)]
pub(super) struct PriceJson {
    pub(super) location: String,
    pub(super) price_monthly: Money,
    #[serde(default)]
    pub(super) price_hourly: Option<Money>,
}

#[derive(Deserialize)]
pub(super) struct ServerTypeJson {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    pub(super) cores: u32,
    pub(super) memory: f64,
    #[serde(default)]
    pub(super) disk: u64,
    #[serde(default)]
    pub(super) architecture: String,
    #[serde(default)]
    pub(super) deprecated: Option<bool>,
    #[serde(default)]
    pub(super) deprecation: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) prices: Vec<PriceJson>,
}

#[derive(Deserialize)]
pub(super) struct ImageJson {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) architecture: String,
}

/// Hetzner's architecture names in the catalogue's words.
pub(super) fn arch(hetzner: &str) -> String {
    match hetzner {
        "arm" => "aarch64".into(),
        "x86" => "x86_64".into(),
        other => other.into(),
    }
}

#[derive(Deserialize)]
struct IpJson {
    ip: String,
}

#[derive(Deserialize)]
struct PublicNetJson {
    #[serde(default)]
    ipv4: Option<IpJson>,
}

/// A server object (`GET /servers/{id}`, lists, the create answer).
#[derive(Deserialize)]
pub(super) struct ServerJson {
    id: i64,
    name: String,
    status: String,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    public_net: Option<PublicNetJson>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

impl From<ServerJson> for Server {
    fn from(s: ServerJson) -> Self {
        Server {
            id: s.id,
            name: s.name,
            status: s.status,
            ipv4: s.public_net.and_then(|n| n.ipv4).map(|i| i.ip),
            labels: s.labels.unwrap_or_default(),
            created: s.created,
        }
    }
}

/// An action object (`GET /actions/{id}`, the create answer).
#[derive(Deserialize)]
pub(super) struct ActionJson {
    id: i64,
    #[serde(default)]
    command: String,
    status: ActionStatus,
    #[serde(default)]
    progress: u32,
    #[serde(default)]
    error: Option<ErrorDetail>,
}

impl From<ActionJson> for ProviderAction {
    fn from(a: ActionJson) -> Self {
        ProviderAction {
            id: a.id,
            command: a.command,
            status: a.status,
            progress: a.progress.min(100) as u8,
            error: a.error.map(|e| ApiError {
                code: e.code,
                message: cut(&e.message),
            }),
        }
    }
}

/// `{"server": …, "action": …}`: the create answer, minus `root_password` and `next_actions`.
#[derive(Deserialize)]
pub(super) struct CreateAnswer {
    server: ServerJson,
    #[serde(default)]
    action: Option<ActionJson>,
}

impl From<CreateAnswer> for Created {
    fn from(c: CreateAnswer) -> Self {
        Created {
            server: c.server.into(),
            action: c.action.map(Into::into),
        }
    }
}

/// `{"server": …}` of `GET /servers/{id}`.
#[derive(Deserialize)]
pub(super) struct OneServer {
    pub(super) server: ServerJson,
}

/// `{"action": …}` of `GET /actions/{id}`.
#[derive(Deserialize)]
pub(super) struct OneAction {
    pub(super) action: ActionJson,
}

/// Keeps provider messages readable in the timeline and on pages.
fn cut(message: &str) -> String {
    message.chars().take(300).collect()
}

/// Maps a non-2xx answer to a typed error carrying Hetzner's code and message. `rate_wait` is
/// how long a 429 asks to wait (from `RateLimit-Reset`).
pub(super) fn error(status: StatusCode, text: &str, rate_wait: Duration) -> ProviderError {
    let detail = serde_json::from_str::<ErrorBody>(text)
        .ok()
        .map(|b| b.error);
    let (code, message) =
        detail.map_or_else(|| (String::new(), cut(text)), |d| (d.code, cut(&d.message)));
    let api = ApiError {
        code: code.clone(),
        message: message.clone(),
    };
    match (status, code.as_str()) {
        (StatusCode::UNAUTHORIZED, _) | (_, "unauthorized" | "forbidden" | "token_readonly") => {
            ProviderError::Unauthorized(api)
        }
        (StatusCode::TOO_MANY_REQUESTS, _) | (_, "rate_limit_exceeded") => {
            ProviderError::RateLimited {
                retry_after: rate_wait,
            }
        }
        (_, "invalid_input" | "json_error") => ProviderError::InvalidInput(api),
        (_, "uniqueness_error") => ProviderError::NameConflict(api),
        (StatusCode::NOT_FOUND, _) | (_, "not_found") => ProviderError::NotFound(api),
        (_, "conflict" | "locked" | "service_error" | "maintenance" | "unavailable") => {
            ProviderError::Transient(format!("HTTP {}: {api}", status.as_u16()))
        }
        (s, _) if s.is_server_error() => {
            ProviderError::Transient(format!("HTTP {}: {api}", s.as_u16()))
        }
        (s, _) => ProviderError::Other(ApiError {
            code,
            message: format!("HTTP {}: {message}", s.as_u16()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hetzner_code_maps_to_its_kind_with_the_code_and_message_kept() {
        let body = |code: &str| {
            format!(r#"{{"error":{{"code":"{code}","message":"m-{code}","details":{{}}}}}}"#)
        };
        let e = |status: u16, code: &str| {
            error(
                StatusCode::from_u16(status).unwrap(),
                &body(code),
                Duration::from_secs(3),
            )
        };
        assert_eq!(
            e(400, "invalid_input"),
            ProviderError::InvalidInput(ApiError {
                code: "invalid_input".into(),
                message: "m-invalid_input".into()
            })
        );
        assert!(
            matches!(e(409, "uniqueness_error"), ProviderError::NameConflict(a) if a.message == "m-uniqueness_error")
        );
        assert!(matches!(
            e(401, "unauthorized"),
            ProviderError::Unauthorized(_)
        ));
        assert!(matches!(
            e(403, "token_readonly"),
            ProviderError::Unauthorized(_)
        ));
        assert_eq!(
            e(429, "rate_limit_exceeded"),
            ProviderError::RateLimited {
                retry_after: Duration::from_secs(3)
            }
        );
        for transient in [
            "conflict",
            "locked",
            "service_error",
            "maintenance",
            "unavailable",
        ] {
            assert!(e(409, transient).is_transient(), "{transient}");
        }
        assert!(e(502, "").is_transient());
        assert!(matches!(e(404, "not_found"), ProviderError::NotFound(_)));
        assert!(
            matches!(e(403, "resource_limit_exceeded"), ProviderError::Other(a) if a.code == "resource_limit_exceeded")
        );
        let plain = error(
            StatusCode::BAD_GATEWAY,
            "<html>bad gateway</html>",
            Duration::ZERO,
        );
        assert_eq!(
            plain.to_string(),
            "temporary provider failure: HTTP 502: <html>bad gateway</html>"
        );
    }
}
