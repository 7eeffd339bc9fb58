//! The `fleet_samples` and `fleet_rollups` tables: every scrape tick, and its per-minute,
//! per-five-minutes, per-hour, per-two-hours and per-six-hours summaries, written together so
//! the rollups are never behind the raw rows.

use std::sync::LazyLock;

use sqlx::{AnyConnection, Row};

use crate::domain::capacity::{Resolution, Sample, Source};
use crate::domain::UnixMillis;

/// What one sample adds to a bucket of each resolution.
struct Folded<'a> {
    ok: i64,
    source: Source,
    spare: Option<i64>,
    required: Option<i64>,
    /// 1 absorbed, 0 short, `None` when not assessed.
    absorbed: Option<i64>,
    machines_needed: Option<i64>,
    error: Option<&'a str>,
}

impl<'a> Folded<'a> {
    fn of(s: &'a Sample) -> Self {
        match &s.outcome {
            Ok(o) => Folded {
                ok: 1,
                source: o.source,
                spare: Some(i64::from(o.spare)),
                required: Some(i64::from(o.required)),
                absorbed: o.absorption.as_ref().map(|a| i64::from(a.absorbed())),
                machines_needed: o
                    .absorption
                    .as_ref()
                    .and_then(|a| a.machines_needed)
                    .map(i64::from),
                error: None,
            },
            Err(reason) => Folded {
                ok: 0,
                source: Source::None,
                spare: None,
                required: None,
                absorbed: None,
                machines_needed: None,
                error: Some(reason.as_str()),
            },
        }
    }
}

/// Stores one sample of fleet `fleet_id` and folds it into its minute, five-minute, hour,
/// two-hour and six-hour rollups. Run it inside the caller's write transaction: six
/// statements, one commit.
pub async fn insert(conn: &mut AnyConnection, fleet_id: i64, s: &Sample) -> sqlx::Result<i64> {
    let folded = Folded::of(s);
    let (voters, learners, leader_id, term, absorption) = match &s.outcome {
        Ok(o) => (
            Some(i64::from(o.voters())),
            Some(i64::from(o.learners())),
            o.leader_id.map(|v| v as i64),
            o.term.map(|v| v as i64),
            // Our own serde type: serialising it cannot fail.
            o.absorption
                .as_ref()
                .and_then(|a| serde_json::to_string(a).ok()),
        ),
        Err(_) => (None, None, None, None, None),
    };
    let latency = i64::try_from(s.latency_ms).unwrap_or(i64::MAX);
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO fleet_samples
             (fleet_id, at, ok, source, spare, required, voters, learners, leader_id, term,
              latency_ms, error, absorbed, machines_needed, absorption)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id",
    )
    .bind(fleet_id)
    .bind(s.at)
    // A yes/no column (BOOLEAN in PostgreSQL); the rollups below count it as a number.
    .bind(folded.ok == 1)
    .bind(folded.source.as_str())
    .bind(folded.spare)
    .bind(folded.required)
    .bind(voters)
    .bind(learners)
    .bind(leader_id)
    .bind(term)
    .bind(latency)
    .bind(folded.error)
    .bind(folded.absorbed)
    .bind(folded.machines_needed)
    .bind(absorption)
    .fetch_one(&mut *conn)
    .await?;
    for resolution in [
        Resolution::Minute,
        Resolution::FiveMinutes,
        Resolution::Hour,
        Resolution::TwoHours,
        Resolution::SixHours,
    ] {
        fold_into_rollup(&mut *conn, fleet_id, resolution, s.at, &folded).await?;
    }
    Ok(id)
}

