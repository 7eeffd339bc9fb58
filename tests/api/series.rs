//! Headroom history: rollups agree with the raw samples, chart series cost what their width
//! costs (whatever the history), gaps stay gaps, ranges past the raw retention read rollups,
//! retention deletes only what is old, annotations, and the JSON API over all of it.

use std::collections::BTreeMap;
use std::time::Duration;

use headroom::capacity::{retention, series};
use headroom::context::Ctx;
use headroom::db::fleet_samples as store;
use headroom::domain::capacity::{Resolution, Source, CHART_POINTS};
use headroom::domain::{Caller, ProvisionState, Role};
use headroom::error::OpError;
use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::TestApp;
use crate::runner::{caller, console, file, fleet};

#[path = "series_history.rs"]
mod history;

use history::{as_sample, tick, Tick};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const INTERVAL: i64 = 15_000;

fn viewer() -> Caller {
    caller("vera", Role::Viewer)
}

async fn fleet_id(app: &TestApp, name: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM fleets WHERE name = $1")
        .bind(name)
        .fetch_one(&app.pool)
        .await
        .expect("fleet id")
}

/// A console with fleets `names` (scraped every 15 s, the default), created long before the
/// history the tests store (a series leaves out what precedes its fleet).
async fn with_fleets(names: &[&str]) -> TestApp {
    let app = console(|_| {}).await;
    for name in names {
        fleet(&app.state.ctx, name, &[]).await;
    }
    sqlx::query("UPDATE fleets SET created_at = 0")
        .execute(&app.pool)
        .await
        .unwrap();
    app
}

/// Stores `ticks` the way the scraper's `record` does: one `insert` per sample, each in its
/// own write transaction.
async fn insert_each(app: &TestApp, fleet_id: i64, ticks: &[Tick]) {
    for t in ticks {
        let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
        store::insert(&mut tx, fleet_id, &as_sample(t))
            .await
            .expect("insert");
        tx.commit().await.unwrap();
    }
}

fn ticks(seed: u64, from: i64, to: i64) -> Vec<Tick> {
    (0..)
        .map(|i| from + i * INTERVAL)
        .take_while(|at| *at < to)
        .map(|at| tick(seed, at, INTERVAL))
        .collect()
}

/// The expected point of each `step` bucket from `from`, folded by hand from the ticks:
/// (t, fewest spares, most required, any ok, source of the newest ok sample or `none`).
type Expected = (i64, Option<u32>, Option<u32>, bool, Source);

fn fold_by_hand(ticks: &[Tick], from: i64, to: i64, step: i64) -> Vec<Expected> {
    let mut buckets: BTreeMap<i64, Expected> = BTreeMap::new();
    for t in ticks.iter().filter(|t| t.at >= from && t.at < to) {
        let k = (t.at - from) / step;
        let e = buckets
            .entry(k)
            .or_insert((from + k * step, None, None, false, Source::None));
        // A failed tick leaves the bucket's numbers and source to its ok ticks.
        if let Ok((spare, required, source)) = t.outcome {
            e.1 = Some(e.1.map_or(spare, |v| v.min(spare)));
            e.2 = Some(e.2.map_or(required, |v| v.max(required)));
            e.3 = true;
            e.4 = source;
        }
    }
    buckets.into_values().collect()
}

fn as_expected(s: &headroom::domain::capacity::Series) -> Vec<Expected> {
    s.points
        .iter()
        .map(|p| (p.t, p.spare, p.required, p.ok, p.source))
        .collect()
}

/// An hour-aligned window of `hours` whose ticks include failures and a dip below required.
fn eventful_window(seed: u64, hours: i64, before: i64) -> (i64, i64) {
    let mut from = before - 30 * DAY;
    from -= from.rem_euclid(HOUR);
    loop {
        let to = from + hours * HOUR;
        let ts = ticks(seed, from, to);
        let failed = ts.iter().any(|t| t.outcome.is_err());
        let dip = ts
            .iter()
            .any(|t| matches!(t.outcome, Ok((s, r, _)) if s < r));
        if failed && dip {
            return (from, to);
        }
        from += HOUR;
        assert!(from < before, "no eventful window for seed {seed}");
    }
}

// ---- Storage: rollups ----

/// bucket, samples, ok samples, spare min/max/last, required min/max/last, last at.
type RollupRow = (
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
);

