//! Hetzner Cloud over its REST API (`HEADROOM_HETZNER_API_URL`, bearer `HETZNER_API_TOKEN`).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{Created, ProviderAction, Server, ServerSpec, ApiError, BoxFuture, Catalogue, Image, Location, MachineProvider, ProviderError, ServerType};

/// The Hetzner Cloud client.
pub struct Hetzner {
    base: String,
    token: SecretString,
    http: reqwest::Client,
}

impl std::fmt::Debug for Hetzner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hetzner")
            .field("base", &self.base)
            .field("token", &"«redacted»")
            .finish()
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Option<Pagination>,
}

#[derive(Deserialize)]
struct Pagination {
    next_page: Option<u32>,
}

#[derive(Deserialize)]
struct LocationJson {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    city: String,
    #[serde(default)]
    country: String,
    #[serde(default)]
    network_zone: String,
}

#[derive(Deserialize)]
struct Money {
    gross: String,
}

#[derive(Deserialize)]
struct PriceJson {
    location: String,
    price_monthly: Money,
    #[serde(default)]
    price_hourly: Option<Money>,
}

#[derive(Deserialize)]
struct ServerTypeJson {
    name: String,
    #[serde(default)]
    description: String,
    cores: u32,
    memory: f64,
    #[serde(default)]
    disk: u64,
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    deprecated: Option<bool>,
    #[serde(default)]
    deprecation: Option<serde_json::Value>,
    #[serde(default)]
    prices: Vec<PriceJson>,
}

#[derive(Deserialize)]
struct ImageJson {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    architecture: String,
}

fn arch(hetzner: &str) -> String {
    match hetzner {
        "arm" => "aarch64".into(),
        "x86" => "x86_64".into(),
        other => other.into(),
    }
}

impl Hetzner {
    /// A client with connect and total timeouts.
    pub fn new(base: &str, token: SecretString) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("headroom/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("reqwest client builds");
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http,
        }
    }

    /// GETs every page of a list endpoint, collecting the items under `key`.
    async fn list<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        key: &str,
    ) -> Result<Vec<T>, ProviderError> {
        let mut out = Vec::new();
        let mut page = 1_u32;
        loop {
            let page_s = page.to_string();
            let mut q: Vec<(&str, &str)> = query.to_vec();
            q.push(("page", &page_s));
            q.push(("per_page", "50"));
            let res = self
                .http
                .get(format!("{}{path}", self.base))
                .bearer_auth(self.token.expose_secret())
                .query(&q)
                .send()
                .await
                .map_err(|e| ProviderError::Transient(format!("GET {path}: {e}")))?;
            let body: serde_json::Value = check(res).await?;
            let items = body.get(key).cloned().unwrap_or_default();
            let items: Vec<T> = serde_json::from_value(items)
                .map_err(|e| ProviderError::other(format!("GET {path}: unexpected answer: {e}")))?;
            out.extend(items);
            let meta: Option<Meta> = body
                .get("meta")
                .and_then(|m| serde_json::from_value(m.clone()).ok());
            match meta.and_then(|m| m.pagination).and_then(|p| p.next_page) {
                Some(next) if next > page && page < 100 => page = next,
                _ => break,
            }
        }
        Ok(out)
    }
}

/// Maps an answer to its JSON body or a typed error.
async fn check(res: reqwest::Response) -> Result<serde_json::Value, ProviderError> {
    let status = res.status();
    let reset = res
        .headers()
        .get("ratelimit-reset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let text = res
        .text()
        .await
        .map_err(|e| ProviderError::Transient(e.to_string()))?;
    if status.is_success() {
        return serde_json::from_str(&text)
            .map_err(|e| ProviderError::other(format!("unexpected answer: {e}")));
    }
    let detail = serde_json::from_str::<ErrorBody>(&text)
        .ok()
        .map(|b| b.error);
    let (code, message) = detail.map_or_else(
        || (String::new(), text.chars().take(200).collect()),
        |d| (d.code, d.message),
    );
    let api = ApiError {
        code: code.clone(),
        message: message.clone(),
    };
    Err(match (status, code.as_str()) {
        (StatusCode::UNAUTHORIZED, _) | (_, "forbidden" | "token_readonly") => {
            ProviderError::Unauthorized(api)
        }
        (StatusCode::TOO_MANY_REQUESTS, _) | (_, "rate_limit_exceeded") => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            ProviderError::RateLimited {
                retry_after: Duration::from_secs(reset.map_or(1, |r| r.saturating_sub(now).max(1))),
            }
        }
        (_, "invalid_input" | "json_error") => ProviderError::InvalidInput(api),
        (_, "uniqueness_error") => ProviderError::NameConflict(api),
        (StatusCode::NOT_FOUND, _) | (_, "not_found") => ProviderError::NotFound(api),
        (_, "conflict" | "locked" | "service_error" | "maintenance" | "unavailable") => {
            ProviderError::Transient(message)
        }
        (s, _) if s.is_server_error() => ProviderError::Transient(format!("HTTP {s}: {message}")),
        (s, _) => ProviderError::Other(ApiError {
            code,
            message: format!("HTTP {s}: {message}"),
        }),
    })
}

impl MachineProvider for Hetzner {
    fn name(&self) -> &'static str {
        "hetzner"
    }

    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>> {
        Box::pin(async move {
            let locations: Vec<LocationJson> = self.list("/locations", &[], "locations").await?;
            let types: Vec<ServerTypeJson> =
                self.list("/server_types", &[], "server_types").await?;
            let images: Vec<ImageJson> = self
                .list(
                    "/images",
                    &[("type", "system"), ("status", "available")],
                    "images",
                )
                .await?;
            // Hetzner lists one image per architecture under the same name: merge them.
            let mut merged: BTreeMap<String, Image> = BTreeMap::new();
            for i in images {
                let Some(name) = i.name else { continue };
                let e = merged.entry(name.clone()).or_insert_with(|| Image {
                    name,
                    description: i.description.clone(),
                    archs: Vec::new(),
                });
                let a = arch(&i.architecture);
                if !e.archs.contains(&a) {
                    e.archs.push(a);
                }
            }
            Ok(Catalogue {
                locations: locations
                    .into_iter()
                    .map(|l| Location {
                        name: l.name,
                        description: l.description,
                        city: l.city,
                        country: l.country,
                        network_zone: l.network_zone,
                    })
                    .collect(),
                server_types: types
                    .into_iter()
                    .map(|t| ServerType {
                        deprecated: t.deprecated.unwrap_or(false)
                            || t.deprecation.is_some_and(|d| !d.is_null()),
                        name: t.name,
                        description: t.description,
                        cores: t.cores,
                        memory_gb: t.memory,
                        disk_gb: t.disk,
                        arch: arch(&t.architecture),
                        monthly_price: t
                            .prices
                            .iter()
                            .map(|p| (p.location.clone(), p.price_monthly.gross.clone()))
                            .collect(),
                        hourly_price: t
                            .prices
                            .into_iter()
                            .filter_map(|p| Some((p.location, p.price_hourly?.gross)))
                            .collect(),
                    })
                    .collect(),
                images: merged.into_values().collect(),
            })
        })
    }

    fn create_server<'a>(
        &'a self,
        _spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: create_server")) })
    }

    fn find_by_label<'a>(
        &'a self,
        _key: &'a str,
        _value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: find_by_label")) })
    }

    fn find_by_name<'a>(
        &'a self,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: find_by_name")) })
    }

    fn server(&self, _id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: server")) })
    }

    fn action(&self, _id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: action")) })
    }

    fn destroy(&self, _id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async { Err(ProviderError::other("PENDING: destroy")) })
    }
}

