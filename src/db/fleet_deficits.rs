//! The `fleet_deficits` table: every deficit a fleet entered, the restore it proposed (or why
//! none was filed) and when it was left.

use sqlx::{AnyConnection, Row};

use crate::domain::deficit::LatestProposal;
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
    /// status answer and our numbers), at most `capacity::deficit::EVIDENCE_MAX_BYTES`.
    pub evidence: &'a str,
    /// Why no proposal is filed yet (a flapping fleet's cool-down); empty when one is filed at
    /// once.
    pub note: &'a str,
    /// When a deferred proposal falls due; `None` when it is filed at once.
    pub proposal_due_at: Option<UnixMillis>,
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
    /// Set while the proposal waits for the cool-down (and on a deficit that ended inside it).
    pub proposal_due_at: Option<UnixMillis>,
    /// Requests this deficit filed (or found open) before its latest, oldest first.
    pub earlier_provisions: Vec<i64>,
    /// When its latest proposal was settled; `None` before the first.
    pub proposed_at: Option<UnixMillis>,
    /// When its end was settled (`deficit::recovered`); `None` while open, and on an ended
    /// deficit whose settlement a crash or an error cut off (`resume` finishes it).
    pub settled_at: Option<UnixMillis>,
}

/// A stored JSON array of request ids; anything else (never written) reads as none.
fn ids(json: &str) -> Vec<i64> {
    serde_json::from_str(json).unwrap_or_default()
}

/// Stores a deficit; returns its id.
pub async fn insert(conn: &mut AnyConnection, d: &NewDeficit<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "INSERT INTO fleet_deficits
             (fleet_id, started_at, detected_at, spare, required, evidence, note, proposal_due_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
    )
    .bind(d.fleet_id)
    .bind(d.started_at)
    .bind(d.detected_at)
    .bind(i64::from(d.spare))
    .bind(i64::from(d.required))
    .bind(d.evidence)
    .bind(d.note)
    .bind(d.proposal_due_at)
    .fetch_one(conn)
    .await
}