#[tokio::test]
async fn rollups_agree_with_the_raw_samples_min_max_last_and_gaps() {
    let app = with_fleets(&["prod"]).await;
    let id = fleet_id(&app, "prod").await;
    let (from, to) = eventful_window(1, 3, app.clock_start());
    let ts = ticks(1, from, to);
    insert_each(&app, id, &ts).await;
    // A minute in which every scrape failed.
    let all_failed: Vec<Tick> = (0..4)
        .map(|i| Tick {
            at: to + i * INTERVAL,
            latency_ms: 5_000,
            outcome: Err("timed out"),
        })
        .collect();
    insert_each(&app, id, &all_failed).await;

    for (res, width) in [
        (60, MINUTE),
        (300, 5 * MINUTE),
        (3600, HOUR),
        (7200, 2 * HOUR),
        (21_600, 6 * HOUR),
    ] {
        // Recomputed from the raw rows: the last ok values by the newest ok sample.
        let from_raw: Vec<RollupRow> = sqlx::query_as(
            "SELECT g.b, g.n, g.oks, g.spare_min, g.spare_max,
                        (SELECT spare FROM fleet_samples l WHERE l.fleet_id = $1
                           AND l.ok AND (l.at / $2) * $2 = g.b ORDER BY l.at DESC LIMIT 1),
                        g.required_min, g.required_max,
                        (SELECT required FROM fleet_samples l WHERE l.fleet_id = $1
                           AND l.ok AND (l.at / $2) * $2 = g.b ORDER BY l.at DESC LIMIT 1),
                        g.last_at
                 FROM (SELECT (at / $2) * $2 AS b, count(*) AS n,
                              CAST(sum(CASE WHEN ok THEN 1 ELSE 0 END) AS BIGINT) AS oks,
                              min(spare) AS spare_min, max(spare) AS spare_max,
                              min(required) AS required_min, max(required) AS required_max,
                              max(at) AS last_at
                       FROM fleet_samples WHERE fleet_id = $1 GROUP BY 1) g
                 ORDER BY g.b",
        )
        .bind(id)
        .bind(width)
        .fetch_all(&app.pool)
        .await
        .unwrap();
        let rollups: Vec<RollupRow> = sqlx::query_as(
            "SELECT bucket, samples, ok_samples, spare_min, spare_max, spare_last,
                        required_min, required_max, required_last, last_at
                 FROM fleet_rollups WHERE fleet_id = $1 AND resolution = $2 ORDER BY bucket",
        )
        .bind(id)
        .bind(res)
        .fetch_all(&app.pool)
        .await
        .unwrap();
        assert_eq!(rollups, from_raw, "resolution {res}");
        assert_eq!(
            rollups.iter().map(|r| r.1).sum::<i64>(),
            ts.len() as i64 + 4
        );
    }
    let gap: (i64, i64, Option<i64>, String) = sqlx::query_as(
        "SELECT samples, ok_samples, spare_min, source_last FROM fleet_rollups
         WHERE fleet_id = $1 AND resolution = 60 AND bucket = $2",
    )
    .bind(id)
    .bind(to)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(gap, (4, 0, None, "none".to_owned()));
}

/// The bucket statements' columns in their order.
type BucketColumns = (
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// The row-by-row reading of one of the bucket statements, as `BucketRow`s.
async fn buckets_row_by_row(
    pool: &sqlx::AnyPool,
    sql: &'static str,
    binds: &[i64],
) -> Vec<store::BucketRow> {
    let sql = if crate::helpers::store::on_postgres() {
        headroom::db::dialect::without_index_hints(sql)
    } else {
        sql.to_owned()
    };
    let mut q = sqlx::query_as::<_, BucketColumns>(sqlx::AssertSqlSafe(sql));
    for b in binds {
        q = q.bind(*b);
    }
    q.fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .map(
            |(k, spare_min, spare_max, required_max, ok_samples, absorbed_min, needed, code)| {
                store::BucketRow {
                    k,
                    spare_min,
                    spare_max,
                    required_max,
                    ok_samples,
                    // The encoding the statements document: the newest ok row's time × 4 + 2 when
                    // native, + 1 when derived.
                    source: match code.map(|c| c.rem_euclid(4)) {
                        Some(2) => Source::Native,
                        Some(1) => Source::Derived,
                        _ => Source::None,
                    },
                    absorbed_min,
                    machines_needed_max: needed,
                }
            },
        )
        .collect()
}

/// The chart reads each bucket statement's rows packed into one JSON value
/// (`store::raw_buckets`, `store::rollup_buckets`); whatever the tables hold, including NULLs
/// in every nullable column and values past 32 bits, that returns exactly the rows the
/// statement returns read one by one.
#[test]
fn packed_bucket_reads_return_exactly_the_statements_rows() {
    use proptest::prelude::*;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = rt.block_on(with_fleets(&["prod"]));
    let id = rt.block_on(fleet_id(&app, "prod"));
    let from = 1_796_000_000_000 - 1_796_000_000_000 % (6 * HOUR);
    let big = prop_oneof![0i64..10, Just(i64::from(u32::MAX) + 7), Just(i64::MAX / 8)];
    // A raw sample, any values its columns admit: offset in the window, ok, source, spare,
    // required, absorbed, machines needed.
    let raw = (
        0..4 * HOUR,
        any::<bool>(),
        0u8..3,
        big.clone(),
        0i64..50,
        proptest::option::of(0i64..2),
        proptest::option::of(big.clone()),
    );
    // A minute rollup: bucket index, ok samples, spare min, spare max, required max, newest
    // sample's offset in the bucket, source, absorbed min, machines needed max.
    let rollup = (
        0i64..40,
        0i64..5,
        proptest::option::of(big.clone()),
        proptest::option::of(big),
        proptest::option::of(0i64..50),
        0..MINUTE,
        0u8..3,
        proptest::option::of(0i64..2),
        proptest::option::of(0i64..9),
    );
    let sources = ["native", "derived", "none"];
    let config = ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    };
    proptest!(config, |(raws in proptest::collection::vec(raw, 0..80),
                       rollups in proptest::collection::vec(rollup, 0..60),
                       step_minutes in prop_oneof![Just(1i64), Just(2), Just(7)])| {
        rt.block_on(async {
            let pool = &app.pool;
            sqlx::query("DELETE FROM fleet_samples").execute(pool).await.unwrap();
            sqlx::query("DELETE FROM fleet_rollups").execute(pool).await.unwrap();
            for (offset, ok, source, spare, required, absorbed, needed) in &raws {
                sqlx::query(
                    "INSERT INTO fleet_samples (fleet_id, at, ok, source, spare, required,
                         latency_ms, error, absorbed, machines_needed)
                     VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9)",
                )
                .bind(id)
                .bind(from + offset)
                .bind(*ok)
                .bind(sources[usize::from(*source)])
                .bind(ok.then_some(*spare))
                .bind(ok.then_some(*required))
                .bind((!ok).then_some("timed out"))
                .bind(absorbed)
                .bind(needed)
                .execute(pool)
                .await
                .unwrap();
            }
            for (k, ok_samples, spare_min, spare_max, required_max, last, source, absorbed, needed) in &rollups {
                sqlx::query(
                    "INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples,
                         ok_samples, spare_min, spare_max, required_max, last_at, source_last,
                         absorbed_min, machines_needed_max)
                     VALUES ($1, 60, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT (fleet_id, resolution, bucket) DO NOTHING",
                )
                .bind(id)
                .bind(from + k * MINUTE)
                .bind(ok_samples + 1)
                .bind(ok_samples)
                .bind(spare_min)
                .bind(spare_max)
                .bind(required_max)
                .bind(from + k * MINUTE + last)
                .bind(sources[usize::from(*source)])
                .bind(absorbed)
                .bind(needed)
                .execute(pool)
                .await
                .unwrap();
            }
            let to = from + 4 * HOUR;
            let step = step_minutes * MINUTE;
            let mut conn = pool.acquire().await.unwrap();
            let packed = store::raw_buckets(&mut conn, id, from, to, step).await.unwrap();
            assert_eq!(packed, buckets_row_by_row(pool, store::RAW_BUCKETS_SQL, &[id, from, to, step]).await);
            let packed = store::rollup_buckets(&mut conn, id, Resolution::Minute, from, to, step).await.unwrap();
            let sql = if step == MINUTE { store::ROLLUP_ROWS_SQL } else { store::ROLLUP_BUCKETS_SQL };
            assert_eq!(packed, buckets_row_by_row(pool, sql, &[id, 60, from, to, step]).await);
        });
    });
}

