//! Hetzner Cloud over its REST API (`HEADROOM_HETZNER_API_URL`, bearer `HETZNER_API_TOKEN`).
//!
//! Every call goes through `Hetzner::call`: one shared request budget (see `budget`), 429
//! honoured until the announced reset, and transient failures retried with bounded jittered
//! backoff, except where a retry could create a second server (see `Retry`).

mod budget;
mod wire;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;

use super::{
    ApiError, BoxFuture, Catalogue, Created, Image, Location, MachineProvider, ProviderAction,
    ProviderError, Server, ServerSpec, ServerType,
};
use budget::Budget;
use wire::{arch, ImageJson, LocationJson, Meta, ServerTypeJson};

/// Timeouts and the bounds of retrying and waiting. `Default` is for production; tests shrink
/// the numbers.
#[derive(Debug, Clone)]
pub struct HetznerOptions {
    /// Time to open a connection.
    pub connect_timeout: Duration,
    /// Time for a whole request, answer included.
    pub timeout: Duration,
    /// Tries per call for transient failures (the first try included).
    pub attempts: u32,
    /// First backoff; doubles per try, with jitter, up to `backoff_max`.
    pub backoff_base: Duration,
    /// Longest single backoff.
    pub backoff_max: Duration,
    /// Longest a call waits for the rate limit (a 429's reset, a spent budget) before it gives
    /// up with `RateLimited`.
    pub max_rate_wait: Duration,
    /// How often the provider gives one request back (Hetzner: about one per second).
    pub refill_interval: Duration,
}

impl Default for HetznerOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            attempts: 4,
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(4),
            max_rate_wait: Duration::from_secs(60),
            refill_interval: Duration::from_secs(1),
        }
    }
}

/// The Hetzner Cloud client.
pub struct Hetzner {
    base: String,
    token: SecretString,
    http: reqwest::Client,
    options: HetznerOptions,
    budget: Budget,
}

impl std::fmt::Debug for Hetzner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hetzner")
            .field("base", &self.base)
            .field("token", &"«redacted»")
            .field("options", &self.options)
            .finish()
    }
}

/// Whether a call may be sent again after a failure that might have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Reads and deletes: doing them twice is harmless.
    Always,
    /// A create: Hetzner has no idempotency key, so a create whose answer was lost (a timeout,
    /// a dropped connection, a 5xx that a gateway may have sent after the server was made)
    /// must NOT be sent again blindly, or there would be two servers. It is retried only when
    /// nothing can have happened (no connection was made, or a 429 refused it up front);
    /// otherwise the error is returned as `Transient` and the runner looks the server up by
    /// its provision label before it ever creates again.
    OnlyIfNotSent,
}

/// The label selector `key==value`, refusing anything outside Hetzner's label syntax so that
/// nothing can widen the selection (`,`, `!`, ` in (…)`).
fn selector(key: &str, value: &str) -> Result<String, ProviderError> {
    let invalid = |why: String| {
        ProviderError::InvalidInput(ApiError {
            code: "invalid_input".into(),
            message: format!("label selector {why}"),
        })
    };
    crate::domain::machine::LabelKey::parse(key).map_err(invalid)?;
    crate::domain::machine::LabelValue::parse(value).map_err(invalid)?;
    Ok(format!("{key}=={value}"))
}

/// Random fraction in [0, 1) for jitter.
fn jitter() -> f64 {
    let mut b = [0_u8; 4];
    // Without randomness the backoff is merely unjittered; nothing depends on it.
    let _ = getrandom::getrandom(&mut b);
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}

/// How long to wait until `RateLimit-Reset` (unix seconds), or one refill without it.
fn until_reset(reset: Option<u64>, refill: Duration) -> Duration {
    let Some(reset) = reset else { return refill };
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(reset);
    when.duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
}

