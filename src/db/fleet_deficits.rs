//! The `fleet_deficits` table: every deficit a fleet entered, the restore it proposed (or why
//! none was filed) and when it was left.

use sqlx::{Row, SqliteConnection};

use crate::domain::UnixMillis;

/// A deficit to store at detection.
#[derive(Debug, Clone)]
pub struct NewDeficit<'a> {
    pub fleet_id: i64,
    /// The first sample of the streak below required.
    pub started_at: UnixMillis,
    /// The sample that crossed the threshold.
    pub detected_at: UnixMillis,
    pub spare: u32,
    pub required: u32,
    /// JSON: the leader's status body and the streak's samples (no secrets: yubaba's own
    /// status answer and our numbers).
    pub evidence: &'a str,
}

/// A stored deficit with its fleet's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeficitRow {
    pub id: i64,
    pub fleet_id: i64,
    pub fleet: String,
    pub started_at: UnixMillis,
    pub detected_at: UnixMillis,
    pub spare: i64,
    pub required: i64,
    pub provision_id: Option<i64>,
    pub note: String,
    pub evidence: String,
    pub ended_at: Option<UnixMillis>,
}

/// Stores a deficit; returns its id.
pub async fn insert(conn: &mut SqliteConnection, d: &NewDeficit<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO fleet_deficits (fleet_id, started_at, detected_at, spare, required, evidence)
         VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(d.fleet_id)
    .bind(d.started_at)
    .bind(d.detected_at)
    .bind(i64::from(d.spare))
    .bind(i64::from(d.required))
    .bind(d.evidence)
    .fetch_one(conn)
    .await
}

/// One deficit by id.
pub async fn get(conn: &mut SqliteConnection, id: i64) -> sqlx::Result<Option<DeficitRow>> {
    let row = sqlx::query(
        "SELECT d.id, d.fleet_id, f.name, d.started_at, d.detected_at, d.spare, d.required,
                d.provision_id, d.note, d.evidence, d.ended_at
         FROM fleet_deficits d JOIN fleets f ON f.id = d.fleet_id WHERE d.id = ?",
    )
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(|r| {
        Ok(DeficitRow {
            id: r.try_get(0)?,
            fleet_id: r.try_get(1)?,
            fleet: r.try_get(2)?,
            started_at: r.try_get(3)?,
            detected_at: r.try_get(4)?,
            spare: r.try_get(5)?,
            required: r.try_get(6)?,
            provision_id: r.try_get(7)?,
            note: r.try_get(8)?,
            evidence: r.try_get(9)?,
            ended_at: r.try_get(10)?,
        })
    })
    .transpose()
}

