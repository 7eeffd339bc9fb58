//! Pin pre-flight: download the tarball (streaming, capped, with a deadline), hash it, and
//! compare with the pin before any machine is asked to do the same at first boot.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::audit::hex;

/// The outcome of a pre-flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinVerdict {
    /// The download's sha256 equals the pin.
    Verified { bytes: u64 },
    /// It does not: both digests are named.
    Mismatch {
        expected: String,
        actual: String,
        bytes: u64,
    },
    /// No verdict: unreachable, too large, too slow, not 2xx.
    Failed { message: String },
}

impl PinVerdict {
    /// Stored name of the verdict.
    pub fn kind(&self) -> &'static str {
        match self {
            PinVerdict::Verified { .. } => "verified",
            PinVerdict::Mismatch { .. } => "mismatch",
            PinVerdict::Failed { .. } => "error",
        }
    }

    /// A sentence for people.
    pub fn message(&self) -> String {
        match self {
            PinVerdict::Verified { bytes } => {
                format!("verified: {bytes} bytes match the pinned sha256")
            }
            PinVerdict::Mismatch {
                expected,
                actual,
                bytes,
            } => format!(
                "MISMATCH: the {bytes}-byte download hashes to {actual}, but the pin is {expected}"
            ),
            PinVerdict::Failed { message } => message.clone(),
        }
    }
}

/// Limits of a pre-flight.
#[derive(Debug, Clone, Copy)]
pub struct PinLimits {
    pub max_bytes: u64,
    pub timeout: Duration,
}

impl Default for PinLimits {
    fn default() -> Self {
        Self {
            max_bytes: 512 * 1024 * 1024,
            timeout: Duration::from_secs(120),
        }
    }
}

/// Downloads `url` and compares its sha256 with `expected`.
#[tracing::instrument(skip_all, fields(pin.url = %url), ret(level = "info"))]
pub async fn preflight(
    client: &reqwest::Client,
    url: &str,
    expected: &str,
    limits: PinLimits,
) -> PinVerdict {
    match tokio::time::timeout(
        limits.timeout,
        download(client, url, expected, limits.max_bytes),
    )
    .await
    {
        Ok(v) => v,
        Err(_) => PinVerdict::Failed {
            message: format!(
                "timed out after {} s downloading {url}",
                limits.timeout.as_secs_f32()
            ),
        },
    }
}

async fn download(
    client: &reqwest::Client,
    url: &str,
    expected: &str,
    max_bytes: u64,
) -> PinVerdict {
    let failed = |message: String| PinVerdict::Failed { message };
    let mut res = match client.get(url).send().await {
        Ok(r) => r,
        Err(e) => return failed(format!("cannot fetch {url}: {}", root_cause(&e))),
    };
    if !res.status().is_success() {
        return failed(format!("{url} answered HTTP {}", res.status()));
    }
    if res.content_length().is_some_and(|n| n > max_bytes) {
        return failed(format!(
            "{url} is {} bytes, over the {max_bytes}-byte limit",
            res.content_length().unwrap_or(0)
        ));
    }
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    loop {
        match res.chunk().await {
            Ok(Some(chunk)) => {
                total += chunk.len() as u64;
                if total > max_bytes {
                    return failed(format!(
                        "{url} is over the {max_bytes}-byte limit; download stopped"
                    ));
                }
                hasher.update(&chunk);
            }
            Ok(None) => break,
            Err(e) => return failed(format!("download of {url} failed: {}", root_cause(&e))),
        }
    }
    let actual = hex(&hasher.finalize());
    if actual == expected {
        PinVerdict::Verified { bytes: total }
    } else {
        PinVerdict::Mismatch {
            expected: expected.to_owned(),
            actual,
            bytes: total,
        }
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
