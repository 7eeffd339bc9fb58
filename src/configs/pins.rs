//! Pin pre-flight of a config's tarball, remembered per (url, sha256).

use serde_json::json;

use super::{machines, ConfigError};
use crate::audit::{self, NewEntry};
use crate::auth::Caller;
use crate::cloud_init::pin::{self, PinVerdict};
use crate::db;
use crate::db::pins::PinCheck;
use crate::domain::Role;
use crate::state::AppState;

/// Downloads and checks the tarball of config `name`'s latest version (operator and up).
pub async fn check(state: &AppState, caller: &Caller, name: &str) -> Result<PinCheck, ConfigError> {
    caller.require(Role::Operator)?;
    let spec = machines::latest(&state.pool, name).await?.spec;
    let verdict = pin::preflight(
        &state.pin_client,
        &spec.yubaba_url,
        &spec.yubaba_sha256,
        state.settings.pin_limits,
    )
    .await;
    record(
        state,
        caller,
        &spec.yubaba_url,
        &spec.yubaba_sha256,
        &verdict,
    )
    .await
}

/// Stores a verdict with its audit entry.
pub async fn record(
    state: &AppState,
    caller: &Caller,
    url: &str,
    sha256: &str,
    verdict: &PinVerdict,
) -> Result<PinCheck, ConfigError> {
    let now = state.clock.now();
    let row = PinCheck {
        url: url.to_owned(),
        sha256: sha256.to_owned(),
        verdict: verdict.kind().to_owned(),
        message: verdict.message(),
        checked_at: now,
        checked_by: caller.actor.name().to_owned(),
    };
    let mut tx = db::begin_write(&state.pool).await?;
    db::pins::record(&mut tx, &row).await?;
    audit::append(
        &mut tx,
        now,
        NewEntry {
            actor: &caller.actor,
            action: "pin.checked",
            target_kind: "tarball",
            target_id: sha256,
            details: json!({ "url": url, "verdict": row.verdict, "message": row.message }),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// The remembered verdict for a config's current pin.
pub async fn latest_for(
    pool: &sqlx::SqlitePool,
    url: &str,
    sha256: &str,
) -> Result<Option<PinCheck>, ConfigError> {
    let mut conn = pool.acquire().await?;
    Ok(db::pins::get(&mut conn, url, sha256).await?)
}
