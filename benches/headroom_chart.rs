//! The headroom chart's cost against its width: a fresh SQLite file holding 90 days of
//! 15-second samples for 10 fleets, stored as the product stores them (raw rows for the raw
//! retention window, minute, five-minute, hour, two-hour and six-hour rollups for all 90
//! days), then the chart's query (`series` + `annotations`) and render (`headroom_chart`) timed for the 1 h, 24 h, 7 d,
//! 30 d and 90 d ranges, side by side, each with its step, resolution and stored rows read.
//! Goal: every range's chart costs at most 2× the 1 h chart (median of query + render).
//!
//! `cargo bench --bench headroom_chart` (iterations per range: `BENCH_ITERATIONS`, default
//! 300, spread over the 10 fleets).

#[path = "../tests/api/series_history.rs"]
mod history;

#[path = "support/goals.rs"]
mod goals;

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::capacity::series;
use headroom::context::Ctx;
use headroom::domain::capacity::{Range, Resolution};
use headroom::domain::fleet::{FleetInput, FleetSpec};
use headroom::domain::{Caller, ManualClock};
use headroom::web::fleets::chart::headroom_chart;

const FLEETS: u64 = 10;
const INTERVAL_MS: i64 = 15_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;
const NOW: i64 = 1_796_000_000_000;
const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// Timings of one range, in microseconds.
struct Timed {
    range: Range,
    points: usize,
    step: i64,
    resolution: Resolution,
    query: Vec<f64>,
    render: Vec<f64>,
    total: Vec<f64>,
    bytes: usize,
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

async fn fill(ctx: &Ctx) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let from = NOW - 90 * DAY - NOW.rem_euclid(HOUR);
    let raw_since = NOW - i64::try_from(ctx.settings.retention.raw.as_millis())?;
    for seed in 0..FLEETS {
        let name = format!("fleet-{seed}");
        let spec = FleetSpec::parse(
            &FleetInput {
                name: name.clone(),
                endpoints: vec!["http://127.0.0.1:7443".into()],
                restore_machine_config: "spare-fsn1".into(),
                ..FleetInput::default()
            },
            &ctx.settings.secrets,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO fleets (name, spec, restore_machine_config, created_at, updated_at,
                                 updated_by)
             VALUES (?, ?, 'spare-fsn1', ?, ?, 'bench') RETURNING id",
        )
        .bind(&name)
        .bind(serde_json::to_string(&spec)?)
        .bind(from)
        .bind(from)
        .fetch_one(&ctx.pool)
        .await?;
        history::generate(&ctx.pool, id, seed, from, NOW, INTERVAL_MS, raw_since).await?;
    }
    // Minute rollups for all 90 days (more than the 14 days retention keeps): the rows a
    // chart skips cost it nothing, which is the point being measured.
    println!(
        "generated 90 days × {FLEETS} fleets every 15 s in {:.1} s (raw rows for the last {} h)",
        started.elapsed().as_secs_f64(),
        (NOW - raw_since) / HOUR
    );
    Ok(started.elapsed())
}

async fn time_range(ctx: &Ctx, range: Range, iterations: usize) -> anyhow::Result<Timed> {
    let caller = Caller::system();
    let mut t = Timed {
        range,
        points: 0,
        step: 0,
        resolution: Resolution::Raw,
        query: Vec::new(),
        render: Vec::new(),
        total: Vec::new(),
        bytes: 0,
    };
    for i in 0..iterations + 20 {
        let fleet = format!("fleet-{}", i as u64 % FLEETS);
        let (from, to) = (NOW - range.millis(), NOW);
        let started = Instant::now();
        let s = series::series(ctx, &caller, &fleet, from, to, None).await?;
        let a = series::annotations(ctx, &caller, &fleet, from, to).await?;
        let queried = Instant::now();
        let html = headroom_chart(&s, Some(range), &a, s.to).into_string();
        let rendered = Instant::now();
        // The first rounds warm the page cache and the pool's prepared statements.
        if i < 20 {
            continue;
        }
        t.points = s.points.len();
        (t.step, t.resolution) = (s.step, s.resolution);
        t.bytes = html.len();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        t.query.push(us(queried - started));
        t.render.push(us(rendered - queried));
        t.total.push(us(rendered - started));
    }
    Ok(t)
}

async fn explain(ctx: &Ctx, sql: &str, binds: &[i64]) -> anyhow::Result<String> {
    let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(format!(
        "EXPLAIN QUERY PLAN {sql}"
    )));
    for b in binds {
        q = q.bind(*b);
    }
    Ok(q.fetch_all(&ctx.pool)
        .await?
        .into_iter()
        .map(|r| r.3)
        .collect::<Vec<_>>()
        .join("; "))
}