/// [`fold_into_rollup`]'s upsert with the stores' two-argument minimum and maximum (SQLite's
/// `min`/`max`, PostgreSQL's `LEAST`/`GREATEST`). The stored row's columns are named with
/// their table, which PostgreSQL needs to tell them from `excluded`'s.
macro_rules! fold_sql {
    ($min:literal, $max:literal) => {
        concat!(
            "INSERT INTO fleet_rollups
                 (fleet_id, resolution, bucket, samples, ok_samples, spare_min, spare_max,
                  spare_last, required_min, required_max, required_last, last_at, source_last,
                  absorbed_min, machines_needed_max)
             VALUES ($1, $2, $3, 1, $4, $5, $5, $5, $6, $6, $6, $7, $8, $9, $10)
             ON CONFLICT (fleet_id, resolution, bucket) DO UPDATE SET
                 samples       = fleet_rollups.samples + 1,
                 ok_samples    = fleet_rollups.ok_samples + excluded.ok_samples,
                 spare_min     = coalesce(", $min, "(fleet_rollups.spare_min, excluded.spare_min),
                                          fleet_rollups.spare_min, excluded.spare_min),
                 spare_max     = coalesce(", $max, "(fleet_rollups.spare_max, excluded.spare_max),
                                          fleet_rollups.spare_max, excluded.spare_max),
                 required_min  = coalesce(", $min, "(fleet_rollups.required_min, excluded.required_min),
                                          fleet_rollups.required_min, excluded.required_min),
                 required_max  = coalesce(", $max, "(fleet_rollups.required_max, excluded.required_max),
                                          fleet_rollups.required_max, excluded.required_max),
                 absorbed_min  = coalesce(", $min, "(fleet_rollups.absorbed_min, excluded.absorbed_min),
                                          fleet_rollups.absorbed_min, excluded.absorbed_min),
                 machines_needed_max = coalesce(", $max, "(fleet_rollups.machines_needed_max,
                                                          excluded.machines_needed_max),
                                                fleet_rollups.machines_needed_max,
                                                excluded.machines_needed_max),
                 spare_last    = CASE WHEN excluded.ok_samples = 1
                                           AND excluded.last_at >= fleet_rollups.last_at
                                      THEN excluded.spare_last ELSE fleet_rollups.spare_last END,
                 required_last = CASE WHEN excluded.ok_samples = 1
                                           AND excluded.last_at >= fleet_rollups.last_at
                                      THEN excluded.required_last
                                      ELSE fleet_rollups.required_last END,
                 source_last   = CASE WHEN excluded.ok_samples = 1
                                           AND (fleet_rollups.ok_samples = 0
                                                OR excluded.last_at >= fleet_rollups.last_at)
                                      THEN excluded.source_last ELSE fleet_rollups.source_last END,
                 last_at       = ", $max, "(fleet_rollups.last_at, excluded.last_at)"
        )
    };
}
const FOLD_SQLITE: &str = fold_sql!("min", "max");
const FOLD_POSTGRES: &str = fold_sql!("LEAST", "GREATEST");

/// Adds one sample to the bucket of `resolution` that holds `at`. Min and max ignore failed
/// samples (SQLite's two-argument `min`/`max` return NULL when either side is NULL, hence the
/// `coalesce`); the `last` values and `source_last` follow the newest ok sample, so a
/// late-arriving older sample (a clock step) never overwrites a newer one, and a failed scrape
/// after an ok one leaves the bucket's source as the ok one's (a bucket whose every sample
/// failed keeps `none`). The absorption verdict keeps its worst (`absorbed_min`) and the most
/// machines needed among the samples it found short, likewise ignoring samples that did not assess
/// it.
async fn fold_into_rollup(
    conn: &mut AnyConnection,
    fleet_id: i64,
    resolution: Resolution,
    at: UnixMillis,
    f: &Folded<'_>,
) -> sqlx::Result<()> {
    let width = resolution.bucket_millis();
    let bucket = at.div_euclid(width) * width;
    let sql = super::Dialect::of(conn).pick(FOLD_SQLITE, FOLD_POSTGRES);
    sqlx::query(sql)
        .bind(fleet_id)
        .bind(width / 1000)
        .bind(bucket)
        .bind(f.ok)
        .bind(f.spare)
        .bind(f.required)
        .bind(at)
        .bind(f.source.as_str())
        .bind(f.absorbed)
        // Only a short sample's answer says what a restore needs; an absorbed one's 0 would
        // hide a short neighbour's "no number suffices" (NULL) behind a coverable-looking 0.
        .bind(f.machines_needed.filter(|_| f.absorbed == Some(0)))
        .execute(conn)
        .await?;
    Ok(())
}

