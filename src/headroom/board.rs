//! Each fleet now: the dashboard's cards, the fleet page's header, the fleet API's status and
//! `/metrics` read this, never the history. One query for the whole board (fleet, status row,
//! open deficit, open requests), so its cost follows the number of fleets.

use crate::context::Ctx;
use crate::db;
use crate::db::fleet_status::BoardRow;
use crate::domain::fleet::{FleetSpec, SCRAPE_INTERVAL_SECS_DEFAULT};
use crate::domain::headroom::{health, DeficitTimeline, FleetNow, Member, Source};
use crate::domain::{Caller, Role, UnixMillis};
use crate::fleets::FleetsError;

/// Most deficits one `deficits` call returns.
pub const DEFICITS_LIMIT_MAX: u32 = 200;

/// Every fleet now, by name (viewer and up); a fleet never scraped is `unknown`.
#[tracing::instrument(skip_all, err)]
pub async fn board(ctx: &Ctx, caller: &Caller) -> Result<Vec<FleetNow>, FleetsError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let rows = db::fleet_status::board(&mut conn).await?;
    let now = ctx.now();
    rows.into_iter().map(|r| fleet_now(now, r)).collect()
}

/// One fleet now (viewer and up).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn now(ctx: &Ctx, caller: &Caller, fleet: &str) -> Result<FleetNow, FleetsError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let row = db::fleet_status::board_one(&mut conn, fleet)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {fleet}")))?;
    fleet_now(ctx.now(), row)
}

/// The fleet's newest `limit` deficits (1–`DEFICITS_LIMIT_MAX`, clamped), newest first, each
/// with its restore's milestones (viewer and up).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn deficits(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    limit: u32,
) -> Result<Vec<DeficitTimeline>, FleetsError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let fleet_id = db::fleet_status::fleet_id(&mut conn, fleet)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {fleet}")))?;
    let limit = i64::from(limit.clamp(1, DEFICITS_LIMIT_MAX));
    let rows = db::fleet_deficits::timeline(&mut conn, fleet_id, limit).await?;
    Ok(rows
        .into_iter()
        .map(|r| DeficitTimeline {
            id: r.id,
            started_at: r.started_at,
            detected_at: r.detected_at,
            spare: count(Some(r.spare)).unwrap_or(0),
            required: count(Some(r.required)).unwrap_or(0),
            provision_id: r.provision_id,
            provision_state: r.provision_state,
            note: r.note,
            proposed_at: r.proposed_at,
            approved_at: r.approved_at,
            provisioned_at: r.provisioned_at,
            restored_at: r.ended_at,
        })
        .collect())
}

/// A stored count as shown; a negative or oversized value (never written) is absent.
fn count(v: Option<i64>) -> Option<u32> {
    v.and_then(|n| u32::try_from(n).ok())
}

fn fleet_now(now: UnixMillis, r: BoardRow) -> Result<FleetNow, FleetsError> {
    // Only the interval is needed; a spec that no longer parses is a stored-data fault.
    let interval = serde_json::from_str::<FleetSpec>(&r.spec)
        .map(|s| s.scrape_interval_secs)
        .map_err(|e| anyhow::anyhow!("stored spec of fleet {}: {e}", r.name))?;
    let interval = if interval == 0 {
        SCRAPE_INTERVAL_SECS_DEFAULT
    } else {
        interval
    };
    let newest = r.sampled_at.zip(r.ok);
    let members: Vec<Member> = r
        .members
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    Ok(FleetNow {
        status: health(now, interval, newest, r.open_deficit_id.is_some()),
        spare: count(r.spare),
        required: count(r.required),
        source: r.source.as_deref().map_or(Source::None, Source::parse),
        leader_id: r.leader_id.and_then(|v| u64::try_from(v).ok()),
        leader: r.leader_url,
        members,
        last_scrape_at: r.sampled_at,
        last_ok_at: r.ok_at,
        last_error: r.error,
        latency_ms: r.latency_ms.and_then(|v| u64::try_from(v).ok()),
        deficit_since: r.deficit_since,
        open_requests: count(Some(r.open_requests)).unwrap_or(u32::MAX),
        scrape_interval_secs: interval,
        fleet: r.name,
    })
}