#[tokio::test]
async fn the_bulk_generator_stores_exactly_what_the_product_stores() {
    // The benchmark and the history tests below rely on it.
    let app = with_fleets(&["by-insert", "by-bulk"]).await;
    let (a, b) = (
        fleet_id(&app, "by-insert").await,
        fleet_id(&app, "by-bulk").await,
    );
    let (from, to) = eventful_window(4, 4, app.clock_start());
    insert_each(&app, a, &ticks(4, from, to)).await;
    let stored = history::generate(&app.pool, b, 4, from, to, INTERVAL, from)
        .await
        .unwrap();
    assert_eq!(
        (stored.raw, stored.minute, stored.five_minutes, stored.hour),
        (4 * 240, 4 * 60, 4 * 12, 4)
    );
    let raw = "SELECT at, ok, source, spare, required, voters, learners, leader_id, term,
                      latency_ms, error FROM fleet_samples WHERE fleet_id = $1 ORDER BY at";
    let rollups = "SELECT resolution, bucket, samples, ok_samples, spare_min, spare_max,
                          spare_last, required_min, required_max, required_last, last_at,
                          source_last
                   FROM fleet_rollups WHERE fleet_id = $1 ORDER BY resolution, bucket";
    for sql in [raw, rollups] {
        let dump = |id: i64| {
            let pool = app.pool.clone();
            async move {
                sqlx::query(sql)
                    .bind(id)
                    .fetch_all(&pool)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        use sqlx::Row;
                        (0..r.len())
                            .map(|i| {
                                r.try_get::<Option<i64>, _>(i)
                                    .map(|v| format!("{v:?}"))
                                    .or_else(|_| {
                                        r.try_get::<Option<String>, _>(i).map(|v| format!("{v:?}"))
                                    })
                                    // A yes/no column: BOOLEAN on PostgreSQL.
                                    .or_else(|_| {
                                        r.try_get::<Option<bool>, _>(i)
                                            .map(|v| format!("{:?}", v.map(i64::from)))
                                    })
                                    .unwrap()
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            }
        };
        let (x, y) = (dump(a).await, dump(b).await);
        assert!(!x.is_empty());
        assert_eq!(x, y, "{sql}");
    }
}

// ---- Series ----

fn invalid<T: std::fmt::Debug>(r: Result<T, OpError>, field: &str) {
    match r {
        Err(OpError::Invalid(e)) => assert!(e.for_field(field).is_some(), "{e}"),
        other => panic!("{field}: {other:?}"),
    }
}

#[tokio::test]
async fn series_points_are_the_samples_folded_per_step_from_raw_rows_and_from_rollups() {
    let app = with_fleets(&["prod"]).await;
    let ctx = &app.state.ctx;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    let from = now - 2 * HOUR - now.rem_euclid(HOUR);
    let ts = ticks(2, from, now);
    insert_each(&app, id, &ts).await;

    // Raw rows (the last hour, the default step: two 15 s intervals), on the 30 s grid: the
    // bucket holding `now - HOUR` (20 s past a grid line) is left out, the one holding `now`
    // kept up to now (the series never reaches into the future).
    let s = series::series(ctx, &viewer(), "prod", now - HOUR, now, None)
        .await
        .unwrap();
    assert_eq!(now.rem_euclid(30_000), 20_000);
    assert_eq!(
        (s.resolution, s.step, s.from, s.to),
        (Resolution::Raw, 30_000, now - HOUR + 10_000, now)
    );
    assert_eq!(as_expected(&s), fold_by_hand(&ts, s.from, s.to, 30_000));
    assert_eq!(s.points.len(), 120);
    // Minute rollups (a 60 s step), the same samples folded the same way.
    let s = series::series(ctx, &viewer(), "prod", from, now, Some(60_000))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.step), (Resolution::Minute, 60_000));
    assert_eq!(as_expected(&s), fold_by_hand(&ts, from, s.to, 60_000));
    // Two-hour rollups, one a point (the two-hour grid from the epoch), and folded into
    // four-hour points.
    let s = series::series(ctx, &viewer(), "prod", from, now, Some(2 * HOUR))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.step), (Resolution::TwoHours, 2 * HOUR));
    assert_eq!(s.from % (2 * HOUR), 0);
    assert_eq!(as_expected(&s), fold_by_hand(&ts, s.from, s.to, 2 * HOUR));
    let s = series::series(ctx, &viewer(), "prod", from, now, Some(4 * HOUR))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.step), (Resolution::TwoHours, 4 * HOUR));
    assert_eq!(as_expected(&s), fold_by_hand(&ts, s.from, s.to, 4 * HOUR));
    // Seven hours is no whole number of six-hour rows: hour rows, seven a point.
    let s = series::series(ctx, &viewer(), "prod", from, now, Some(7 * HOUR))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.step), (Resolution::Hour, 7 * HOUR));
    assert_eq!(as_expected(&s), fold_by_hand(&ts, s.from, s.to, 7 * HOUR));
    // The bucket's spare is its minimum, its spare_max its maximum.
    let s = series::series(ctx, &viewer(), "prod", from, now, Some(HOUR))
        .await
        .unwrap();
    for p in &s.points {
        let in_bucket = ts.iter().filter(|t| t.at >= p.t && t.at < p.t + HOUR);
        let max = in_bucket
            .filter_map(|t| t.outcome.as_ref().ok().map(|o| o.0))
            .max();
        assert_eq!(p.spare_max, max);
    }
}