// ---- Reads for charts, the recent-samples table and annotations; prunes for retention. ----

/// A fleet as series reads need it: its id (the samples' key) and its spec, still JSON.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FleetRef {
    /// `fleets.id`.
    pub id: i64,
    /// The stored `FleetSpec` JSON.
    pub spec: String,
    /// When the fleet was created: its history starts there.
    pub created_at: UnixMillis,
}

/// The id and spec of fleet `name`, if it exists.
pub async fn fleet_ref(conn: &mut AnyConnection, name: &str) -> sqlx::Result<Option<FleetRef>> {
    sqlx::query_as("SELECT id, spec, created_at FROM fleets WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await
}

/// One step-wide bucket of a series as SQL aggregated it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketRow {
    /// The bucket's index: its start is `from + k * step`.
    pub k: i64,
    /// The fewest spares of any ok sample (NULL when none was ok).
    pub spare_min: Option<i64>,
    /// The most spares of any ok sample.
    pub spare_max: Option<i64>,
    /// The highest requirement of any ok sample.
    pub required_max: Option<i64>,
    /// Ok samples in the bucket.
    pub ok_samples: i64,
    /// The source of the bucket's newest ok sample; `none` when none was ok.
    pub source: Source,
    /// The worst absorption verdict of the samples that judged one (0 short, 1 absorbed;
    /// NULL when none did).
    pub absorbed_min: Option<i64>,
    /// The most restore machines any sample found short needed (NULL when none was short, or
    /// when no number sufficed).
    pub machines_needed_max: Option<i64>,
}

/// The queries below encode sources as small integers (native 2, derived 1), so "the source
/// of the newest ok row" is one `max(CASE WHEN ok THEN at * 4 + code END)`, NULL when no row
/// was ok: a bare column beside several aggregates would come from an arbitrary row.
fn source_from_code(code: Option<i64>) -> Source {
    match code.map(|c| c.rem_euclid(4)) {
        Some(2) => Source::Native,
        Some(1) => Source::Derived,
        _ => Source::None,
    }
}

/// A bucket as [`packed`] encodes it: `k`, `spare_min`, `spare_max`, `required_max`,
/// `ok_samples`, `newest_ok_code`, `absorbed_min`, `machines_needed_max`.
type PackedBucket = (
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// One of the bucket statements below wrapped so that all its rows come back as one JSON
/// array of arrays in a single value. sqlx copies every column of every row into a value of
/// its own and hands each row across a channel; a 360-point chart paid that 360 times, which
/// was most of its query time and what kept the long ranges near twice the 1 h chart.
fn packed(buckets_sql: &str) -> String {
    format!(
        "SELECT json_group_array(json_array(k, spare_min, spare_max, required_max, ok_samples,
                                            newest_ok_code, absorbed_min, machines_needed_max))
         FROM ({buckets_sql})"
    )
}

/// [`packed`] in PostgreSQL's words: `json_agg` of `json_build_array`, in bucket order, `[]`
/// when no row matched; SQLite's index hints dropped (PostgreSQL plans on its own).
fn packed_postgres(buckets_sql: &str) -> String {
    let buckets_sql = super::dialect::without_index_hints(buckets_sql);
    format!(
        "SELECT COALESCE(json_agg(json_build_array(k, spare_min, spare_max, required_max,
                                                   ok_samples, newest_ok_code, absorbed_min,
                                                   machines_needed_max) ORDER BY k),
                         '[]')::text
         FROM ({buckets_sql}) AS buckets"
    )
}

