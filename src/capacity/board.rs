//! Each fleet now: the dashboard's cards, the fleet page's header, the fleet API's status and
//! `/metrics` read this, never the history. One query for the whole board (fleet, status row,
//! open deficit, open requests), so its cost follows the number of fleets. The board carries
//! each fleet's voter and learner counts as stored with the sample; only `now` (one fleet's
//! page and API answer) reads and parses the members list itself.

use std::sync::Arc;

use crate::context::Ctx;
use crate::db;
use crate::db::fleet_status::BoardRow;
use crate::domain::capacity::{
    health, pending, DeficitPolicy, DeficitTimeline, FleetNow, Member, Source,
};
use crate::domain::fleet::{FleetSpec, SCRAPE_INTERVAL_SECS_DEFAULT};
use crate::domain::{Caller, Role, UnixMillis};
use crate::error::OpError;

/// Most deficits one `deficits` call returns.
pub const DEFICITS_LIMIT_MAX: u32 = 200;

/// Every fleet now, by name (viewer and up); a fleet never scraped is `unknown`. `members` is
/// empty here: the cards and `/metrics` need only the counts (`voters`, `learners`).
#[tracing::instrument(skip_all, err)]
pub async fn board(ctx: &Ctx, caller: &Caller) -> Result<Vec<FleetNow>, OpError> {
    Ok(board_shared(ctx, caller).await?.as_ref().clone())
}

/// [`board`] as the cache holds it, shared rather than copied: the same `Arc` until a write or
/// the ttl loads it again, so a reader can tell an unchanged board by pointer (the dashboard
/// keeps its rendered cards that way).
pub async fn board_shared(ctx: &Ctx, caller: &Caller) -> Result<Arc<Vec<FleetNow>>, OpError> {
    caller.require(Role::Viewer)?;
    // Shared by every reader for up to `context::BOARD_TTL_MS`, and loaded again as soon as a
    // sample, a fleet or a request changes (each invalidates it): many open dashboards cost
    // one query a second, not one each.
    let now = ctx.now();
    let fleets = ctx
        .board
        .get_or_load(now, || async {
            let mut conn = ctx.pool.acquire().await?;
            let rows = db::fleet_status::board(&mut conn).await?;
            rows.into_iter()
                .map(|r| fleet_now(now, ctx.settings.deficit, r))
                .collect::<Result<Vec<_>, OpError>>()
        })
        .await?;
    Ok(fleets)
}

/// One fleet now, with its members listed (viewer and up).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn now(ctx: &Ctx, caller: &Caller, fleet: &str) -> Result<FleetNow, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let row = db::fleet_status::board_one(&mut conn, fleet)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("fleet {fleet}")))?;
    fleet_now(ctx.now(), ctx.settings.deficit, row)
}

/// The fleet's newest `limit` deficits (1–`DEFICITS_LIMIT_MAX`, clamped), newest first, each
/// with its restore's milestones (viewer and up).
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn deficits(
    ctx: &Ctx,
    caller: &Caller,
    fleet: &str,
    limit: u32,
) -> Result<Vec<DeficitTimeline>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let fleet_id = db::fleet_status::fleet_id(&mut conn, fleet)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("fleet {fleet}")))?;
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
            note: with_earlier(r.note, &r.earlier_provisions),
            proposed_at: r.proposed_at,
            approved_at: r.approved_at,
            provisioned_at: r.provisioned_at,
            restored_at: r.ended_at,
        })
        .collect())
}

/// The deficit's note, followed by the earlier requests it filed before its latest (a
/// follow-up's milestones are the latest request's; the earlier ones stay named).
fn with_earlier(note: String, earlier: &[i64]) -> String {
    if earlier.is_empty() {
        return note;
    }
    let list: Vec<String> = earlier.iter().map(|id| format!("#{id}")).collect();
    let line = format!("follow-up to request {}", list.join(", "));
    if note.is_empty() {
        line
    } else {
        format!("{note}; {line}")
    }
}

/// A stored count as shown; a negative or oversized value (never written) is absent.
fn count(v: Option<i64>) -> Option<u32> {
    v.and_then(|n| u32::try_from(n).ok())
}

fn fleet_now(now: UnixMillis, policy: DeficitPolicy, r: BoardRow) -> Result<FleetNow, OpError> {
    // Only the interval is needed; a spec that no longer parses is a stored-data fault.
    let interval = FleetSpec::from_stored(&r.name, &r.spec)
        .map_err(anyhow::Error::from)?
        .scrape_interval_secs();
    let interval = if interval == 0 {
        SCRAPE_INTERVAL_SECS_DEFAULT
    } else {
        interval
    };
    let newest = r.sampled_at.zip(r.ok);
    // Only `board_one` selects the list (one fleet); a stored list that no longer parses shows
    // as unknown rather than failing the page.
    let members: Vec<Member> = r
        .members
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let pending = pending(r.tracker, policy);
    Ok(FleetNow {
        status: health(now, interval, newest, r.open_deficit_id.is_some(), pending),
        pending,
        n_plus: count(r.spare),
        spare: count(r.spare),
        required: count(r.required),
        source: r.source.as_deref().map_or(Source::None, Source::parse),
        leader_id: r.leader_id.and_then(|v| u64::try_from(v).ok()),
        leader: r.leader_url,
        members,
        voters: count(r.voters),
        learners: count(r.learners),
        last_scrape_at: r.sampled_at,
        last_ok_at: r.ok_at,
        last_error: r.error,
        latency_ms: r.latency_ms.and_then(|v| u64::try_from(v).ok()),
        deficit_since: r.deficit_since,
        open_requests: count(Some(r.open_requests)).unwrap_or(u32::MAX),
        scrape_interval_secs: interval,
        // A stored verdict that no longer parses shows as not judged, and says why in the log.
        absorption: r.absorption.as_deref().and_then(|a| {
            serde_json::from_str(a)
                .inspect_err(|e| tracing::warn!(fleet.name = %r.name, error = %e, "stored absorption unreadable"))
                .ok()
        }),
        fleet: r.name,
    })
}
