//! Pin pre-flight of a config's tarball, remembered per (url, sha256).

use serde_json::json;

use super::configs;
use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::cloud_init::pin::{self, PinVerdict, VerdictKind};
use crate::context::Ctx;
use crate::db;
use crate::db::pins::PinCheckRow;
use crate::domain::machine::{document_name, Sha256Pin};
use crate::domain::{parse_stored, parse_stored_name, Role, UnixMillis};
use crate::error::OpError;

/// A remembered pin verdict, as the config page and the API show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinCheck {
    pub url: String,
    pub sha256: Sha256Pin,
    pub verdict: VerdictKind,
    /// The verdict in a sentence.
    pub message: String,
    pub checked_at: UnixMillis,
    /// The actor name of who asked for the check.
    pub checked_by: String,
}

impl TryFrom<PinCheckRow> for PinCheck {
    type Error = OpError;
    fn try_from(r: PinCheckRow) -> Result<Self, OpError> {
        Ok(PinCheck {
            url: r.url,
            sha256: parse_stored("pin_checks.sha256", &r.sha256, Sha256Pin::parse)?,
            verdict: parse_stored_name("pin_checks.verdict", &r.verdict, VerdictKind::from_stored)?,
            message: r.message,
            checked_at: r.checked_at,
            checked_by: r.checked_by,
        })
    }
}

/// A finished check: the stored verdict and, when the download completed, its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinOutcome {
    /// The remembered verdict (as the config page shows it).
    pub check: PinCheck,
    /// Bytes downloaded; `None` when the download did not complete.
    pub bytes: Option<u64>,
}

impl PinOutcome {
    /// Whether the download matched the pin.
    pub fn ok(&self) -> bool {
        self.check.verdict == VerdictKind::Verified
    }
}

/// Downloads and checks the tarball of config `name`'s latest version (operator and up),
/// through the outbound policy for pins; the verdict is stored and audited, whatever it is.
/// The page's "Download and check now" button and the API's pin-check both call this.
pub async fn check(ctx: &Ctx, caller: &Caller, name: &str) -> Result<PinOutcome, OpError> {
    caller.require(Role::Operator)?;
    // A name that could never exist is a field error, not a lookup.
    document_name("name", name)?;
    let spec = configs::latest(ctx, caller, name).await?.spec;
    download_and_record(ctx, caller, &spec.yubaba_url, &spec.yubaba_sha256).await
}

/// A verified pin younger than this is not downloaded again when a request is filed: a burst
/// of requests downloads the tarball once, and a release taken down is noticed within a day.
pub const VERIFIED_FRESH_MS: UnixMillis = 24 * 3_600_000;

/// Any other verdict younger than this is not downloaded again when a request is filed: a
/// host that fails or serves other bytes costs one download per ten minutes however many
/// requests are filed (the config page's button checks at once).
pub const UNVERIFIED_FRESH_MS: UnixMillis = 10 * 60_000;

/// Checks the pin (`url`, `sha256`) of a request just filed, as `system`, unless a check of
/// that pair is running or a verdict fresh by [`VERIFIED_FRESH_MS`] or
/// [`UNVERIFIED_FRESH_MS`] is remembered (`None` then). Checks of different pairs share a
/// few slots (`Ctx::pin_check_slots`), so one slow host never holds the others.
pub async fn check_for_request(
    ctx: &Ctx,
    url: &str,
    sha256: &str,
) -> Result<Option<PinOutcome>, OpError> {
    let system = Caller::system();
    let Some(_running) = Running::claim(ctx, url, sha256) else {
        return Ok(None);
    };
    let _slot = ctx
        .pin_check_slots
        .acquire()
        .await
        .map_err(anyhow::Error::from)?;
    let fresh = latest_for(ctx, &system, url, sha256)
        .await?
        .is_some_and(|c| {
            let fresh_for = if c.verdict == VerdictKind::Verified {
                VERIFIED_FRESH_MS
            } else {
                UNVERIFIED_FRESH_MS
            };
            ctx.clock.now() - c.checked_at < fresh_for
        });
    if fresh {
        return Ok(None);
    }
    download_and_record(ctx, &system, url, sha256)
        .await
        .map(Some)
}

/// A pair in `Ctx::pin_checks_running` for as long as this lives.
struct Running<'a> {
    ctx: &'a Ctx,
    pair: (String, String),
}

impl<'a> Running<'a> {
    /// `None` when a check of the pair is already running.
    fn claim(ctx: &'a Ctx, url: &str, sha256: &str) -> Option<Self> {
        let pair = (url.to_owned(), sha256.to_owned());
        let mut running = ctx
            .pin_checks_running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // `then`, not `then_some`: an eagerly built `Running` would be dropped here, and its
        // `Drop` would lock the set this guard holds.
        running.insert(pair.clone()).then(|| Running { ctx, pair })
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.ctx
            .pin_checks_running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.pair);
    }
}

/// Downloads through the outbound policy for pins, then stores and audits the verdict,
/// whatever it is.
async fn download_and_record(
    ctx: &Ctx,
    caller: &Caller,
    url: &str,
    sha256: &str,
) -> Result<PinOutcome, OpError> {
    let verdict = pin::preflight(&ctx.pin_client, url, sha256, ctx.settings.pin_limits).await;
    let check = record(ctx, caller, url, sha256, &verdict).await?;
    Ok(PinOutcome {
        check,
        bytes: verdict.bytes(),
    })
}

/// Stores a verdict with its audit entry.
async fn record(
    ctx: &Ctx,
    caller: &Caller,
    url: &str,
    sha256: &str,
    verdict: &PinVerdict,
) -> Result<PinCheck, OpError> {
    let now = ctx.clock.now();
    let row = PinCheckRow {
        url: url.to_owned(),
        sha256: sha256.to_owned(),
        verdict: verdict.kind().as_str().to_owned(),
        message: verdict.message(),
        checked_at: now,
        checked_by: caller.actor.name().to_owned(),
    };
    let mut tx = db::begin_write(&ctx.pool).await?;
    db::pins::record(&mut tx, &row).await?;
    let details = json!({ "url": url, "verdict": row.verdict, "message": row.message });
    audit::record(
        &mut tx,
        caller,
        now,
        Action::PinChecked,
        "tarball",
        sha256,
        details,
    )
    .await?;
    tx.commit().await?;
    row.try_into()
}

/// The remembered verdict for a config's current pin.
pub async fn latest_for(
    ctx: &Ctx,
    caller: &Caller,
    url: &str,
    sha256: &str,
) -> Result<Option<PinCheck>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    db::pins::get(&mut conn, url, sha256)
        .await?
        .map(PinCheck::try_from)
        .transpose()
}