/// One deficit by id.
pub async fn get(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<DeficitRow>> {
    let row = sqlx::query(
        "SELECT d.id, d.fleet_id, f.name AS fleet, d.started_at, d.detected_at, d.spare, d.required,
                d.provision_id, d.note, d.evidence, d.ended_at, d.proposal_due_at,
                d.earlier_provisions, d.proposed_at, d.settled_at
         FROM fleet_deficits d JOIN fleets f ON f.id = d.fleet_id WHERE d.id = $1",
    )
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(|r| {
        Ok(DeficitRow {
            id: r.try_get("id")?,
            fleet_id: r.try_get("fleet_id")?,
            fleet: r.try_get("fleet")?,
            started_at: r.try_get("started_at")?,
            detected_at: r.try_get("detected_at")?,
            spare: r.try_get("spare")?,
            required: r.try_get("required")?,
            provision_id: r.try_get("provision_id")?,
            note: r.try_get("note")?,
            evidence: r.try_get("evidence")?,
            ended_at: r.try_get("ended_at")?,
            proposal_due_at: r.try_get("proposal_due_at")?,
            earlier_provisions: ids(r.try_get("earlier_provisions")?),
            proposed_at: r.try_get("proposed_at")?,
            settled_at: r.try_get("settled_at")?,
        })
    })
    .transpose()
}

/// Records what the proposal came to at `at`: the request filed (or found open) and a note.
/// Only a deficit not yet settled is written (no request, empty note), so a second proposer —
/// a resume racing a late filing — cannot overwrite the first; `false` when it was settled.
pub async fn settle_proposal(
    conn: &mut AnyConnection,
    id: i64,
    provision_id: Option<i64>,
    note: &str,
    at: UnixMillis,
) -> sqlx::Result<bool> {
    let n = sqlx::query(
        "UPDATE fleet_deficits SET provision_id = $1, note = $2, proposed_at = $3
         WHERE id = $4 AND provision_id IS NULL AND note = ''",
    )
    .bind(provision_id)
    .bind(note)
    .bind(at)
    .bind(id)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Marks a deficit left at `at`.
pub async fn end(conn: &mut AnyConnection, id: i64, at: UnixMillis) -> sqlx::Result<()> {
    // A clock stepping back must not break the table's `ended_at >= detected_at` check.
    sqlx::query(
        "UPDATE fleet_deficits SET ended_at = CASE WHEN $1 > detected_at THEN $1 ELSE detected_at END WHERE id = $2 AND ended_at IS NULL",
    )
    .bind(at)
    .bind(id)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Records that an ended deficit's end was settled at `at`; `false` when it was not ended or
/// already settled, so two settlers racing (a sample's follow-up and `resume`) settle once.
pub async fn mark_settled(conn: &mut AnyConnection, id: i64, at: UnixMillis) -> sqlx::Result<bool> {
    sqlx::query(
        "UPDATE fleet_deficits SET settled_at = CASE WHEN $1 > ended_at THEN $1 ELSE ended_at END
         WHERE id = $2 AND ended_at IS NOT NULL AND settled_at IS NULL",
    )
    .bind(at)
    .bind(id)
    .execute(conn)
    .await
    .map(|r| r.rows_affected() > 0)
}

/// Ended deficits whose settlement a crash or an error cut off, oldest first. Read through
/// the partial index `fleet_deficits_unsettled`, which holds only such rows (normally none).
pub async fn unsettled(conn: &mut AnyConnection) -> sqlx::Result<Vec<i64>> {
    let sql = super::dialect::portable(conn, UNSETTLED_SQL);
    sqlx::query_scalar(sql).fetch_all(conn).await
}

/// The statement of [`unsettled`], public so a test can pin its plan.
pub const UNSETTLED_SQL: &str = "SELECT id FROM fleet_deficits INDEXED BY fleet_deficits_unsettled
     WHERE ended_at IS NOT NULL AND settled_at IS NULL ORDER BY id";

/// Releases an open deficit's deferred proposal once it fell due (`due_by` or earlier): clears
/// the cool-down note and due time, so `deficit::propose` files it like any new deficit (and
/// `unfiled` finds it after a crash). `false` when there was nothing to release.
pub async fn release_deferred(
    conn: &mut AnyConnection,
    id: i64,
    due_by: UnixMillis,
) -> sqlx::Result<bool> {
    let n = sqlx::query(
        "UPDATE fleet_deficits SET note = '', proposal_due_at = NULL
         WHERE id = $1 AND ended_at IS NULL AND provision_id IS NULL
           AND proposal_due_at IS NOT NULL AND proposal_due_at <= $2",
    )
    .bind(id)
    .bind(due_by)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// A restore proposal recovery superseded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superseded {
    /// The request.
    pub provision_id: i64,
    /// When recovery superseded it.
    pub at: UnixMillis,
}

/// The fleet's newest headroom proposal (requester `system`) superseded by recovery (`reason`)
/// at or after `since`.
/// Reads only the fleet's requests finished since then (`provisions_by_fleet_finished`), so
/// the cost follows the cool-down, not the requests kept.
pub async fn superseded_since(
    conn: &mut AnyConnection,
    fleet: &str,
    since: UnixMillis,
    reason: &str,
) -> sqlx::Result<Option<Superseded>> {
    let row: Option<(i64, UnixMillis)> = sqlx::query_as(
        "SELECT id, finished_at FROM provisions
         WHERE fleet = $1 AND finished_at >= $2 AND state = 'superseded' AND requester = $3
           AND state_reason = $4
         ORDER BY finished_at DESC, id DESC LIMIT 1",
    )
    .bind(fleet)
    .bind(since)
    .bind(crate::domain::Actor::System.name())
    .bind(reason)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(provision_id, at)| Superseded { provision_id, at }))
}

/// Deletes at most `limit` deficits that ended before `before` (open ones, and ended ones not
/// yet settled, are never deleted); returns how many. Found through `fleet_deficits_ended`, so
/// a batch reads what it deletes and the unsettled ones among them (normally none). The
/// request a deficit filed keeps its own `evidence` line.
pub async fn prune_ended(
    conn: &mut AnyConnection,
    before: UnixMillis,
    limit: i64,
) -> sqlx::Result<u64> {
    const SQL: &str = "DELETE FROM fleet_deficits WHERE id IN
        (SELECT id FROM fleet_deficits INDEXED BY fleet_deficits_ended
         WHERE ended_at IS NOT NULL AND ended_at < $1 AND settled_at IS NOT NULL LIMIT $2)";
    sqlx::query(super::dialect::portable(conn, SQL))
        .bind(before)
        .bind(limit)
        .execute(conn)
        .await
        .map(|r| r.rows_affected())
}

/// The statement of [`unfiled`], public so a test can pin its plan.
///
/// Driven from the fleets in deficit: `CROSS JOIN` keeps `fleet_status` as the outer loop
/// (SQLite never reorders it), read through `fleet_status_open_deficit` for the rows with an
/// open deficit only, and each deficit is then read by primary key. Plan:
/// `SEARCH s USING COVERING INDEX fleet_status_open_deficit (open_deficit_id>?)` then
/// `SEARCH d USING INTEGER PRIMARY KEY (rowid=?)`. (A plain join let the planner start from
/// `fleet_deficits_provision (provision_id=?)`, which walks every deficit ever left
/// unfiled — a note-only refusal kept for months included — and scans the status table.)
pub const UNFILED_SQL: &str = "SELECT d.id
     FROM fleet_status s INDEXED BY fleet_status_open_deficit
     CROSS JOIN fleet_deficits d ON d.id = s.open_deficit_id
     WHERE s.open_deficit_id IS NOT NULL
       AND d.provision_id IS NULL AND d.note = '' AND d.ended_at IS NULL
     ORDER BY d.id";

/// Open deficits whose proposal is not settled (no request, no note): a crash or an error
/// between the deficit's commit (or its release for a follow-up) and its filing. The cost
/// follows the number of fleets in deficit now, not the deficits kept ([`UNFILED_SQL`]).
pub async fn unfiled(conn: &mut AnyConnection) -> sqlx::Result<Vec<i64>> {
    let sql = super::dialect::portable(conn, UNFILED_SQL);
    sqlx::query_scalar(sql).fetch_all(conn).await
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
    /// Requests filed for this deficit before `provision_id`, oldest first.
    pub earlier_provisions: Vec<i64>,
}

/// The fleet's newest `limit` deficits, newest first, each joined with its request by primary
/// key (`fleet_deficits_fleet_detected` bounds the read to `limit` rows).
pub async fn timeline(
    conn: &mut AnyConnection,
    fleet_id: i64,
    limit: i64,
) -> sqlx::Result<Vec<TimelineRow>> {
    let rows = sqlx::query(
        "SELECT d.id, d.started_at, d.detected_at, d.spare, d.required, d.provision_id,
                p.state AS provision_state, d.note, p.created_at AS proposed_at, p.approved_at,
                CASE WHEN p.state = 'succeeded' THEN p.finished_at END AS provisioned_at,
                d.ended_at, d.earlier_provisions
         FROM fleet_deficits d LEFT JOIN provisions p ON p.id = d.provision_id
         WHERE d.fleet_id = $1 ORDER BY d.detected_at DESC, d.id DESC LIMIT $2",
    )
    .bind(fleet_id)
    .bind(limit)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(TimelineRow {
                id: r.try_get("id")?,
                started_at: r.try_get("started_at")?,
                detected_at: r.try_get("detected_at")?,
                spare: r.try_get("spare")?,
                required: r.try_get("required")?,
                provision_id: r.try_get("provision_id")?,
                provision_state: r.try_get("provision_state")?,
                note: r.try_get("note")?,
                proposed_at: r.try_get("proposed_at")?,
                approved_at: r.try_get("approved_at")?,
                provisioned_at: r.try_get("provisioned_at")?,
                ended_at: r.try_get("ended_at")?,
                earlier_provisions: ids(r.try_get("earlier_provisions")?),
            })
        })
        .collect()
}