#[tokio::test]
async fn failed_buckets_are_gaps_and_buckets_without_samples_are_absent() {
    let app = with_fleets(&["prod"]).await;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    let now = now - now.rem_euclid(HOUR);
    let start = now - HOUR;
    let mut ts: Vec<Tick> = Vec::new();
    for i in 0..240 {
        let at = start + i * INTERVAL;
        let minute = i / 4;
        let outcome = match minute {
            10..=14 => Err("could not connect"), // five minutes of failed scrapes
            20..=29 => continue,                 // ten minutes with no tick at all
            _ => Ok((3, 2, Source::Native)),
        };
        ts.push(Tick {
            at,
            latency_ms: 3,
            outcome,
        });
    }
    insert_each(&app, id, &ts).await;
    let s = series::series(&app.state.ctx, &viewer(), "prod", start, now, Some(60_000))
        .await
        .unwrap();
    let by_minute: BTreeMap<i64, bool> = s
        .points
        .iter()
        .map(|p| ((p.t - start) / MINUTE, p.ok))
        .collect();
    assert_eq!(s.points.len(), 50, "60 minutes less 10 without samples");
    for m in 0..60 {
        match m {
            10..=14 => assert_eq!(by_minute.get(&m), Some(&false), "minute {m}"),
            20..=29 => assert_eq!(by_minute.get(&m), None, "minute {m}"),
            _ => assert_eq!(by_minute.get(&m), Some(&true), "minute {m}"),
        }
    }
    let gap = s.points.iter().find(|p| !p.ok).unwrap();
    assert_eq!(
        (gap.spare, gap.required, gap.source),
        (None, None, Source::None)
    );
}

#[tokio::test]
async fn an_ok_bucket_whose_newest_sample_failed_reports_the_newest_ok_samples_source() {
    let app = with_fleets(&["prod"]).await;
    let ctx = &app.state.ctx;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    // The start of a whole six-hour bucket, inside the raw retention.
    let start = now - now.rem_euclid(6 * HOUR) - 6 * HOUR;
    let at = |offset: i64, outcome| Tick {
        at: start + offset,
        latency_ms: 3,
        outcome,
    };
    // One minute: derived, native, then a failed scrape; the next minute only failures.
    insert_each(
        &app,
        id,
        &[
            at(0, Ok((2, 2, Source::Derived))),
            at(15_000, Ok((3, 2, Source::Native))),
            at(30_000, Err("timed out")),
            at(60_000, Err("timed out")),
            at(75_000, Err("timed out")),
        ],
    )
    .await;
    let stored: Vec<(i64, i64, String)> = sqlx::query_as(
        "SELECT resolution, bucket, source_last FROM fleet_rollups WHERE fleet_id = $1
         ORDER BY resolution, bucket",
    )
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let row = |res: i64, bucket: i64, source: &str| (res, bucket, source.to_owned());
    assert_eq!(
        stored,
        [
            row(60, start, "native"),
            row(60, start + MINUTE, "none"),
            row(300, start, "native"),
            row(3600, start, "native"),
            row(7200, start, "native"),
            row(21_600, start, "native"),
        ]
    );
    // 45 s is read raw; its first bucket ends with the failed scrape too.
    for (step, resolution) in [
        (45_000, Resolution::Raw),
        (MINUTE, Resolution::Minute),
        (HOUR, Resolution::Hour),
        (6 * HOUR, Resolution::SixHours),
    ] {
        let s = series::series(ctx, &viewer(), "prod", start, start + 6 * HOUR, Some(step))
            .await
            .unwrap();
        assert_eq!(s.resolution, resolution);
        let p = &s.points[0];
        assert_eq!(
            (p.t, p.ok, p.spare, p.source),
            (start, true, Some(2), Source::Native),
            "step {step}"
        );
    }
    let s = series::series(ctx, &viewer(), "prod", start, start + HOUR, Some(MINUTE))
        .await
        .unwrap();
    let failed: Vec<(i64, bool, Source)> = s.points[1..]
        .iter()
        .map(|p| (p.t - start, p.ok, p.source))
        .collect();
    assert_eq!(failed, [(MINUTE, false, Source::None)]);
}