/// Decodes what a [`packed`] statement returned into buckets, oldest first (the aggregate
/// keeps the inner query's order in practice; SQL does not promise it, so they are sorted,
/// which costs one pass over rows already in order).
fn unpack(json: &str) -> sqlx::Result<Vec<BucketRow>> {
    let packed: Vec<PackedBucket> =
        serde_json::from_str(json).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let mut rows: Vec<BucketRow> = packed
        .into_iter()
        .map(
            |(k, spare_min, spare_max, required_max, ok_samples, code, absorbed_min, needed)| {
                BucketRow {
                    k,
                    spare_min,
                    spare_max,
                    required_max,
                    ok_samples,
                    source: source_from_code(code),
                    absorbed_min,
                    machines_needed_max: needed,
                }
            },
        )
        .collect();
    rows.sort_by_key(|r| r.k);
    Ok(rows)
}

/// `raw_buckets`' statement (binds: fleet id, from, to, step); public so tests can check
/// its plan.
pub const RAW_BUCKETS_SQL: &str =
    "SELECT (at - $2) / $4 AS k, min(spare) AS spare_min, max(spare) AS spare_max,
            max(required) AS required_max, sum(CASE WHEN ok THEN 1 ELSE 0 END) AS ok_samples,
            min(absorbed) AS absorbed_min,
            max(CASE WHEN absorbed = 0 THEN machines_needed END) AS machines_needed_max,
            max(CASE WHEN ok
                     THEN at * 4 + CASE source WHEN 'native' THEN 2 WHEN 'derived' THEN 1
                                   ELSE 0 END END) AS newest_ok_code
     FROM fleet_samples INDEXED BY fleet_samples_fleet_at
     WHERE fleet_id = $1 AND at >= $2 AND at < $3
     GROUP BY k ORDER BY k";

/// [`RAW_BUCKETS_SQL`] as [`raw_buckets`] runs it (its rows packed into one JSON value);
/// public so tests can check its plan.
pub static RAW_BUCKETS_PACKED: LazyLock<String> = LazyLock::new(|| packed(RAW_BUCKETS_SQL));
static RAW_BUCKETS_PACKED_POSTGRES: LazyLock<String> =
    LazyLock::new(|| packed_postgres(RAW_BUCKETS_SQL));

/// The raw samples of fleet `fleet_id` in `[from, to)`, folded into buckets of `step` ms,
/// oldest first. The range is a seek on `fleet_samples_fleet_at`, so the rows read are the
/// range's samples, and the rows returned at most `(to - from) / step + 1`, whatever the
/// history holds.
pub async fn raw_buckets(
    conn: &mut AnyConnection,
    fleet_id: i64,
    from: UnixMillis,
    to: UnixMillis,
    step: i64,
) -> sqlx::Result<Vec<BucketRow>> {
    let sql = super::Dialect::of(conn).pick(&RAW_BUCKETS_PACKED, &RAW_BUCKETS_PACKED_POSTGRES);
    let json: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(fleet_id)
        .bind(from)
        .bind(to)
        .bind(step)
        .fetch_one(conn)
        .await?;
    unpack(&json)
}

/// `rollup_buckets`' statement (binds: fleet id, resolution in seconds, from, to, step).
pub const ROLLUP_BUCKETS_SQL: &str =
    "SELECT (bucket - $3) / $5 AS k, min(spare_min) AS spare_min, max(spare_max) AS spare_max,
            max(required_max) AS required_max,
            CAST(sum(ok_samples) AS BIGINT) AS ok_samples,
            min(absorbed_min) AS absorbed_min, max(machines_needed_max) AS machines_needed_max,
            max(CASE WHEN ok_samples > 0
                     THEN last_at * 4 + CASE source_last WHEN 'native' THEN 2
                                        WHEN 'derived' THEN 1 ELSE 0 END END) AS newest_ok_code
     FROM fleet_rollups
     WHERE fleet_id = $1 AND resolution = $2 AND bucket >= $3 AND bucket < $4
     GROUP BY k ORDER BY k";