/// Stored rows one series of `t` reads (fleet-1's, over the same range): raw samples or
/// rollups of its resolution in its grid-aligned range.
async fn rows_read(ctx: &Ctx, t: &Timed) -> anyhow::Result<i64> {
    let s = series::series(
        ctx,
        &Caller::system(),
        "fleet-1",
        NOW - t.range.millis(),
        NOW,
        None,
    )
    .await?;
    let (table, level) = match s.resolution {
        Resolution::Raw => ("fleet_samples", "at"),
        _ => ("fleet_rollups", "bucket"),
    };
    let resolution = match s.resolution {
        Resolution::Raw => String::new(),
        res => format!("AND resolution = {}", res.bucket_millis() / 1000),
    };
    let q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {table}
         WHERE fleet_id = (SELECT id FROM fleets WHERE name = 'fleet-1') {resolution}
           AND {level} >= ? AND {level} < ?"
    )));
    Ok(q.bind(s.from).bind(s.to).fetch_one(&ctx.pool).await?)
}

fn resolution_name(r: Resolution) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn step_words(ms: i64) -> String {
    if ms % HOUR == 0 {
        format!("{} h", ms / HOUR)
    } else if ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else {
        format!("{} s", ms / 1000)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("chart.db");
    let settings = headroom::config::Settings {
        database_url: format!("sqlite:{}", db.display()),
        render_worker: Some(BIN.into()),
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url).await?;
    let ctx = Ctx::build(settings, pool, Arc::new(ManualClock::new(NOW)))?;
    fill(&ctx).await?;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&ctx.pool)
        .await?;

    let count = |sql: &'static str| {
        let pool = ctx.pool.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await }
    };
    let size = std::fs::metadata(&db)?.len();
    println!(
        "database {:.1} MiB: {} raw samples, {} minute, {} five-minute, {} hour, {} two-hour \
         and {} six-hour rollups",
        size as f64 / (1024.0 * 1024.0),
        count("SELECT count(*) FROM fleet_samples").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 60").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 300").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 3600").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 7200").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 21600").await?,
    );
    println!(
        "plan 1 h:  {}",
        explain(
            &ctx,
            headroom::db::fleet_samples::RAW_BUCKETS_SQL,
            &[1, NOW - HOUR, NOW, 30_000]
        )
        .await?
    );
    println!(
        "plan 90 d: {}",
        explain(
            &ctx,
            headroom::db::fleet_samples::ROLLUP_ROWS_SQL,
            &[1, 21_600, NOW - 90 * DAY, NOW, 6 * HOUR]
        )
        .await?
    );

    let mut rows = Vec::new();
    for range in [Range::H1, Range::H24, Range::D7, Range::D30, Range::D90] {
        rows.push(time_range(&ctx, range, iterations).await?);
    }
    println!();
    println!(
        "{:<6} {:>7} {:<9} {:>9} {:>6} {:>11} {:>11} {:>12} {:>11} {:>11} {:>9}",
        "range",
        "step",
        "rows",
        "read",
        "points",
        "query p50",
        "query p99",
        "render p50",
        "total p50",
        "total p99",
        "html KiB"
    );
    let mut medians = Vec::new();
    for r in &mut rows {
        let read = rows_read(&ctx, r).await?;
        let (q50, q99) = (
            percentile(&mut r.query, 0.5),
            percentile(&mut r.query, 0.99),
        );
        let r50 = percentile(&mut r.render, 0.5);
        let (t50, t99) = (
            percentile(&mut r.total, 0.5),
            percentile(&mut r.total, 0.99),
        );
        medians.push(t50);
        println!(
            "{:<6} {:>7} {:<9} {:>9} {:>6} {:>9.0}µs {:>9.0}µs {:>10.0}µs {:>9.0}µs {:>9.0}µs {:>9.1}",
            r.range.as_str(),
            step_words(r.step),
            resolution_name(r.resolution),
            read,
            r.points,
            q50,
            q99,
            r50,
            t50,
            t99,
            r.bytes as f64 / 1024.0
        );
    }
    let mut goals = goals::Goals::default();
    println!();
    for (r, median) in rows.iter().zip(&medians).skip(1) {
        let ratio = median / medians[0];
        goals.check(
            &format!(
                "{} chart at most 2× the 1 h chart (median total {ratio:.2}×)",
                r.range.as_str()
            ),
            ratio <= 2.0,
        );
    }
    goals.exit_if_missed();
    Ok(())
}