/// Stores `days` of history for fleet `name` (raw rows for all of it: the worst case, as if
/// retention had not run yet) and returns its series for the last hour and day.
async fn last_hour_and_day(
    app: &TestApp,
    name: &str,
    days: i64,
) -> [headroom::domain::capacity::Series; 2] {
    let id = fleet_id(app, name).await;
    let now = app.clock_start();
    let from = now - days * DAY - now.rem_euclid(HOUR);
    history::generate(&app.pool, id, 9, from, now, INTERVAL, from)
        .await
        .unwrap();
    let ctx = &app.state.ctx;
    [
        series::series(ctx, &viewer(), name, now - HOUR, now, None)
            .await
            .unwrap(),
        series::series(ctx, &viewer(), name, now - DAY, now, None)
            .await
            .unwrap(),
    ]
}

#[tokio::test]
async fn a_series_reads_and_returns_the_same_points_with_1_day_or_30_days_of_history() {
    let app = with_fleets(&["young", "old"]).await;
    let young = last_hour_and_day(&app, "young", 1).await;
    let old = last_hour_and_day(&app, "old", 30).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM fleet_samples")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(rows > 30 * 5_700, "{rows} raw rows stored");
    for (y, o) in young.iter().zip(&old) {
        assert!(o.points.len() as i64 <= CHART_POINTS);
        assert!(!o.points.is_empty());
        assert_eq!(y.points, o.points, "same samples in range, same points");
    }
    // The last hour in 30 s points, the last day in 5 min points (288 of them).
    assert_eq!((old[0].points.len(), old[1].points.len()), (120, 288));
    assert_eq!(
        (old[1].step, old[1].resolution),
        (5 * MINUTE, Resolution::FiveMinutes)
    );

    // The rows scanned are the range's: each read is an index range on (fleet, time).
    if crate::helpers::store::planner_is_not_sqlites("series reads") {
        return;
    }
    let plan = |sql: &'static str, binds: Vec<i64>| {
        let pool = app.pool.clone();
        async move {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(explain));
            for b in binds {
                q = q.bind(b);
            }
            q.fetch_all(&pool)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.3)
                .collect::<Vec<_>>()
                .join(" | ")
        }
    };
    let now = app.clock_start();
    let raw = plan(store::RAW_BUCKETS_SQL, vec![2, now - HOUR, now, 30_000]).await;
    assert!(
        raw.contains("SEARCH fleet_samples USING INDEX fleet_samples_fleet_at (fleet_id=? AND at>? AND at<?)"),
        "{raw}"
    );
    assert!(!raw.contains("SCAN fleet_samples"), "{raw}");
    let rollups = plan(
        store::ROLLUP_BUCKETS_SQL,
        vec![2, 60, now - DAY, now, 240_000],
    )
    .await;
    assert!(
        rollups.contains("SEARCH fleet_rollups USING PRIMARY KEY (fleet_id=? AND resolution=? AND bucket>? AND bucket<?)"),
        "{rollups}"
    );
    assert!(!rollups.contains("SCAN fleet_rollups"), "{rollups}");
    // A step of the rollup's own width reads its rows in key order, with nothing to sort.
    let rows = plan(
        store::ROLLUP_ROWS_SQL,
        vec![2, 21_600, now - 90 * DAY, now, 6 * HOUR],
    )
    .await;
    assert_eq!(
        rows,
        "SEARCH fleet_rollups USING PRIMARY KEY (fleet_id=? AND resolution=? AND bucket>? AND bucket<?)"
    );
    // As they run: each statement wrapped into one JSON value keeps its own range seek, and
    // rows as stored still need nothing sorted.
    for (packed, binds, seek) in [
        (
            store::RAW_BUCKETS_PACKED.as_str(),
            vec![2, now - HOUR, now, 30_000],
            "SEARCH fleet_samples USING INDEX fleet_samples_fleet_at (fleet_id=? AND at>? AND at<?)",
        ),
        (
            store::ROLLUP_BUCKETS_PACKED.as_str(),
            vec![2, 60, now - DAY, now, 240_000],
            "SEARCH fleet_rollups USING PRIMARY KEY (fleet_id=? AND resolution=? AND bucket>? AND bucket<?)",
        ),
        (
            store::ROLLUP_ROWS_PACKED.as_str(),
            vec![2, 21_600, now - 90 * DAY, now, 6 * HOUR],
            "SEARCH fleet_rollups USING PRIMARY KEY (fleet_id=? AND resolution=? AND bucket>? AND bucket<?)",
        ),
    ] {
        let p = plan(packed, binds).await;
        assert!(p.contains(seek), "{p}");
        assert!(!p.contains("SCAN fleet_"), "{p}");
        if packed == store::ROLLUP_ROWS_PACKED.as_str() {
            assert!(!p.contains("TEMP B-TREE"), "{p}");
        }
    }
    let recent = plan(store::RECENT_SQL, vec![2, 20]).await;
    assert!(
        recent.contains("SEARCH fleet_samples USING INDEX fleet_samples_fleet_at (fleet_id=?)"),
        "{recent}"
    );
    assert!(!recent.contains("TEMP B-TREE"), "{recent}");
}

