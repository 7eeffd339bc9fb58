//! headroom's 90-day chart side by side with Prometheus over the very same samples. One fleet's
//! 90 days of 15-second samples (ending at the bench's start, so Prometheus's retention keeps
//! them) are written twice: into a fresh SQLite file as the product stores them (raw rows for
//! the raw retention window, minute, five-minute, hour and six-hour rollups, then pruned by
//! the real retention), and as OpenMetrics text (gauges `spare` and `required`; a failed scrape
//! is no sample) that `promtool tsdb create-blocks-from openmetrics` turns into TSDB blocks.
//! Debian's `prometheus` is then started on loopback over those blocks (no scrape targets, a
//! year's retention), and three ways of reading the chart are timed, interleaved, at the same
//! number of points and step as headroom's 90-day chart draws:
//!
//! - headroom in process: `series` + `annotations` (SQL) and `headroom_chart` (the SVG), the
//!   calls the `headroom_chart` bench times;
//! - headroom over HTTP: `GET /fleets/{name}/chart?range=90d` (the fleet page's chart partial)
//!   on the real server, signed in, on a loopback keep-alive connection, body read;
//! - Prometheus over HTTP: `GET /api/v1/query_range` of `min_over_time(spare[STEP])`, each
//!   point evaluated at the end of headroom's bucket, on a loopback keep-alive connection,
//!   body (JSON) read but not parsed.
//!
//! Before timing, Prometheus's answer is checked point by point against headroom's fewest
//! spares (the same samples give the same chart). Goals: headroom's median at most 1.0×
//! Prometheus's, in process and over HTTP. Without `prometheus` or `promtool` it says how to
//! install them (`apt-get install prometheus`) and exits 0.
//!
//! `cargo bench --bench prometheus_chart` (timed requests per side: `BENCH_ITERATIONS`,
//! default 300, after 20 untimed).

#[path = "../tests/api/series_history.rs"]
mod history;

#[path = "support/goals.rs"]
mod goals;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/session.rs"]
mod session;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::capacity::series;
use headroom::context::Ctx;
use headroom::domain::capacity::{Range, Series};
use headroom::domain::fleet::{FleetInput, FleetSpec};
use headroom::domain::{Caller, ManualClock};
use headroom::web::fleets::chart::headroom_chart;

const FLEET: &str = "fleet-a";
/// `history::tick`'s fleet: every third fleet needs 3 spares, even ones report natively.
const SEED: u64 = 1;
const INTERVAL_MS: i64 = 15_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;
/// The largest block Prometheus's own compaction makes with a year's retention (2 h × 3⁵):
/// the TSDB looks like that of a Prometheus that kept these 90 days itself.
const MAX_BLOCK: &str = "486h";
const RETENTION: &str = "1y";
const WARMUP: usize = 20;
const BIN: &str = env!("CARGO_BIN_EXE_headroom");

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Bytes under `dir`, and how many of its subdirectories are TSDB blocks.
fn tsdb_size(dir: &Path) -> (u64, usize) {
    let (mut bytes, mut blocks) = (0, 0);
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                blocks += usize::from(path.join("meta.json").is_file());
                todo.push(path);
            } else {
                bytes += e.metadata().map_or(0, |m| m.len());
            }
        }
    }
    (bytes, blocks)
}

/// The fleet's row, created when its history starts (time before creation is no history).
async fn insert_fleet(ctx: &Ctx, created_at: i64) -> anyhow::Result<i64> {
    let spec = FleetSpec::parse(
        &FleetInput {
            name: FLEET.into(),
            endpoints: vec!["http://127.0.0.1:7443".into()],
            restore_machine_config: "spare-fsn1".into(),
            ..FleetInput::default()
        },
        &ctx.settings.secrets,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(sqlx::query_scalar(
        "INSERT INTO fleets (name, spec, restore_machine_config, created_at, updated_at,
                             updated_by)
         VALUES (?, ?, 'spare-fsn1', ?, ?, 'bench') RETURNING id",
    )
    .bind(FLEET)
    .bind(serde_json::to_string(&spec)?)
    .bind(created_at)
    .bind(created_at)
    .fetch_one(&ctx.pool)
    .await?)
}

