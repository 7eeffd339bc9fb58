//! One GET of a scrape: through the scraping client (the outbound policy: loopback and private
//! allowed, link-local refused before any connect), any status accepted (a 503's text is read
//! too), the body read under a cap, and everything within the tick's one deadline, so a node
//! that trickles its answer cannot hold a tick past the fleet's timeout.

use tokio::time::Instant;

use crate::outbound::{FetchError, OutboundClient};

/// Bytes of an answer read at most; a status body is a few KiB, a `/node` body less.
pub const BODY_CAP: usize = 256 * 1024;

/// An answer read whole (under the cap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Its HTTP status.
    pub status: u16,
    /// Its headers (moved out of the response, not copied; hyper bounds their number and size).
    pub headers: reqwest::header::HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
}

/// Why a GET produced no answer to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GetError {
    /// Refused by the policy, no connection, an interrupted read: already coarse.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The tick's deadline passed.
    #[error("timed out")]
    TimedOut,
    /// The body is larger than `BODY_CAP`; nothing past the cap was read.
    #[error("body larger than {} KiB", BODY_CAP / 1024)]
    TooLarge,
}

/// GETs `url` and reads its body, all before `deadline`.
pub async fn get(
    client: &OutboundClient,
    url: &str,
    deadline: Instant,
) -> Result<Answer, GetError> {
    get_capped(client, url, deadline, BODY_CAP).await
}

/// `get` with another cap (tests use a small one).
pub async fn get_capped(
    client: &OutboundClient,
    url: &str,
    deadline: Instant,
    cap: usize,
) -> Result<Answer, GetError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(GetError::TimedOut);
    }
    // The client's own timeout covers sending and the headers; the outer one also covers a
    // body read chunk by chunk.
    match tokio::time::timeout_at(deadline, read(client, url, remaining, cap)).await {
        Ok(answer) => answer,
        Err(_) => Err(GetError::TimedOut),
    }
}

async fn read(
    client: &OutboundClient,
    url: &str,
    timeout: std::time::Duration,
    cap: usize,
) -> Result<Answer, GetError> {
    let mut res = client.get_any_status(url, timeout).await?;
    let status = res.status().as_u16();
    let headers = std::mem::take(res.headers_mut());
    // A declared length over the cap is refused before a byte of the body is read.
    if res.content_length().is_some_and(|n| n > cap as u64) {
        return Err(GetError::TooLarge);
    }
    let mut body = Vec::new();
    loop {
        match res.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > cap {
                    return Err(GetError::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(match FetchError::from_reqwest(&e) {
                    FetchError::TimedOut => GetError::TimedOut,
                    other => GetError::Fetch(other),
                })
            }
        }
    }
    Ok(Answer {
        status,
        headers,
        body,
    })
}