fn header_u64(res: &reqwest::Response, name: &str) -> Option<u64> {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

impl Hetzner {
    /// A client with the default timeouts and retry bounds.
    pub fn new(base: &str, token: SecretString) -> Self {
        Self::with_options(base, token, HetznerOptions::default())
    }

    /// A client with explicit timeouts and retry bounds.
    pub fn with_options(base: &str, token: SecretString, options: HetznerOptions) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.timeout)
            .user_agent(concat!("headroom/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("reqwest client builds");
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http,
            budget: Budget::new(options.refill_interval),
            options,
        }
    }

    /// The `n`-th backoff (1-based): doubling from the base, capped, with half of it jittered.
    fn backoff(&self, n: u32) -> Duration {
        let full = self
            .options
            .backoff_base
            .saturating_mul(1_u32 << n.saturating_sub(1).min(16))
            .min(self.options.backoff_max);
        full.mul_f64(0.5 + jitter() / 2.0)
    }

    /// One API call with the budget, rate-limit waits and retries; the JSON answer or a typed
    /// error.
    async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&serde_json::Value>,
        retry: Retry,
    ) -> Result<serde_json::Value, ProviderError> {
        let mut tries = 0_u32;
        let mut rate_waits = 0_u32;
        loop {
            tries += 1;
            match self.try_once(&method, path, query, body).await {
                Ok(v) => return Ok(v),
                Err(Failure {
                    error: ProviderError::RateLimited { retry_after },
                    ..
                }) => {
                    // Refused up front, so nothing happened: any call (a create too) may go
                    // again once the reset has passed, if that is soon enough.
                    rate_waits += 1;
                    if retry_after > self.options.max_rate_wait
                        || rate_waits > self.options.attempts
                    {
                        return Err(ProviderError::RateLimited { retry_after });
                    }
                    self.budget
                        .block_until(std::time::Instant::now() + retry_after);
                    tries -= 1;
                }
                Err(Failure { error, maybe_done }) => {
                    let again = error.is_transient()
                        && (retry == Retry::Always || !maybe_done)
                        && tries < self.options.attempts;
                    if !again {
                        return Err(error);
                    }
                    tokio::time::sleep(self.backoff(tries)).await;
                }
            }
        }
    }

    /// One try: take a slot from the budget, send, feed the budget from the answer's headers.
    async fn try_once(
        &self,
        method: &Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, Failure> {
        let what = format!("{method} {path}");
        let ticket = self
            .budget
            .acquire(self.options.max_rate_wait)
            .await
            .map_err(|retry_after| Failure {
                error: ProviderError::RateLimited { retry_after },
                maybe_done: false,
            })?;
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(self.token.expose_secret())
            .query(query);
        if let Some(body) = body {
            req = req.json(body);
        }
        let res = match req.send().await {
            Ok(res) => res,
            Err(e) => {
                let why = if e.is_timeout() {
                    "timed out"
                } else {
                    "transport error"
                };
                return Err(Failure {
                    error: ProviderError::Transient(format!("{what}: {why}: {e}")),
                    // A connection that never opened carried nothing to Hetzner.
                    maybe_done: !e.is_connect(),
                });
            }
        };
        let reset = header_u64(&res, "ratelimit-reset");
        self.budget.observe(
            header_u64(&res, "ratelimit-limit"),
            header_u64(&res, "ratelimit-remaining"),
            reset,
        );
        drop(ticket);
        let status = res.status();
        let text = res.text().await.map_err(|e| Failure {
            // The answer started and broke off: as lost as a timeout.
            error: ProviderError::Transient(format!("{what}: answer lost: {e}")),
            maybe_done: true,
        })?;
        if status.is_success() {
            if text.trim().is_empty() {
                return Ok(serde_json::Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| Failure {
                error: ProviderError::other(format!("{what}: unexpected answer: {e}")),
                maybe_done: true,
            });
        }
        Err(Failure {
            error: wire::error(
                status,
                &text,
                until_reset(reset, self.options.refill_interval),
            ),
            maybe_done: status != StatusCode::TOO_MANY_REQUESTS,
        })
    }

    /// A typed answer from `call`.
    async fn call_as<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        retry: Retry,
    ) -> Result<T, ProviderError> {
        let what = format!("{method} {path}");
        let v = self.call(method, path, &[], body, retry).await?;
        serde_json::from_value(v)
            .map_err(|e| ProviderError::other(format!("{what}: unexpected answer: {e}")))
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
            let body = self
                .call(Method::GET, path, &q, None, Retry::Always)
                .await?;
            let items = body.get(key).cloned().unwrap_or_default();
            let items: Vec<T> = serde_json::from_value(items)
                .map_err(|e| ProviderError::other(format!("GET {path}: unexpected answer: {e}")))?;
            out.extend(items);
            let meta: Option<Meta> = body
                .get("meta")
                .and_then(|m| serde_json::from_value(m.clone()).ok());
            match meta.and_then(|m| m.pagination).and_then(|p| p.next_page) {
                // A bound, so a provider that never stops paging cannot keep us here.
                Some(next) if next > page && page < 100 => page = next,
                _ => break,
            }
        }
        Ok(out)
    }
}

/// A failed try, and whether the request may have taken effect at the provider.
struct Failure {
    error: ProviderError,
    maybe_done: bool,
}