/// `rollup_buckets`' statement when the step is the rollup's own width (binds as
/// [`ROLLUP_BUCKETS_SQL`]): each point is one stored row, so the rows are read in primary-key
/// order as they are, without the temporary B-tree a `GROUP BY` on the computed bucket needs.
pub const ROLLUP_ROWS_SQL: &str =
    "SELECT (bucket - $3) / $5 AS k, spare_min, spare_max, required_max, ok_samples,
            absorbed_min, machines_needed_max,
            CASE WHEN ok_samples > 0
                 THEN last_at * 4 + CASE source_last WHEN 'native' THEN 2
                                    WHEN 'derived' THEN 1 ELSE 0 END END AS newest_ok_code
     FROM fleet_rollups
     WHERE fleet_id = $1 AND resolution = $2 AND bucket >= $3 AND bucket < $4
     ORDER BY bucket";

/// [`ROLLUP_BUCKETS_SQL`] and [`ROLLUP_ROWS_SQL`] as [`rollup_buckets`] runs them
/// (their rows packed into one JSON value); public so tests can check their plans.
pub static ROLLUP_BUCKETS_PACKED: LazyLock<String> = LazyLock::new(|| packed(ROLLUP_BUCKETS_SQL));
/// See [`ROLLUP_BUCKETS_PACKED`].
pub static ROLLUP_ROWS_PACKED: LazyLock<String> = LazyLock::new(|| packed(ROLLUP_ROWS_SQL));
static ROLLUP_BUCKETS_PACKED_POSTGRES: LazyLock<String> =
    LazyLock::new(|| packed_postgres(ROLLUP_BUCKETS_SQL));
static ROLLUP_ROWS_PACKED_POSTGRES: LazyLock<String> =
    LazyLock::new(|| packed_postgres(ROLLUP_ROWS_SQL));

/// The `resolution` rollups of fleet `fleet_id` whose buckets start in `[from, to)`, folded
/// into buckets of `step` ms (a multiple of the rollup's width, `from` aligned to it), oldest
/// first: the fewest and most spares, the highest requirement, the ok samples and the source
/// of the newest ok sample (rollup buckets are disjoint, so the newest row with an ok sample
/// holds it). A primary-key range, so the cost follows the range's width. When `step` is the
/// rollup's width, rows are points as stored ([`ROLLUP_ROWS_SQL`]).
pub async fn rollup_buckets(
    conn: &mut AnyConnection,
    fleet_id: i64,
    resolution: Resolution,
    from: UnixMillis,
    to: UnixMillis,
    step: i64,
) -> sqlx::Result<Vec<BucketRow>> {
    let sql = if step == resolution.bucket_millis() {
        super::Dialect::of(conn).pick(&ROLLUP_ROWS_PACKED, &ROLLUP_ROWS_PACKED_POSTGRES)
    } else {
        super::Dialect::of(conn).pick(&ROLLUP_BUCKETS_PACKED, &ROLLUP_BUCKETS_PACKED_POSTGRES)
    };
    let json: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(fleet_id)
        .bind(resolution.bucket_millis() / 1000)
        .bind(from)
        .bind(to)
        .bind(step)
        .fetch_one(conn)
        .await?;
    unpack(&json)
}

/// One stored sample, as the recent-samples table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSample {
    pub at: UnixMillis,
    pub ok: bool,
    pub source: String,
    pub spare: Option<i64>,
    pub required: Option<i64>,
    pub voters: Option<i64>,
    pub learners: Option<i64>,
    pub leader_id: Option<i64>,
    pub term: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
}

/// `recent`'s statement (binds: fleet id, limit).
pub const RECENT_SQL: &str =
    "SELECT at, ok, source, spare, required, voters, learners, leader_id, term, latency_ms, error
     FROM fleet_samples INDEXED BY fleet_samples_fleet_at
     WHERE fleet_id = $1 ORDER BY at DESC, id DESC LIMIT $2";