#[tokio::test]
async fn a_range_older_than_the_raw_retention_is_read_from_minute_then_hour_rollups() {
    let app = with_fleets(&["prod"]).await;
    let ctx = &app.state.ctx;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    let raw_kept = ctx.settings.retention.raw.as_millis() as i64;
    let from = now - 20 * DAY - now.rem_euclid(HOUR);
    // What the product holds once retention ran: raw rows only inside the raw window.
    history::generate(&app.pool, id, 5, from, now, INTERVAL, now - raw_kept)
        .await
        .unwrap();
    let all = ticks(5, from, now);

    // Whole hours, so the rollups hold exactly the range's samples.
    let base = now - now.rem_euclid(HOUR);
    let (a, b) = (base - 3 * DAY - HOUR, base - 3 * DAY);
    let s = series::series(ctx, &viewer(), "prod", a, b, None)
        .await
        .unwrap();
    assert_eq!(
        (s.resolution, s.step, s.points.len()),
        (Resolution::Minute, 60_000, 60)
    );
    assert_eq!(as_expected(&s), fold_by_hand(&all, a, b, 60_000));
    // Even when asked for 15 s points: the raw rows are gone, so minute points.
    let s = series::series(ctx, &viewer(), "prod", a, b, Some(15_000))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.step), (Resolution::Minute, 60_000));

    let (a, b) = (base - 16 * DAY - HOUR, base - 16 * DAY);
    let s = series::series(ctx, &viewer(), "prod", a, b, None)
        .await
        .unwrap();
    assert_eq!(
        (s.resolution, s.step, s.points.len()),
        (Resolution::Hour, HOUR, 1)
    );
    assert_eq!(as_expected(&s), fold_by_hand(&all, a, b, HOUR));

    // The last hour is still raw.
    let s = series::series(ctx, &viewer(), "prod", now - HOUR, now, Some(15_000))
        .await
        .unwrap();
    assert_eq!((s.resolution, s.points.len()), (Resolution::Raw, 240));
}

#[tokio::test]
async fn series_refuses_bad_ranges_and_unknown_fleets() {
    let app = with_fleets(&["prod"]).await;
    let ctx = &app.state.ctx;
    let now = app.clock_start();
    invalid(
        series::series(ctx, &viewer(), "prod", now, now, None).await,
        "to",
    );
    invalid(
        series::series(ctx, &viewer(), "prod", now - 401 * DAY, now, None).await,
        "from",
    );
    invalid(
        series::series(ctx, &viewer(), "prod", now - HOUR, now, Some(1_000)).await,
        "step",
    );
    invalid(
        series::series(ctx, &viewer(), "prod", now - 30 * DAY, now, Some(5_000)).await,
        "step",
    );
    invalid(
        series::recent_samples(ctx, &viewer(), "prod", 0).await,
        "limit",
    );
    invalid(
        series::recent_samples(ctx, &viewer(), "prod", 201).await,
        "limit",
    );
    assert!(matches!(
        series::series(ctx, &viewer(), "nope", now - HOUR, now, None).await,
        Err(OpError::NotFound(_))
    ));
    assert!(matches!(
        series::annotations(ctx, &viewer(), "nope", now - HOUR, now).await,
        Err(OpError::NotFound(_))
    ));
}

#[tokio::test]
async fn recent_samples_are_the_newest_first() {
    let app = with_fleets(&["prod", "other"]).await;
    let id = fleet_id(&app, "prod").await;
    let other = fleet_id(&app, "other").await;
    let now = app.clock_start();
    let ts = ticks(3, now - HOUR, now);
    insert_each(&app, id, &ts[ts.len() - 30..]).await;
    insert_each(&app, other, &ts[ts.len() - 5..]).await;
    let rows = series::recent_samples(&app.state.ctx, &viewer(), "prod", 20)
        .await
        .unwrap();
    assert_eq!(rows.len(), 20);
    let expected: Vec<i64> = ts.iter().rev().take(20).map(|t| t.at).collect();
    assert_eq!(rows.iter().map(|r| r.at).collect::<Vec<_>>(), expected);
    for (r, t) in rows.iter().zip(ts.iter().rev()) {
        match t.outcome {
            Ok((spare, required, source)) => {
                assert_eq!(
                    (r.ok, r.spare, r.required, r.source),
                    (true, Some(spare), Some(required), source)
                );
                assert_eq!((r.voters, r.learners), (Some(3), Some(spare)));
            }
            Err(why) => assert_eq!((r.ok, r.error.as_deref()), (false, Some(why))),
        }
    }
    let all = series::recent_samples(&app.state.ctx, &viewer(), "prod", 200)
        .await
        .unwrap();
    assert_eq!(all.len(), 30);
}

// ---- Annotations ----

#[tokio::test]
async fn annotations_are_one_span_per_request_of_this_fleet_alive_in_the_range() {
    let app = with_fleets(&["prod", "other"]).await;
    let ctx: Ctx = app.state.ctx.clone();
    let t0 = app.clock_start();
    let early = file(&ctx, "prod", 1).await; // requested at t0
    app.clock.advance(Duration::from_secs(60));
    requests_cancel(&ctx, early).await; // cancelled at t0 + 1 min
    app.clock.advance(Duration::from_secs(3600));
    let later = file(&ctx, "prod", 1).await; // requested at t0 + 61 min, still open
    file(&ctx, "other", 1).await; // another fleet's: never shown

    let all = series::annotations(&ctx, &viewer(), "prod", t0, t0 + 2 * HOUR)
        .await
        .unwrap();
    let got: Vec<(i64, i64, Option<i64>, ProvisionState)> = all
        .iter()
        .map(|a| {
            (
                a.provision_id,
                a.requested_at - t0,
                a.finished_at.map(|f| f - t0),
                a.state,
            )
        })
        .collect();
    // One each, however many state changes it went through, oldest first.
    assert_eq!(
        got,
        [
            (early, 0, Some(MINUTE), ProvisionState::Cancelled),
            (later, 61 * MINUTE, None, ProvisionState::PendingApproval),
        ]
    );
    assert_eq!(
        all[1].end(t0 + 90 * MINUTE),
        t0 + 90 * MINUTE,
        "open: runs to now"
    );
    assert_eq!(all[0].end(t0 + 90 * MINUTE), t0 + MINUTE);
    // A range after the cancelled request's end leaves it out; one before the later
    // request's filing leaves that out.
    let late = series::annotations(&ctx, &viewer(), "prod", t0 + 2 * MINUTE, t0 + 2 * HOUR)
        .await
        .unwrap();
    assert!(late.iter().all(|a| a.provision_id == later), "{late:?}");
    let before = series::annotations(&ctx, &viewer(), "prod", t0, t0 + 30 * MINUTE)
        .await
        .unwrap();
    assert!(before.iter().all(|a| a.provision_id == early), "{before:?}");

    // A request older than the fleet belonged to an earlier fleet of the same name.
    sqlx::query("UPDATE fleets SET created_at = $1 WHERE name = 'prod'")
        .bind(t0 + 30 * MINUTE)
        .execute(&app.pool)
        .await
        .unwrap();
    let since = series::annotations(&ctx, &viewer(), "prod", t0, t0 + 2 * HOUR)
        .await
        .unwrap();
    let ids: Vec<i64> = since.iter().map(|a| a.provision_id).collect();
    assert_eq!(ids, [later]);

    if crate::helpers::store::planner_is_not_sqlites("request spans") {
        return;
    }
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "EXPLAIN QUERY PLAN {}",
        store::REQUEST_SPANS_SQL
    )))
    .bind("prod")
    .bind(t0)
    .bind(t0 + HOUR)
    .bind(50_i64)
    .bind(t0)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let plan: Vec<String> = plan.into_iter().map(|r| r.3).collect();
    let plan = plan.join(" | ");
    assert!(
        plan.contains("USING INDEX provisions_by_fleet_finished (fleet=? AND finished_at=?)"),
        "{plan}"
    );
    assert!(
        plan.contains("USING INDEX provisions_by_fleet_finished (fleet=? AND finished_at>?)"),
        "{plan}"
    );
    assert!(!plan.contains("SCAN provisions"), "{plan}");
}