/// One ok sample of a deficit's streak, as its evidence keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
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
    conn: &mut AnyConnection,
    fleet_id: i64,
    n: i64,
) -> sqlx::Result<Vec<StreakSample>> {
    let mut out: Vec<StreakSample> = sqlx::query_as(
        "SELECT at, spare, required, source, leader_id, term FROM fleet_samples
         WHERE fleet_id = $1 AND ok ORDER BY at DESC, id DESC LIMIT $2",
    )
    .bind(fleet_id)
    .bind(n)
    .fetch_all(conn)
    .await?;
    out.reverse();
    Ok(out)
}

/// The fleet's newest request still open (awaiting approval, approved or running), if any
/// (`provisions_by_fleet_state`: reads only the open ones).
pub async fn open_request(conn: &mut AnyConnection, fleet: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar(
        "SELECT max(id) FROM provisions
         WHERE fleet = $1 AND state IN ('pending_approval', 'approved', 'executing')",
    )
    .bind(fleet)
    .fetch_one(conn)
    .await
}

/// The fleet's requests filed by headroom (`requester` `system`, a reserved username) still
/// awaiting approval, oldest first (`provisions_by_fleet_state`: reads only those).
pub async fn pending_proposals(conn: &mut AnyConnection, fleet: &str) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar(
        "SELECT id FROM provisions
         WHERE fleet = $1 AND state = 'pending_approval' AND requester = $2 ORDER BY id",
    )
    .bind(fleet)
    .bind(crate::domain::Actor::System.name())
    .fetch_all(conn)
    .await
}

