//! The `fleet_samples` and `fleet_rollups` tables: every scrape tick, and its per-minute and
//! per-hour summaries, written together so the rollups are never behind the raw rows.

use sqlx::SqliteConnection;

use crate::domain::headroom::{Resolution, Sample, Source};
use crate::domain::UnixMillis;

/// Stores one sample of fleet `fleet_id` and folds it into its minute and hour rollups. Run it
/// inside the caller's write transaction: three statements, one commit.
pub async fn insert(conn: &mut SqliteConnection, fleet_id: i64, s: &Sample) -> sqlx::Result<i64> {
    let (ok, source, spare, required, voters, learners, leader_id, term, error) = match &s.outcome {
        Ok(o) => (
            1_i64,
            o.source,
            Some(i64::from(o.spare)),
            Some(i64::from(o.required)),
            Some(i64::from(o.voters())),
            Some(i64::from(o.learners())),
            o.leader_id.map(|v| v as i64),
            o.term.map(|v| v as i64),
            None,
        ),
        Err(reason) => (
            0,
            Source::None,
            None,
            None,
            None,
            None,
            None,
            None,
            Some(reason.as_str()),
        ),
    };
    let latency = i64::try_from(s.latency_ms).unwrap_or(i64::MAX);
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO fleet_samples
             (fleet_id, at, ok, source, spare, required, voters, learners, leader_id, term,
              latency_ms, error)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(fleet_id)
    .bind(s.at)
    .bind(ok)
    .bind(source.as_str())
    .bind(spare)
    .bind(required)
    .bind(voters)
    .bind(learners)
    .bind(leader_id)
    .bind(term)
    .bind(latency)
    .bind(error)
    .fetch_one(&mut *conn)
    .await?;
    for resolution in [Resolution::Minute, Resolution::Hour] {
        fold_into_rollup(
            &mut *conn, fleet_id, resolution, s.at, ok, source, spare, required,
        )
        .await?;
    }
    Ok(id)
}

/// Adds one sample to the bucket of `resolution` that holds `at`. Min and max ignore failed
/// samples (SQLite's two-argument `min`/`max` return NULL when either side is NULL, hence the
/// `coalesce`); `last` follows the newest ok sample, so a late-arriving older sample (a clock
/// step) never overwrites a newer one.
#[allow(clippy::too_many_arguments)]
async fn fold_into_rollup(
    conn: &mut SqliteConnection,
    fleet_id: i64,
    resolution: Resolution,
    at: UnixMillis,
    ok: i64,
    source: Source,
    spare: Option<i64>,
    required: Option<i64>,
) -> sqlx::Result<()> {
    let width = resolution.bucket_millis();
    let bucket = at.div_euclid(width) * width;
    sqlx::query(
        "INSERT INTO fleet_rollups
             (fleet_id, resolution, bucket, samples, ok_samples, spare_min, spare_max, spare_last,
              required_min, required_max, required_last, last_at, source_last)
         VALUES (?1, ?2, ?3, 1, ?4, ?5, ?5, ?5, ?6, ?6, ?6, ?7, ?8)
         ON CONFLICT (fleet_id, resolution, bucket) DO UPDATE SET
             samples       = samples + 1,
             ok_samples    = ok_samples + excluded.ok_samples,
             spare_min     = coalesce(min(spare_min, excluded.spare_min), spare_min, excluded.spare_min),
             spare_max     = coalesce(max(spare_max, excluded.spare_max), spare_max, excluded.spare_max),
             required_min  = coalesce(min(required_min, excluded.required_min), required_min, excluded.required_min),
             required_max  = coalesce(max(required_max, excluded.required_max), required_max, excluded.required_max),
             spare_last    = CASE WHEN excluded.ok_samples = 1 AND excluded.last_at >= last_at
                                  THEN excluded.spare_last ELSE spare_last END,
             required_last = CASE WHEN excluded.ok_samples = 1 AND excluded.last_at >= last_at
                                  THEN excluded.required_last ELSE required_last END,
             source_last   = CASE WHEN excluded.last_at >= last_at
                                  THEN excluded.source_last ELSE source_last END,
             last_at       = max(last_at, excluded.last_at)",
    )
    .bind(fleet_id)
    .bind(width / 1000)
    .bind(bucket)
    .bind(ok)
    .bind(spare)
    .bind(required)
    .bind(at)
    .bind(source.as_str())
    .execute(conn)
    .await?;
    Ok(())
}