async fn requests_cancel(ctx: &Ctx, id: i64) {
    headroom::provisioning::requests::cancel(ctx, &caller("olga", Role::Operator), id)
        .await
        .expect("cancel");
}

// ---- Retention ----

#[tokio::test]
async fn retention_deletes_only_rows_older_than_each_setting_in_batches() {
    let app = with_fleets(&["prod"]).await;
    let ctx = &app.state.ctx;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    let r = ctx.settings.retention;
    let (raw_kept, minute_kept) = (r.raw.as_millis() as i64, r.minute.as_millis() as i64);
    assert_eq!((raw_kept, minute_kept), (48 * HOUR, 14 * DAY));
    let from = now - 16 * DAY - now.rem_euclid(HOUR);
    history::generate(&app.pool, id, 6, from, now, INTERVAL, from)
        .await
        .unwrap();
    let count = |sql: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let raw_before = count("SELECT count(*) FROM fleet_samples").await;
    let hours_before = count("SELECT count(*) FROM fleet_rollups WHERE resolution = 3600").await;
    let raw_cutoff = now - raw_kept;
    let old_raw: i64 = sqlx::query_scalar("SELECT count(*) FROM fleet_samples WHERE at < $1")
        .bind(raw_cutoff)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(old_raw > 2 * retention::BATCH, "several batches: {old_raw}");

    let pruned = retention::prune_once(ctx).await.unwrap();
    assert_eq!(pruned.raw as i64, old_raw);
    assert_eq!(
        count("SELECT count(*) FROM fleet_samples").await,
        raw_before - old_raw
    );
    let young = ticks(6, from, now)
        .iter()
        .filter(|t| t.at >= raw_cutoff)
        .count();
    assert_eq!(
        count("SELECT count(*) FROM fleet_samples").await,
        young as i64
    );
    let oldest_minute: i64 =
        sqlx::query_scalar("SELECT min(bucket) FROM fleet_rollups WHERE resolution = 60")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    // The minute holding the cutoff is kept whole; every minute that ended before it is gone.
    let minute_cutoff = now - minute_kept;
    assert!(oldest_minute + MINUTE > minute_cutoff && oldest_minute <= minute_cutoff);
    // Five-minute rows go with the minute ones (and are counted with them).
    assert_eq!(
        pruned.minute as i64,
        (minute_cutoff - from) / MINUTE + (minute_cutoff - from) / (5 * MINUTE)
    );
    // Hours are kept 400 days: none is old enough.
    assert_eq!(pruned.hour, 0);
    assert_eq!(
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 3600").await,
        hours_before
    );
    // The rollups of pruned raw time still draw its chart.
    let base = now - now.rem_euclid(HOUR);
    let s = series::series(
        ctx,
        &viewer(),
        "prod",
        base - 3 * DAY - HOUR,
        base - 3 * DAY,
        None,
    )
    .await
    .unwrap();
    assert_eq!((s.resolution, s.points.len()), (Resolution::Minute, 60));
    // A second prune finds nothing.
    assert_eq!(
        retention::prune_once(ctx).await.unwrap(),
        retention::Pruned::default()
    );
    // A sample exactly at the cutoff stays, one a millisecond older goes.
    app.clock.advance(Duration::from_secs(3600));
    let edge = app.clock_start() + HOUR - raw_kept;
    insert_each(
        &app,
        id,
        &[
            Tick {
                at: edge - 1,
                latency_ms: 1,
                outcome: Err("timed out"),
            },
            Tick {
                at: edge,
                latency_ms: 1,
                outcome: Err("timed out"),
            },
        ],
    )
    .await;
    retention::prune_once(ctx).await.unwrap();
    let left: Vec<i64> = sqlx::query_scalar("SELECT at FROM fleet_samples WHERE at IN ($1, $2)")
        .bind(edge - 1)
        .bind(edge)
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(left, [edge]);
}

// ---- JSON API ----