/// The newest `limit` samples of fleet `fleet_id`, newest first (a backwards walk of
/// `fleet_samples_fleet_at`: `limit` rows read, whatever the history).
pub async fn recent(
    conn: &mut AnyConnection,
    fleet_id: i64,
    limit: i64,
) -> sqlx::Result<Vec<StoredSample>> {
    sqlx::query(super::dialect::portable(conn, RECENT_SQL))
        .bind(fleet_id)
        .bind(limit)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|r| {
            Ok(StoredSample {
                at: r.try_get("at")?,
                ok: r.try_get::<super::flag::Flag, _>("ok")?.into(),
                source: r.try_get("source")?,
                spare: r.try_get("spare")?,
                required: r.try_get("required")?,
                voters: r.try_get("voters")?,
                learners: r.try_get("learners")?,
                leader_id: r.try_get("leader_id")?,
                term: r.try_get("term")?,
                latency_ms: r.try_get("latency_ms")?,
                error: r.try_get("error")?,
            })
        })
        .collect()
}

/// One of a fleet's provision requests as a chart spans it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RequestSpan {
    pub provision_id: i64,
    pub created_at: UnixMillis,
    pub finished_at: Option<UnixMillis>,
    /// Its state now, as stored.
    pub state: String,
}

/// `request_spans`' statement (binds: fleet name, from, to, limit, the fleet's creation).
pub const REQUEST_SPANS_SQL: &str = "
     SELECT id AS provision_id, created_at, finished_at, state
     FROM provisions INDEXED BY provisions_by_fleet_finished
     WHERE fleet = $1 AND finished_at IS NULL AND created_at < $3 AND created_at >= $5
     UNION ALL
     SELECT id AS provision_id, created_at, finished_at, state
     FROM provisions INDEXED BY provisions_by_fleet_finished
     WHERE fleet = $1 AND finished_at >= $2 AND created_at < $3 AND created_at >= $5
     ORDER BY created_at DESC, provision_id DESC LIMIT $4";

/// The newest `limit` requests for fleet `fleet` alive in `[from, to)`, newest first: created
/// before `to` and still open or finished at or after `from`, one row each however many
/// state changes it went through. Requests older than the fleet (`since`, its `created_at`)
/// belonged to an earlier fleet of the same name and are left out. Each half is a seek on
/// `provisions_by_fleet_finished` (migration 0009), so the cost follows the requests alive in
/// the range, not the fleet's whole history.
pub async fn request_spans(
    conn: &mut AnyConnection,
    fleet: &str,
    from: UnixMillis,
    to: UnixMillis,
    limit: i64,
    since: UnixMillis,
) -> sqlx::Result<Vec<RequestSpan>> {
    sqlx::query_as(super::dialect::portable(conn, REQUEST_SPANS_SQL))
        .bind(fleet)
        .bind(from)
        .bind(to)
        .bind(limit)
        .bind(since)
        .fetch_all(conn)
        .await
}

const PRUNE_RAW: &str = "DELETE FROM fleet_samples WHERE id IN (
     SELECT id FROM fleet_samples INDEXED BY fleet_samples_at WHERE at < $1 LIMIT $2)";

/// Deletes at most `batch` raw samples older than `before`; the number deleted. A seek on
/// `fleet_samples_at`, so each batch costs its own rows.
pub async fn prune_raw(
    conn: &mut AnyConnection,
    before: UnixMillis,
    batch: i64,
) -> sqlx::Result<u64> {
    let done = sqlx::query(super::dialect::portable(conn, PRUNE_RAW))
        .bind(before)
        .bind(batch)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}

const PRUNE_ROLLUPS: &str = "DELETE FROM fleet_rollups WHERE (fleet_id, resolution, bucket) IN (
     SELECT fleet_id, resolution, bucket
     FROM fleet_rollups INDEXED BY fleet_rollups_resolution_bucket
     WHERE resolution = $1 AND bucket <= $2 LIMIT $3)";

/// Deletes at most `batch` rollups of `resolution` whose whole bucket ended at or before
/// `before` (a bucket still holding retained time is kept); the number deleted.
pub async fn prune_rollups(
    conn: &mut AnyConnection,
    resolution: Resolution,
    before: UnixMillis,
    batch: i64,
) -> sqlx::Result<u64> {
    let width = resolution.bucket_millis();
    let done = sqlx::query(super::dialect::portable(conn, PRUNE_ROLLUPS))
        .bind(width / 1000)
        .bind(before - width)
        .bind(batch)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}