/// Writes the ticks `history::generate` stores, from `from` to `to`, as OpenMetrics gauges
/// (one family after the other, as the format requires); returns the samples written.
fn write_openmetrics(path: &Path, from: i64, to: i64) -> anyhow::Result<u64> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut written = 0;
    for (family, help) in [
        ("spare", "Spare nodes of the fleet."),
        ("required", "Spare nodes the fleet requires."),
    ] {
        writeln!(out, "# HELP {family} {help}\n# TYPE {family} gauge")?;
        let mut at = from;
        while at < to {
            if let Ok((spare, required, _)) = history::tick(SEED, at, INTERVAL_MS).outcome {
                let value = if family == "spare" { spare } else { required };
                writeln!(
                    out,
                    "{family}{{fleet=\"{FLEET}\"}} {value} {}.{:03}",
                    at / 1000,
                    at % 1000
                )?;
                written += 1;
            }
            at += INTERVAL_MS;
        }
    }
    writeln!(out, "# EOF")?;
    out.flush()?;
    Ok(written)
}

/// Prometheus's `query_range` for headroom's chart `s`: one point per headroom point, each
/// evaluated at the last millisecond of its bucket over exactly the bucket (`(t - 1 ms,
/// t + step - 1 ms]` holds the samples of `[t, t + step)`).
fn prometheus_query(s: &Series) -> Vec<(&'static str, String)> {
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let first = s.points.first().map_or(s.from, |p| p.t);
    let last = s.points.last().map_or(s.to, |p| p.t);
    vec![
        ("query", format!("min_over_time(spare[{}ms])", s.step)),
        ("start", seconds(first + s.step - 1)),
        ("end", seconds(last + s.step - 1)),
        ("step", seconds(s.step)),
    ]
}