async fn get_json(app: &TestApp, token: &str, query: &str) -> (StatusCode, Value) {
    let res = app
        .client
        .get(app.url(&format!("/api/v1/fleets/prod/headroom{query}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body: Value = res.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        assert_eq!(ct.as_deref(), Some("application/problem+json"), "{body}");
    }
    (status, body)
}

#[tokio::test]
async fn the_headroom_api_answers_the_last_hour_by_default_for_a_viewer() {
    let app = with_fleets(&["prod"]).await;
    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    let id = fleet_id(&app, "prod").await;
    let now = app.clock_start();
    let mut ts = ticks(7, now - 2 * HOUR, now);
    // A minute of failed scrapes: two 30 s buckets with no ok sample.
    let n = ts.len();
    for t in &mut ts[n - 20..n - 16] {
        t.outcome = Err("timed out");
    }
    insert_each(&app, id, &ts).await;

    let (status, body) = get_json(&app, &token, "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The 30 s grid: `now` is 20 s past a grid line; the series ends at now.
    let (from, to) = (now - HOUR + 10_000, now);
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "fleet",
            "fleet_created_at",
            "from",
            "points",
            "resolution",
            "step",
            "to"
        ]
    );
    assert_eq!(body["fleet"], "prod");
    assert_eq!(body["fleet_created_at"], "1970-01-01T00:00:00Z");
    assert_eq!(body["from"], headroom::domain::clock::format_utc(from));
    assert_eq!(body["to"], headroom::domain::clock::format_utc(to));
    assert_eq!(
        (body["step"].as_i64(), body["resolution"].as_str()),
        (Some(30), Some("raw"))
    );
    let points = body["points"].as_array().unwrap();
    assert_eq!(points.len(), 120);
    let expected = fold_by_hand(&ts, from, to, 30_000);
    assert_eq!(points.len(), expected.len());
    for (p, e) in points.iter().zip(&expected) {
        assert_eq!(p["t"], headroom::domain::clock::format_utc(e.0));
        assert_eq!(p["spare"].as_u64(), e.1.map(u64::from));
        assert_eq!(p["required"].as_u64(), e.2.map(u64::from));
        assert_eq!(p["ok"], e.3);
        assert_eq!(p["source"], e.4.as_str());
    }
    // The four failed ticks (20 s past a grid line onwards) fill one 30 s bucket; the buckets
    // either side also hold an ok tick.
    assert_eq!(
        points.iter().filter(|p| p["ok"] == false).count(),
        1,
        "failed buckets: ok false"
    );

    // An explicit range and step; RFC 3339 with an offset.
    let q = "?from=2026-12-01T00:00:00%2B01:00&to=2026-12-01T01:00:00Z&step=600";
    let (status, body) = get_json(&app, &token, q).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["from"].as_str(),
            body["to"].as_str(),
            body["step"].as_i64(),
            body["resolution"].as_str()
        ),
        (
            Some("2026-11-30T23:00:00Z"),
            Some("2026-12-01T01:00:00Z"),
            Some(600),
            Some("five_minutes")
        )
    );
}

#[tokio::test]
async fn the_headroom_api_refuses_bad_input_naming_the_field_and_rule() {
    let app = with_fleets(&["prod"]).await;
    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    let long = "9".repeat(10_000);
    let cases: Vec<(String, StatusCode, &str, &str)> = vec![
        (
            "?from=yesterday".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
            "RFC 3339",
        ),
        (
            "?to=2026-02-30T00:00:00Z".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
            "RFC 3339",
        ),
        (
            "?from=%3Cscript%3E".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
            "RFC 3339",
        ),
        (
            "?from=2026-12-01T00:00:00Z%00".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
            "RFC 3339",
        ),
        (
            format!("?from={long}"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
            "RFC 3339",
        ),
        (
            "?step=0".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "from 5 to",
        ),
        (
            "?step=-15".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "from 5 to",
        ),
        (
            "?step=4".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "from 5 to",
        ),
        (
            "?step=1.5".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "whole number",
        ),
        (
            "?step=ten".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "whole number",
        ),
        (
            format!("?step={long}"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "from 5 to",
        ),
        (
            "?step=34560001".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "from 5 to",
        ),
        (
            "?from=2026-12-01T00:00:00Z&to=2026-12-01T00:00:00Z".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
            "later than from",
        ),
        (
            "?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "to",
            "later than from",
        ),
        (
            "?from=2020-01-01T00:00:00Z&to=2026-12-01T00:00:00Z".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "from",
            "400 days",
        ),
        (
            "?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z&step=5".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "step",
            "2000 points",
        ),
    ];
    for (query, want, field, rule) in cases {
        let (status, body) = get_json(&app, &token, &query).await;
        assert_eq!(status, want, "{query}: {body}");
        let errors = body["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("{query}: {body}"));
        let e = errors
            .iter()
            .find(|e| e["field"] == field)
            .unwrap_or_else(|| panic!("{query}: no {field} in {body}"));
        assert!(
            e["message"].as_str().unwrap().contains(rule),
            "{query}: {body}"
        );
        // The hostile value is never echoed back.
        assert!(!body.to_string().contains("<script>"), "{body}");
    }
    // An unknown or repeated key is a 400 naming it.
    let (status, body) = get_json(&app, &token, "?stpe=60").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("stpe"), "{body}");
    let (status, _) = get_json(&app, &token, "?step=60&step=120").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_headroom_api_is_404_for_an_unknown_fleet_and_401_without_credentials() {
    let app = with_fleets(&["prod"]).await;
    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    let res = app
        .client
        .get(app.url("/api/v1/fleets/nope/headroom"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("fleet nope"),
        "{body}"
    );
    let res = app
        .client
        .get(app.url("/api/v1/fleets/prod/headroom"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // A fleet without samples answers an empty series, not an error.
    let (status, body) = get_json(&app, &token, "").await;
    assert_eq!(
        (status, body["points"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
}