/// The create body as Hetzner's API defines it.
fn create_body(spec: &ServerSpec) -> serde_json::Value {
    serde_json::json!({
        "name": spec.name,
        "server_type": spec.server_type,
        "image": spec.image,
        "location": spec.location,
        "user_data": spec.user_data.expose_secret(),
        "labels": spec.labels,
        "ssh_keys": spec.ssh_keys,
        "public_net": {"enable_ipv4": true, "enable_ipv6": true},
        "start_after_create": true,
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
        spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let body = create_body(spec);
            let answer = self
                .call(
                    Method::POST,
                    "/servers",
                    &[],
                    Some(&body),
                    Retry::OnlyIfNotSent,
                )
                .await?;
            // A 2xx whose body cannot be read still made a server: answer as if it were lost,
            // so the runner finds it by its label instead of failing a machine that exists.
            let answer: wire::CreateAnswer = serde_json::from_value(answer).map_err(|e| {
                ProviderError::Transient(format!("POST /servers: created, answer unreadable: {e}"))
            })?;
            Ok(answer.into())
        })
    }

    fn find_by_label<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        Box::pin(async move {
            let selector = selector(key, value)?;
            let servers: Vec<wire::ServerJson> = self
                .list("/servers", &[("label_selector", &selector)], "servers")
                .await?;
            Ok(servers.into_iter().map(Into::into).collect())
        })
    }

    fn find_by_name<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        Box::pin(async move {
            let servers: Vec<wire::ServerJson> =
                self.list("/servers", &[("name", name)], "servers").await?;
            Ok(servers
                .into_iter()
                .map(Server::from)
                .find(|s| s.name == name))
        })
    }

    fn server(&self, id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        Box::pin(async move {
            let path = format!("/servers/{id}");
            match self
                .call_as::<wire::OneServer>(Method::GET, &path, None, Retry::Always)
                .await
            {
                Ok(one) => Ok(Some(one.server.into())),
                Err(ProviderError::NotFound(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn action(&self, id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        Box::pin(async move {
            let path = format!("/actions/{id}");
            let one: wire::OneAction = self
                .call_as(Method::GET, &path, None, Retry::Always)
                .await?;
            Ok(one.action.into())
        })
    }

    fn destroy(&self, id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(async move {
            let path = format!("/servers/{id}");
            // Deleting twice is harmless, so a lost answer is simply retried.
            match self
                .call(Method::DELETE, &path, &[], None, Retry::Always)
                .await
            {
                Ok(_) | Err(ProviderError::NotFound(_)) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_the_client_and_of_a_spec_shows_neither_the_token_nor_the_user_data() {
        let token = "hz-token-SECRET-4711";
        let client = Hetzner::new(
            "http://127.0.0.1:9/v1",
            SecretString::from(token.to_owned()),
        );
        let shown = format!("{client:?} {client:#?}");
        assert!(!shown.contains(token), "{shown}");
        assert!(shown.contains("«redacted»"));

        let spec = ServerSpec {
            name: "node-1".into(),
            server_type: "cx22".into(),
            image: "debian-12".into(),
            location: "fsn1".into(),
            user_data: SecretString::from("#cloud-config\nauth-key: tskey-SECRET-99\n".to_owned()),
            labels: BTreeMap::new(),
            ssh_keys: vec![1],
        };
        let shown = format!("{spec:?} {spec:#?}");
        assert!(!shown.contains("tskey-SECRET-99"), "{shown}");
        assert!(!shown.contains("cloud-config"), "{shown}");
        assert!(shown.contains("node-1"));
    }

    #[test]
    fn a_selector_is_key_equals_equals_value_and_only_in_hetzner_s_label_syntax() {
        assert_eq!(
            selector("headroom-provision", "12").unwrap(),
            "headroom-provision==12"
        );
        assert_eq!(
            selector("example.com/role", "").unwrap(),
            "example.com/role=="
        );
        for (k, v) in [
            ("a", "1,b=2"),
            ("a", "x y"),
            ("!a", "1"),
            ("a", "(1)"),
            ("", "1"),
        ] {
            assert!(
                matches!(selector(k, v), Err(ProviderError::InvalidInput(_))),
                "{k}={v}"
            );
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stays_under_its_cap() {
        let client = Hetzner::with_options(
            "http://127.0.0.1:9/v1",
            SecretString::from("t".to_owned()),
            HetznerOptions {
                backoff_base: Duration::from_millis(100),
                backoff_max: Duration::from_millis(300),
                ..HetznerOptions::default()
            },
        );
        for _ in 0..20 {
            let first = client.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let second = client.backoff(2);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200));
            assert!(client.backoff(10) <= Duration::from_millis(300));
        }
    }
}
