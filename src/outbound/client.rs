//! The one HTTP client for fetches whose destination a user chose: the policy applied before
//! the request (IP literals, `localhost`), in DNS resolution and at every redirect hop, with
//! connect and total timeouts, and failures reduced to reasons that do not tell an open port
//! from a closed one.

use std::sync::Arc;
use std::time::Duration;

use url::Url;

use super::policy::{check_url, AllowList, Hop, Purpose, Refusal};
use super::resolver::{Lookup, PolicyResolver, SystemLookup};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 3;

/// Why a fetch produced no usable response, as callers (and through them, users) see it.
/// The cause is logged; the reason is deliberately coarse: a refused connection, a reset, a
/// connect timeout and a failed TLS handshake are all "could not connect".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The policy refused the destination (or a redirect hop) before connecting to it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// No answer could be had from the destination.
    #[error("could not connect")]
    CouldNotConnect,
    /// The whole fetch took longer than the client's total timeout.
    #[error("timed out")]
    TimedOut,
    /// The server answered, but not with success.
    #[error("HTTP {0}")]
    Status(u16),
    /// More than `MAX_REDIRECTS` redirects.
    #[error("too many redirects")]
    TooManyRedirects,
    /// The connection broke while the body was being read.
    #[error("download interrupted")]
    Interrupted,
}

/// The marker the redirect policy returns once the hop limit is passed.
#[derive(Debug, thiserror::Error)]
#[error("too many redirects")]
struct TooManyRedirects;

impl FetchError {
    /// The generic reason for a reqwest failure; the detail goes to the log only.
    pub fn from_reqwest(e: &reqwest::Error) -> Self {
        let reason = classify(e);
        tracing::info!(outbound.reason = %reason, error = %cause_chain(e), "outbound fetch failed");
        reason
    }
}

fn classify(e: &reqwest::Error) -> FetchError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return FetchError::Refused(*r);
        }
        if err.is::<TooManyRedirects>() {
            return FetchError::TooManyRedirects;
        }
        source = err.source();
    }
    if e.is_connect() {
        FetchError::CouldNotConnect
    } else if e.is_timeout() {
        FetchError::TimedOut
    } else if e.is_body() || e.is_decode() {
        FetchError::Interrupted
    } else {
        // Anything else before a response (a closed stream, a garbled answer) is, to the
        // caller, the same as no answer.
        FetchError::CouldNotConnect
    }
}

fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(next) = cur {
        out.push_str(": ");
        out.push_str(&next.to_string());
        cur = next.source();
    }
    out
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The extra CA certificates did not parse.
    #[error("outbound CA certificates: {0}")]
    Certificates(String),
    /// reqwest refused the configuration.
    #[error("outbound client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Settings of a client under construction.
pub struct OutboundBuilder {
    purpose: Purpose,
    allow: AllowList,
    connect_timeout: Duration,
    timeout: Duration,
    roots: Vec<reqwest::Certificate>,
    lookup: Arc<dyn Lookup>,
    follow_redirects: bool,
}

impl OutboundBuilder {
    /// Limit on connecting, TLS handshake included (default 10 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Limit on a whole fetch, body included (default 60 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// Trusts the CA certificates of a PEM bundle besides the built-in roots (an internal
    /// mirror behind an allow-listed host).
    pub fn ca_pem(mut self, pem: &[u8]) -> Result<Self, BuildError> {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| BuildError::Certificates(e.to_string()))?;
        if certs.is_empty() {
            return Err(BuildError::Certificates(
                "no PEM certificate found in the bundle".into(),
            ));
        }
        self.roots.extend(certs);
        Ok(self)
    }

    /// `ca_pem` with the contents of a file.
    pub fn ca_file(self, path: &std::path::Path) -> Result<Self, BuildError> {
        let pem = std::fs::read(path).map_err(|e| {
            BuildError::Certificates(format!("cannot read {}: {e}", path.display()))
        })?;
        self.ca_pem(&pem)
    }

    /// Follows no redirect at all: a 3xx is returned as the answer (the scrape client: yubaba
    /// never redirects, and a hop chosen by a node could reach any path of any host the
    /// policy allows).
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Replaces the system resolver (tests answer from a table, never from the network).
    pub fn lookup(mut self, lookup: Arc<dyn Lookup>) -> Self {
        self.lookup = lookup;
        self
    }

    /// The client.
    pub fn build(self) -> Result<OutboundClient, BuildError> {
        let allow = Arc::new(self.allow);
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            // A proxy from the environment would be connected to instead of the checked
            // destination, and the proxy would do the resolving: none.
            .no_proxy()
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout)
            .redirect(if self.follow_redirects {
                redirect_policy(self.purpose, allow.clone())
            } else {
                reqwest::redirect::Policy::none()
            })
            // Hops may lead elsewhere; they need not learn where the chain started.
            .referer(false)
            .dns_resolver(Arc::new(PolicyResolver {
                purpose: self.purpose,
                allow: allow.clone(),
                lookup: self.lookup,
            }))
            .user_agent(concat!("headroom/", env!("CARGO_PKG_VERSION")));
        for cert in self.roots {
            builder = builder.add_root_certificate(cert);
        }
        Ok(OutboundClient {
            http: builder.build()?,
            purpose: self.purpose,
            allow,
        })
    }
}

