//! Pin pre-flight: download the tarball (streaming, capped, with a deadline), hash it, and
//! compare with the pin before any machine is asked to do the same at first boot.

use sha2::{Digest, Sha256};

/// Pre-flight limits are settings; re-exported beside the function that takes them.
pub use crate::config::PinLimits;
use crate::domain::digest::hex;
use crate::outbound::{FetchError, OutboundClient};

/// What a pre-flight concluded, without the details: what is stored and shown as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictKind {
    /// `verified`: the download matched the pin.
    Verified,
    /// `mismatch`: it did not.
    Mismatch,
    /// `error`: no verdict (refused, unreachable, too large, …).
    Error,
}

impl VerdictKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Verified => "verified",
            VerdictKind::Mismatch => "mismatch",
            VerdictKind::Error => "error",
        }
    }

    /// The kind a stored name names.
    pub fn from_stored(name: &str) -> Option<VerdictKind> {
        [Self::Verified, Self::Mismatch, Self::Error]
            .into_iter()
            .find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// Compares as its stored name, so checks read `verdict == "verified"`.
impl PartialEq<&str> for VerdictKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

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
    /// No verdict: refused by the outbound policy, unreachable, too large, too slow, not 2xx.
    Failed { message: String },
}

impl PinVerdict {
    /// Bytes downloaded, when the download completed.
    pub fn bytes(&self) -> Option<u64> {
        match self {
            PinVerdict::Verified { bytes } | PinVerdict::Mismatch { bytes, .. } => Some(*bytes),
            PinVerdict::Failed { .. } => None,
        }
    }

    /// What kind of verdict it is (stored beside its message).
    pub fn kind(&self) -> VerdictKind {
        match self {
            PinVerdict::Verified { .. } => VerdictKind::Verified,
            PinVerdict::Mismatch { .. } => VerdictKind::Mismatch,
            PinVerdict::Failed { .. } => VerdictKind::Error,
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

/// Downloads `url` through the outbound policy and compares its sha256 with `expected`.
#[tracing::instrument(skip_all, fields(pin.url = %url), ret(level = "info"))]
pub async fn preflight(
    client: &OutboundClient,
    url: &str,
    expected: &str,
    limits: PinLimits,
) -> PinVerdict {
    // The client has a total timeout of its own (from the settings); this one applies the
    // caller's limits, and whichever ends the fetch first, the message is the same.
    match tokio::time::timeout(
        limits.timeout,
        download(client, url, expected, limits.max_bytes),
    )
    .await
    {
        Ok(Err(FetchError::TimedOut)) | Err(_) => PinVerdict::Failed {
            message: format!("timed out after {} s", limits.timeout.as_secs_f32()),
        },
        Ok(Err(reason)) => PinVerdict::Failed {
            message: reason.to_string(),
        },
        Ok(Ok(verdict)) => verdict,
    }
}

/// Streams and hashes the body. Failures carry only the outbound client's generic reasons:
/// the message is shown to whoever asked for the check and must not describe the network.
async fn download(
    client: &OutboundClient,
    url: &str,
    expected: &str,
    max_bytes: u64,
) -> Result<PinVerdict, FetchError> {
    let too_large = |size: String| PinVerdict::Failed {
        message: format!("the tarball is {size} the {max_bytes}-byte limit; download stopped"),
    };
    let mut res = client.get(url).await?;
    if let Some(n) = res.content_length().filter(|n| *n > max_bytes) {
        return Ok(too_large(format!("{n} bytes, over")));
    }
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| FetchError::from_reqwest(&e))?
    {
        total += chunk.len() as u64;
        if total > max_bytes {
            return Ok(too_large("over".into()));
        }
        hasher.update(&chunk);
    }
    let actual = hex(&hasher.finalize());
    Ok(if actual == expected {
        PinVerdict::Verified { bytes: total }
    } else {
        PinVerdict::Mismatch {
            expected: expected.to_owned(),
            actual,
            bytes: total,
        }
    })
}