/// Whether the fleet has a deficit detected after deficit `id` (which was detected at
/// `detected_at`): a range on `fleet_deficits_fleet_detected`.
pub async fn newer_exists(
    conn: &mut AnyConnection,
    fleet_id: i64,
    id: i64,
    detected_at: UnixMillis,
) -> sqlx::Result<bool> {
    sqlx::query_scalar::<_, super::flag::Flag>(
        "SELECT EXISTS (SELECT 1 FROM fleet_deficits
                        WHERE fleet_id = $1 AND detected_at >= $2 AND id > $3)",
    )
    .bind(fleet_id)
    .bind(detected_at)
    .bind(id)
    .fetch_one(conn)
    .await
    .map(bool::from)
}

/// The latest proposal of open deficit `id`; `None` when the deficit is gone or ended.
/// (Read straight into the domain's type: the follow-up rule is its only reader.)
pub async fn latest_proposal(
    conn: &mut AnyConnection,
    id: i64,
) -> sqlx::Result<Option<LatestProposal>> {
    let row = sqlx::query(
        "SELECT d.provision_id, p.state, d.note, d.proposed_at, d.detected_at, p.created_at,
                p.expires_at, p.finished_at, d.followup_below
         FROM fleet_deficits d LEFT JOIN provisions p ON p.id = d.provision_id
         WHERE d.id = $1 AND d.ended_at IS NULL",
    )
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(|r| {
        Ok(LatestProposal {
            provision_id: r.try_get("provision_id")?,
            state: r.try_get("state")?,
            note: r.try_get("note")?,
            proposed_at: r.try_get("proposed_at")?,
            detected_at: r.try_get("detected_at")?,
            created_at: r.try_get("created_at")?,
            expires_at: r.try_get("expires_at")?,
            finished_at: r.try_get("finished_at")?,
            followup_below: r.try_get("followup_below")?,
        })
    })
    .transpose()
}

/// Counts one more sample below required towards open deficit `id`'s follow-up.
pub async fn count_followup_sample(conn: &mut AnyConnection, id: i64) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE fleet_deficits SET followup_below = followup_below + 1
         WHERE id = $1 AND ended_at IS NULL",
    )
    .bind(id)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Most earlier requests one deficit keeps a note of.
pub const EARLIER_MAX: i64 = 100;

/// Releases open deficit `id` for a follow-up proposal: its latest request moves to the
/// earlier ones (up to [`EARLIER_MAX`]), the request, note and count are cleared, so
/// `deficit::propose` files the follow-up like a first proposal (and [`unfiled`] finds it if
/// that fails). `proposed_at` stays: the cool-down counts from it. `false` when the deficit
/// was not settled or not open (nothing released).
pub async fn release_followup(conn: &mut AnyConnection, id: i64) -> sqlx::Result<bool> {
    // `earlier_provisions` is a JSON array kept as text; the stores append to one differently.
    let sql = super::Dialect::of(conn).pick(
        "UPDATE fleet_deficits SET
                 earlier_provisions = CASE
                     WHEN provision_id IS NULL OR json_array_length(earlier_provisions) >= $1
                         THEN earlier_provisions
                     ELSE json_insert(earlier_provisions, '$[#]', provision_id) END,
                 provision_id = NULL, note = '', followup_below = 0
             WHERE id = $2 AND ended_at IS NULL AND proposal_due_at IS NULL
               AND (provision_id IS NOT NULL OR note <> '')",
        "UPDATE fleet_deficits SET
                 earlier_provisions = CASE
                     WHEN provision_id IS NULL OR json_array_length(earlier_provisions::json) >= $1
                         THEN earlier_provisions
                     ELSE (earlier_provisions::jsonb || to_jsonb(provision_id))::text END,
                 provision_id = NULL, note = '', followup_below = 0
             WHERE id = $2 AND ended_at IS NULL AND proposal_due_at IS NULL
               AND (provision_id IS NOT NULL OR note <> '')",
    );
    let n = sqlx::query(sql)
        .bind(EARLIER_MAX)
        .bind(id)
        .execute(conn)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// Whether request `provision_id` is headroom's own filing for deficit `deficit_id`: requester
/// `system` and the reason `deficit::propose` writes (which names the deficit). Lets a resume
/// adopt a request whose filing committed while recording it on the deficit failed.
pub async fn is_own_proposal(
    conn: &mut AnyConnection,
    provision_id: i64,
    reason_prefix: &str,
) -> sqlx::Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM provisions WHERE id = $1 AND requester = $2 AND substr(reason, 1, CAST($3 AS INTEGER)) = $4",
    )
    .bind(provision_id)
    .bind(crate::domain::Actor::System.name())
    .bind(i64::try_from(reason_prefix.chars().count()).unwrap_or(i64::MAX))
    .bind(reason_prefix)
    .fetch_one(conn)
    .await?;
    Ok(n == 1)
}