/// Follows at most `MAX_REDIRECTS` hops, each judged like a first request (pins: https only).
fn redirect_policy(purpose: Purpose, allow: Arc<AllowList>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        // `previous` starts with the first URL, so its length is the number of this hop.
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(TooManyRedirects);
        }
        match check_url(purpose, &allow, attempt.url(), Hop::Redirect) {
            Ok(()) => attempt.follow(),
            Err(refusal) => attempt.error(refusal),
        }
    })
}

/// A reqwest client bound to one purpose's policy; cheap to clone.
#[derive(Clone)]
pub struct OutboundClient {
    http: reqwest::Client,
    purpose: Purpose,
    allow: Arc<AllowList>,
}

impl std::fmt::Debug for OutboundClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboundClient")
            .field("purpose", &self.purpose)
            .field("allow", &self.allow)
            .finish_non_exhaustive()
    }
}

impl OutboundClient {
    /// A builder for `purpose` with the settings' allow-list.
    pub fn builder(purpose: Purpose, allow: AllowList) -> OutboundBuilder {
        OutboundBuilder {
            purpose,
            allow,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            roots: Vec::new(),
            lookup: Arc::new(SystemLookup),
            follow_redirects: true,
        }
    }

    /// What this client fetches for.
    pub fn purpose(&self) -> Purpose {
        self.purpose
    }

    /// GETs `url` after checking it; a non-2xx answer is `FetchError::Status`.
    #[tracing::instrument(skip_all, fields(outbound.purpose = ?self.purpose))]
    pub async fn get(&self, url: &str) -> Result<reqwest::Response, FetchError> {
        // An unparsable URL has no destination to judge; it cannot be reached either.
        let parsed = Url::parse(url).map_err(|_| FetchError::Refused(Refusal::NoHost))?;
        check_url(self.purpose, &self.allow, &parsed, Hop::First).inspect_err(|r| {
            tracing::info!(outbound.reason = %r, "outbound fetch refused before connecting");
        })?;
        let res = self
            .http
            .get(parsed)
            .send()
            .await
            .map_err(|e| FetchError::from_reqwest(&e))?;
        if !res.status().is_success() {
            return Err(FetchError::Status(res.status().as_u16()));
        }
        Ok(res)
    }

    /// GETs `url` after checking it, within `timeout` (shorter than the client's own, e.g. a
    /// fleet's scrape timeout), and returns the answer whatever its status: a scraper reads
    /// the body of a 503 too (yubaba without raft answers it in plain text). The caller bounds
    /// how much of the body it reads.
    #[tracing::instrument(skip_all, fields(outbound.purpose = ?self.purpose))]
    pub async fn get_any_status(
        &self,
        url: &str,
        timeout: std::time::Duration,
    ) -> Result<reqwest::Response, FetchError> {
        let parsed = Url::parse(url).map_err(|_| FetchError::Refused(Refusal::NoHost))?;
        check_url(self.purpose, &self.allow, &parsed, Hop::First).inspect_err(|r| {
            tracing::info!(outbound.reason = %r, "outbound fetch refused before connecting");
        })?;
        self.http
            .get(parsed)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| FetchError::from_reqwest(&e))
    }

    /// POSTs `body` with `headers` to `url` after checking it (webhook deliveries); a non-2xx
    /// answer is `FetchError::Status`, its body unread.
    #[tracing::instrument(skip_all, fields(outbound.purpose = ?self.purpose))]
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> Result<reqwest::Response, FetchError> {
        let parsed = Url::parse(url).map_err(|_| FetchError::Refused(Refusal::NoHost))?;
        check_url(self.purpose, &self.allow, &parsed, Hop::First).inspect_err(|r| {
            tracing::info!(outbound.reason = %r, "outbound post refused before connecting");
        })?;
        let mut req = self.http.post(parsed).body(body);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let res = req.send().await.map_err(|e| FetchError::from_reqwest(&e))?;
        if !res.status().is_success() {
            return Err(FetchError::Status(res.status().as_u16()));
        }
        Ok(res)
    }
}