/// Compares Prometheus's answer with headroom's points: how many points each has and how
/// many agree (same bucket, same fewest spares).
fn agreement(s: &Series, body: &[u8]) -> anyhow::Result<(usize, usize)> {
    let v: serde_json::Value = serde_json::from_slice(body)?;
    anyhow::ensure!(v["status"] == "success", "prometheus answered {v}");
    let values = v["data"]["result"][0]["values"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let theirs: std::collections::HashMap<i64, u32> = values
        .iter()
        .filter_map(|pair| {
            let t = (pair[0].as_f64()? * 1000.0).round() as i64 + 1 - s.step;
            Some((t, pair[1].as_str()?.parse().ok()?))
        })
        .collect();
    let agree = s
        .points
        .iter()
        .filter(|p| p.spare.is_some() && theirs.get(&p.t) == p.spare.as_ref())
        .count();
    Ok((theirs.len(), agree))
}

/// One side's timings, in microseconds.
#[derive(Default)]
struct Side {
    total: Vec<f64>,
    query: Vec<f64>,
    render: Vec<f64>,
    bytes: usize,
}

impl Side {
    fn row(&mut self, who: &str, includes: &str) -> f64 {
        let p50 = percentile(&mut self.total, 0.5);
        println!(
            "  {who:<22} {p50:>9.0} µs {:>9.0} µs {:>9.0} µs {:>8.1} KiB  {includes}",
            percentile(&mut self.total, 0.9),
            percentile(&mut self.total, 0.99),
            self.bytes as f64 / 1024.0,
        );
        p50
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    peers::require(&[("prometheus", "prometheus"), ("promtool", "prometheus")]);
    let iterations: usize = env_or("BENCH_ITERATIONS", 300);
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("headroom.db");
    let settings = headroom::config::Settings {
        bind: "127.0.0.1:0".into(),
        database_url: format!("sqlite:{}", db.display()),
        render_worker: Some(BIN.into()),
        hetzner_api_url: "http://127.0.0.1:9/v1".into(),
        scrape_enabled: false,
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url).await?;
    let app = headroom::startup::Application::bind(settings, pool, Arc::new(ManualClock::new(now)))
        .await?;
    let port = app.port();
    let ctx = app.state().ctx.clone();

    // headroom: the rows the product would hold after 90 days, retention applied.
    let from = now - 90 * DAY - now.rem_euclid(HOUR);
    let started = Instant::now();
    let fleet_id = insert_fleet(&ctx, from).await?;
    let raw_since = now - i64::try_from(ctx.settings.retention.raw.as_millis())?;
    history::generate(&ctx.pool, fleet_id, SEED, from, now, INTERVAL_MS, raw_since).await?;
    headroom::capacity::retention::prune_once(&ctx).await?;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&ctx.pool)
        .await?;
    let count = |sql: &'static str| {
        let pool = ctx.pool.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await }
    };
    println!(
        "headroom: 90 days of 15 s samples for {FLEET} in {:.1} s, SQLite {:.1} MiB: {} raw \
         samples, {} minute, {} five-minute, {} hour, {} two-hour and {} six-hour rollups",
        started.elapsed().as_secs_f64(),
        mib(std::fs::metadata(&db)?.len()),
        count("SELECT count(*) FROM fleet_samples").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 60").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 300").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 3600").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 7200").await?,
        count("SELECT count(*) FROM fleet_rollups WHERE resolution = 21600").await?,
    );

    // Prometheus: the same ticks through promtool.
    let openmetrics = dir.path().join("samples.om.txt");
    let tsdb = dir.path().join("tsdb");
    let started = Instant::now();
    let samples = write_openmetrics(&openmetrics, from, now)?;
    let written = started.elapsed();
    let started = Instant::now();
    peers::promtool_blocks(&openmetrics, &tsdb, MAX_BLOCK);
    let built = started.elapsed();
    let (bytes, blocks) = tsdb_size(&tsdb);
    println!(
        "prometheus: {samples} samples as OpenMetrics ({:.1} MiB) in {:.1} s; promtool \
         create-blocks-from openmetrics made {blocks} blocks (at most {MAX_BLOCK}), {:.1} MiB, \
         in {:.1} s",
        mib(std::fs::metadata(&openmetrics)?.len()),
        written.as_secs_f64(),
        mib(bytes),
        built.as_secs_f64()
    );
    std::fs::remove_file(&openmetrics)?;
    let started = Instant::now();
    let prometheus = peers::Prometheus::serve(dir.path(), &tsdb, RETENTION);
    println!(
        "prometheus: ready on 127.0.0.1:{} in {:.1} s (retention {RETENTION}, log {})",
        prometheus.port,
        started.elapsed().as_secs_f64(),
        prometheus.log.display()
    );

    let cookie = session::admin_cookie(&ctx, "bench-admin").await;
    tokio::spawn(app.run_until_stopped());
    peers::wait_for(port, "headroom");

    // headroom's 90-day chart decides the points both sides answer.
    let caller = Caller::system();
    let (chart_from, chart_to) = (now - Range::D90.millis(), now);
    let s = series::series(&ctx, &caller, FLEET, chart_from, chart_to, None).await?;
    let client = reqwest::Client::new();
    let prometheus_url = format!("http://127.0.0.1:{}/api/v1/query_range", prometheus.port);
    let params = prometheus_query(&s);
    let headroom_url = format!(
        "http://127.0.0.1:{port}/fleets/{FLEET}/chart?range={}",
        Range::D90.as_str()
    );
    let answer = client
        .get(&prometheus_url)
        .query(&params)
        .send()
        .await?
        .bytes()
        .await?;
    let (their_points, agree) = agreement(&s, &answer)?;
    println!(
        "90-day chart: {} points, step {} h; prometheus {}",
        s.points.len(),
        s.step / HOUR,
        params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    );
    println!(
        "prometheus answered {their_points} points; {agree} of headroom's {} have the same \
         fewest spares",
        s.points.len()
    );

    let (mut inproc, mut http, mut prom) = (Side::default(), Side::default(), Side::default());
    for i in 0..WARMUP + iterations {
        let timed = i >= WARMUP;
        // Each side goes first, second and third in turn.
        for side in (0..3).map(|k| (k + i) % 3) {
            match side {
                0 => {
                    let started = Instant::now();
                    let s =
                        series::series(&ctx, &caller, FLEET, chart_from, chart_to, None).await?;
                    let a = series::annotations(&ctx, &caller, FLEET, chart_from, chart_to).await?;
                    let queried = Instant::now();
                    let html = headroom_chart(&s, Some(Range::D90), &a, s.to).into_string();
                    let rendered = Instant::now();
                    if timed {
                        inproc.query.push(us(queried - started));
                        inproc.render.push(us(rendered - queried));
                        inproc.total.push(us(rendered - started));
                        inproc.bytes = html.len();
                    }
                }
                1 => {
                    let started = Instant::now();
                    let res = client
                        .get(&headroom_url)
                        .header("Cookie", &cookie)
                        .header("HX-Request", "true")
                        .send()
                        .await?;
                    anyhow::ensure!(res.status() == 200, "headroom answered {}", res.status());
                    let body = res.bytes().await?;
                    let elapsed = started.elapsed();
                    anyhow::ensure!(
                        body.windows(4).any(|w| w == b"<svg"),
                        "headroom's chart partial has no chart"
                    );
                    if timed {
                        http.total.push(us(elapsed));
                        http.bytes = body.len();
                    }
                }
                _ => {
                    let started = Instant::now();
                    let res = client.get(&prometheus_url).query(&params).send().await?;
                    anyhow::ensure!(res.status() == 200, "prometheus answered {}", res.status());
                    let body = res.bytes().await?;
                    if timed {
                        prom.total.push(us(started.elapsed()));
                        prom.bytes = body.len();
                    }
                }
            }
        }
    }
    let (_, blocks_after) = tsdb_size(&tsdb);
    drop(prometheus);

    println!();
    println!(
        "{iterations} reads each, interleaved, after {WARMUP} untimed (figures from a shared \
         machine are noisy):"
    );
    println!(
        "  {:<22} {:>12} {:>12} {:>12} {:>12}  includes",
        "", "median", "p90", "p99", "answer"
    );
    let ours = inproc.row(
        "headroom, in process",
        "SQL over the rollups + SVG render, no HTTP",
    );
    let ours_http = http.row(
        "headroom, HTTP",
        "session, SQL, chart partial HTML, loopback HTTP",
    );
    let theirs = prom.row(
        "prometheus, HTTP",
        "PromQL over raw 15 s samples, JSON, loopback HTTP",
    );
    println!(
        "  headroom in process: query median {:.0} µs, render median {:.0} µs",
        percentile(&mut inproc.query, 0.5),
        percentile(&mut inproc.render, 0.5)
    );
    println!(
        "  prometheus blocks: {blocks} before the reads, {blocks_after} after{}",
        if blocks_after == blocks {
            " (no compaction meanwhile)"
        } else {
            " (it compacted meanwhile)"
        }
    );
    println!();

    let mut goals = goals::Goals::default();
    goals.check(
        &format!(
            "prometheus's min_over_time agrees with headroom's fewest spares at every point \
             ({agree} of {})",
            s.points.len()
        ),
        agree == s.points.len() && their_points == s.points.len(),
    );
    for (what, median) in [("in process", ours), ("over HTTP", ours_http)] {
        let ratio = median / theirs;
        goals.check(
            &format!(
                "90-day chart {what} at most 1.0× prometheus's query_range (median {ratio:.2}×)"
            ),
            ratio <= 1.0,
        );
    }
    goals.exit_if_missed();
    Ok(())
}
