//! The `fleet_status` table: one row per scraped fleet, replaced by every sample, holding the
//! newest sample's fields and the deficit tracker, so "now" is read without scanning history.

use sqlx::{AnyConnection, Row};

use crate::domain::capacity::{DeficitTracker, Sample, Source};
use crate::domain::UnixMillis;

/// The deficit tracker as stored, with the open deficit's id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredTracker {
    /// The streaks; `in_deficit` is true exactly when a deficit is open.
    pub tracker: DeficitTracker,
    /// The open deficit, if any.
    pub open_deficit_id: Option<i64>,
    /// When the open deficit's deferred proposal falls due (a flapping fleet's cool-down).
    pub proposal_due_at: Option<UnixMillis>,
}

/// The fleet's stored tracker; the default (no streaks, no deficit) when it was never sampled.
/// The open deficit's due time comes with it (its primary key), so a sample costs one read.
pub async fn tracker(conn: &mut AnyConnection, fleet_id: i64) -> sqlx::Result<StoredTracker> {
    let row = sqlx::query(
        "SELECT s.below_streak, s.healthy_streak, s.open_deficit_id, d.proposal_due_at
         FROM fleet_status s LEFT JOIN fleet_deficits d ON d.id = s.open_deficit_id
         WHERE s.fleet_id = $1",
    )
    .bind(fleet_id)
    .fetch_optional(conn)
    .await?;
    let Some(r) = row else {
        return Ok(StoredTracker::default());
    };
    let streak = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    let open: Option<i64> = r.try_get("open_deficit_id")?;
    Ok(StoredTracker {
        tracker: DeficitTracker {
            below_streak: streak(r.try_get("below_streak")?),
            healthy_streak: streak(r.try_get("healthy_streak")?),
            in_deficit: open.is_some(),
        },
        open_deficit_id: open,
        proposal_due_at: r.try_get("proposal_due_at")?,
    })
}