/// Records what the proposal came to: the request filed (or found open) and a note. Only a
/// deficit not yet settled is written (no request, empty note), so a second proposer — a
/// resume racing a late filing — cannot overwrite the first; `false` when it was settled.
pub async fn settle_proposal(
    conn: &mut SqliteConnection,
    id: i64,
    provision_id: Option<i64>,
    note: &str,
) -> sqlx::Result<bool> {
    let n = sqlx::query(
        "UPDATE fleet_deficits SET provision_id = ?, note = ?
         WHERE id = ? AND provision_id IS NULL AND note = ''",
    )
    .bind(provision_id)
    .bind(note)
    .bind(id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Marks a deficit left at `at`.
pub async fn end(conn: &mut SqliteConnection, id: i64, at: UnixMillis) -> sqlx::Result<()> {
    // A clock stepping back must not break the table's `ended_at >= detected_at` check.
    sqlx::query(
        "UPDATE fleet_deficits SET ended_at = max(?, detected_at) WHERE id = ? AND ended_at IS NULL",
    )
    .bind(at)
    .bind(id)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Open deficits whose proposal was never settled (no request, no note): a crash between the
/// deficit's commit and its filing. Found through each fleet's `open_deficit_id`, so the cost
/// follows the number of fleets, not the deficits kept.
pub async fn unfiled(conn: &mut SqliteConnection) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar(
        "SELECT d.id FROM fleet_status s JOIN fleet_deficits d ON d.id = s.open_deficit_id
         WHERE d.provision_id IS NULL AND d.note = '' AND d.ended_at IS NULL ORDER BY d.id",
    )
    .fetch_all(conn)
    .await
}

/// A deficit with its request's milestones, for time-to-restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineRow {
    pub id: i64,
    pub started_at: UnixMillis,
    pub detected_at: UnixMillis,
    pub spare: i64,
    pub required: i64,
    pub provision_id: Option<i64>,
    pub provision_state: Option<String>,
    pub note: String,
    pub proposed_at: Option<UnixMillis>,
    pub approved_at: Option<UnixMillis>,
    pub provisioned_at: Option<UnixMillis>,
    pub ended_at: Option<UnixMillis>,
}

/// The fleet's newest `limit` deficits, newest first, each joined with its request by primary
/// key (`fleet_deficits_fleet_detected` bounds the read to `limit` rows).
pub async fn timeline(
    conn: &mut SqliteConnection,
    fleet_id: i64,
    limit: i64,
) -> sqlx::Result<Vec<TimelineRow>> {
    let rows = sqlx::query(
        "SELECT d.id, d.started_at, d.detected_at, d.spare, d.required, d.provision_id, p.state,
                d.note, p.created_at, p.approved_at,
                CASE WHEN p.state = 'succeeded' THEN p.finished_at END, d.ended_at
         FROM fleet_deficits d LEFT JOIN provisions p ON p.id = d.provision_id
         WHERE d.fleet_id = ? ORDER BY d.detected_at DESC, d.id DESC LIMIT ?",
    )
    .bind(fleet_id)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(TimelineRow {
                id: r.try_get(0)?,
                started_at: r.try_get(1)?,
                detected_at: r.try_get(2)?,
                spare: r.try_get(3)?,
                required: r.try_get(4)?,
                provision_id: r.try_get(5)?,
                provision_state: r.try_get(6)?,
                note: r.try_get(7)?,
                proposed_at: r.try_get(8)?,
                approved_at: r.try_get(9)?,
                provisioned_at: r.try_get(10)?,
                ended_at: r.try_get(11)?,
            })
        })
        .collect()
}

/// One ok sample of a deficit's streak, as its evidence keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StreakSample {
    pub at: UnixMillis,
    pub spare: i64,
    pub required: i64,
    pub source: String,
    pub leader_id: Option<i64>,
    pub term: Option<i64>,
}

/// The fleet's newest `n` ok samples, oldest first: the streak that entered a deficit (failed
/// samples neither break nor extend a streak, so they are skipped here too). Reads `n` rows
/// through `fleet_samples_fleet_at`, whatever the history kept.
pub async fn streak(
    conn: &mut SqliteConnection,
    fleet_id: i64,
    n: i64,
) -> sqlx::Result<Vec<StreakSample>> {
    let rows = sqlx::query(
        "SELECT at, spare, required, source, leader_id, term FROM fleet_samples
         WHERE fleet_id = ? AND ok = 1 ORDER BY at DESC, id DESC LIMIT ?",
    )
    .bind(fleet_id)
    .bind(n)
    .fetch_all(conn)
    .await?;
    let mut out = rows
        .iter()
        .map(|r| {
            Ok(StreakSample {
                at: r.try_get(0)?,
                spare: r.try_get(1)?,
                required: r.try_get(2)?,
                source: r.try_get(3)?,
                leader_id: r.try_get(4)?,
                term: r.try_get(5)?,
            })
        })
        .collect::<sqlx::Result<Vec<_>>>()?;
    out.reverse();
    Ok(out)
}

/// The fleet's newest request still open (awaiting approval, approved or running), if any
/// (`provisions_by_fleet_state`: reads only the open ones).
pub async fn open_request(conn: &mut SqliteConnection, fleet: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "SELECT max(id) FROM provisions
         WHERE fleet = ? AND state IN ('pending_approval', 'approved', 'executing')",
    )
    .bind(fleet)
    .fetch_one(conn)
    .await
}