/// Replaces the fleet's row with sample `s` and tracker `t`. An ok sample replaces every
/// field; a failed one replaces only the sample's own fields (time, ok, source, latency,
/// error) and keeps the last ok numbers, leader and members, so the board can still say what
/// the fleet looked like when it last answered.
pub async fn upsert(
    conn: &mut AnyConnection,
    fleet_id: i64,
    s: &Sample,
    t: &StoredTracker,
) -> sqlx::Result<()> {
    let latency = i64::try_from(s.latency_ms).unwrap_or(i64::MAX);
    let streak = |v: u32| i64::from(v);
    // SQLite integers are i64: an id or term past that is not one we can store, so it is
    // stored as unknown rather than wrapped into a negative number.
    let id = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
    match &s.outcome {
        Ok(o) => {
            // Members are our own serde type: serialising them cannot fail.
            let members = serde_json::to_string(&o.members).unwrap_or_else(|_| "[]".into());
            let absorption = o
                .absorption
                .as_ref()
                .and_then(|a| serde_json::to_string(a).ok());
            sqlx::query(
                "INSERT INTO fleet_status
                     (fleet_id, sampled_at, ok, source, spare, required, ok_at, leader_id,
                      leader_url, term, voters, learners, members, latency_ms, error,
                      below_streak, healthy_streak, open_deficit_id, absorption)
                 VALUES ($1, $2, TRUE, $3, $4, $5, $2, $6, $7, $8, $9, $10, $11, $12, NULL, $13, $14, $15,
                         $16)
                 ON CONFLICT (fleet_id) DO UPDATE SET
                     sampled_at = excluded.sampled_at, ok = TRUE, source = excluded.source,
                     spare = excluded.spare, required = excluded.required, ok_at = excluded.ok_at,
                     leader_id = excluded.leader_id, leader_url = excluded.leader_url,
                     term = excluded.term, voters = excluded.voters, learners = excluded.learners,
                     members = excluded.members, latency_ms = excluded.latency_ms, error = NULL,
                     below_streak = excluded.below_streak,
                     healthy_streak = excluded.healthy_streak,
                     open_deficit_id = excluded.open_deficit_id,
                     absorption = excluded.absorption",
            )
            .bind(fleet_id)
            .bind(s.at)
            .bind(o.source.as_str())
            .bind(i64::from(o.spare))
            .bind(i64::from(o.required))
            .bind(id(o.leader_id))
            .bind(o.leader_url.as_deref())
            .bind(id(o.term))
            .bind(i64::from(o.voters()))
            .bind(i64::from(o.learners()))
            .bind(members)
            .bind(latency)
            .bind(streak(t.tracker.below_streak))
            .bind(streak(t.tracker.healthy_streak))
            .bind(t.open_deficit_id)
            .bind(absorption)
            .execute(conn)
            .await?;
        }
        Err(reason) => {
            sqlx::query(
                "INSERT INTO fleet_status
                     (fleet_id, sampled_at, ok, source, latency_ms, error, below_streak,
                      healthy_streak, open_deficit_id)
                 VALUES ($1, $2, FALSE, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (fleet_id) DO UPDATE SET
                     sampled_at = excluded.sampled_at, ok = FALSE, source = excluded.source,
                     latency_ms = excluded.latency_ms, error = excluded.error,
                     below_streak = excluded.below_streak,
                     healthy_streak = excluded.healthy_streak,
                     open_deficit_id = excluded.open_deficit_id",
            )
            .bind(fleet_id)
            .bind(s.at)
            .bind(Source::None.as_str())
            .bind(latency)
            .bind(reason.as_str())
            .bind(streak(t.tracker.below_streak))
            .bind(streak(t.tracker.healthy_streak))
            .bind(t.open_deficit_id)
            .execute(conn)
            .await?;
        }
    }
    Ok(())
}

/// A fleet now, as one row of the board query: the fleet, its status row (absent when never
/// scraped), its open deficit's start and its open request count. The members list is read
/// only for one fleet (`board_one`); the whole board carries the stored counts.
#[derive(Debug, Clone)]
pub struct BoardRow {
    pub name: String,
    /// The fleet's spec JSON (the scrape interval decides staleness).
    pub spec: String,
    pub sampled_at: Option<UnixMillis>,
    pub ok: Option<bool>,
    pub source: Option<String>,
    pub spare: Option<i64>,
    pub required: Option<i64>,
    pub ok_at: Option<UnixMillis>,
    pub leader_id: Option<i64>,
    pub leader_url: Option<String>,
    /// Members in a voter set, at the newest ok sample.
    pub voters: Option<i64>,
    /// Members in no voter set, at the newest ok sample.
    pub learners: Option<i64>,
    /// JSON array of members; read by `board_one` only (`None` from `board`).
    pub members: Option<String>,
    pub latency_ms: Option<i64>,
    pub error: Option<String>,
    pub open_deficit_id: Option<i64>,
    pub deficit_since: Option<UnixMillis>,
    /// The deficit rule's streaks (zero for a fleet never sampled).
    pub tracker: DeficitTracker,
    pub open_requests: i64,
    /// The newest absorption verdict as JSON (`None` before one was judged).
    pub absorption: Option<String>,
}

// One statement for the whole board: each fleet's status row by primary key, its open deficit
// by primary key, and its open requests through `provisions_by_fleet_state`, so the cost grows
// with the number of fleets and open requests, never with the samples or deficits kept. The
// members JSON (thousands of entries for a big fleet) is selected only for one fleet's page;
// the board carries the stored counts.
macro_rules! board_sql {
    ($members:literal, $tail:literal) => {
        concat!(
            "SELECT f.name, f.spec, s.sampled_at, s.ok, s.source, s.spare, s.required,
                s.ok_at, s.leader_id, s.leader_url, s.voters, s.learners, s.latency_ms, s.error,
                s.open_deficit_id, d.started_at AS deficit_since, s.absorption,
                COALESCE(s.below_streak, 0) AS below_streak,
                COALESCE(s.healthy_streak, 0) AS healthy_streak,
                (SELECT COUNT(*) FROM provisions p
                  WHERE p.fleet = f.name AND p.state IN ('pending_approval', 'approved', 'executing'))
                  AS open_requests,
                ",
            $members,
            " AS members
             FROM fleets f
             LEFT JOIN fleet_status s ON s.fleet_id = f.id
             LEFT JOIN fleet_deficits d ON d.id = s.open_deficit_id ",
            $tail
        )
    };
}

fn board_row(r: &sqlx::any::AnyRow) -> sqlx::Result<BoardRow> {
    // A fleet never scraped has no status row, so NULL.
    let ok: Option<super::flag::Flag> = r.try_get("ok")?;
    let streak = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    let open_deficit_id: Option<i64> = r.try_get("open_deficit_id")?;
    Ok(BoardRow {
        name: r.try_get("name")?,
        spec: r.try_get("spec")?,
        sampled_at: r.try_get("sampled_at")?,
        ok: ok.map(bool::from),
        source: r.try_get("source")?,
        spare: r.try_get("spare")?,
        required: r.try_get("required")?,
        ok_at: r.try_get("ok_at")?,
        leader_id: r.try_get("leader_id")?,
        leader_url: r.try_get("leader_url")?,
        voters: r.try_get("voters")?,
        learners: r.try_get("learners")?,
        latency_ms: r.try_get("latency_ms")?,
        error: r.try_get("error")?,
        open_deficit_id,
        deficit_since: r.try_get("deficit_since")?,
        tracker: DeficitTracker {
            below_streak: streak(r.try_get("below_streak")?),
            healthy_streak: streak(r.try_get("healthy_streak")?),
            in_deficit: open_deficit_id.is_some(),
        },
        open_requests: r.try_get("open_requests")?,
        members: r.try_get("members")?,
        absorption: r.try_get("absorption")?,
    })
}

/// Every fleet now, by name, without the members list.
pub async fn board(conn: &mut AnyConnection) -> sqlx::Result<Vec<BoardRow>> {
    let rows = sqlx::query(board_sql!("NULL", "ORDER BY f.name"))
        .fetch_all(conn)
        .await?;
    rows.iter().map(board_row).collect()
}

/// One fleet now, with its members list; `None` when no fleet has that name.
pub async fn board_one(conn: &mut AnyConnection, name: &str) -> sqlx::Result<Option<BoardRow>> {
    let row = sqlx::query(board_sql!("s.members", "WHERE f.name = $1"))
        .bind(name)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(board_row).transpose()
}

/// The id of the fleet named `name`, if it exists (the samples, status and deficits key on it).
pub async fn fleet_id(conn: &mut AnyConnection, name: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT id FROM fleets WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await
}
