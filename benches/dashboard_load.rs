//! The dashboard under load against nginx serving the very same bytes: the real console on
//! loopback over a SQLite file holding 20 healthy fleets, each a simulated yubaba fleet that
//! the real scrape loops read every 5 s throughout, with 90 days of history, and one
//! signed-in admin session. The page `/` is fetched once and handed to nginx (Debian's
//! package, started here on loopback with 2 workers); then wrk (2 threads,
//! `HEADROOM_BENCH_CONNECTIONS` keep-alive connections, default 32, for
//! `HEADROOM_BENCH_SECONDS`, default 10) loads headroom's `/` and nginx's, one after the other.
//! Then every fleet is deleted and both are loaded again with the empty board's bytes.
//! Goals: 20 fleets at least 0.5× nginx's rate, none at least 0.7×, no error answers.
//! Without nginx or wrk it says how to install them and exits 0.
//!
//! The history has the shape retention leaves (raw samples every 15 s for the last 48 h,
//! one a minute back to 14 days, one an hour back to 90 days), each written through the real
//! `db::fleet_samples::insert` with its rollups, and the newest through the real `record`.
//!
//! `cargo bench --bench dashboard_load`

#[path = "support/goals.rs"]
mod goals;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/session.rs"]
mod session;

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::domain::capacity::{Member, Observation, Sample, Source};
use headroom::domain::{Caller, SystemClock, UnixMillis};
use headroom::sim::yubaba::SimFleetOptions;

const FLEETS: usize = 20;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A sample whose numbers wander like a real fleet's (a short dip now and then).
fn sample(at: UnixMillis, fleet: usize) -> Sample {
    let phase = (at / (15 * 1000)) as u64 + fleet as u64 * 7919;
    let required = 3;
    let spare = if phase % 997 < 20 {
        1
    } else {
        3 + (phase % 3) as u32
    };
    Sample {
        at,
        latency_ms: 5 + phase % 40,
        outcome: Ok(Observation {
            absorption: None,
            source: Source::Native,
            spare,
            required,
            leader_id: Some(1),
            leader_url: Some("http://127.0.0.1:9".into()),
            term: Some(7),
            members: (1..=3)
                .map(|id| Member::listed(id, format!("127.0.0.1:{}", 7440 + id), true))
                .collect(),
            evidence: serde_json::json!({"headroom": {"spare": spare, "required": required}}),
        }),
    }
}

/// Sample times from 90 days ago to just before `now`, thinning with age like retention.
fn history_times(now: UnixMillis) -> Vec<UnixMillis> {
    let mut at = now - 90 * DAY;
    let mut out = Vec::new();
    while at < now - 15_000 {
        out.push(at);
        let age = now - at;
        at += if age > 14 * DAY {
            HOUR
        } else if age > 2 * DAY {
            MINUTE
        } else {
            15_000
        };
    }
    out
}

async fn fill_history(ctx: &headroom::context::Ctx, names: &[String]) -> usize {
    let now = ctx.now();
    let times = history_times(now);
    let mut written = 0;
    for (i, name) in names.iter().enumerate() {
        let mut conn = ctx.pool.acquire().await.expect("connection");
        let fleet_id = headroom::db::fleet_samples::fleet_ref(&mut conn, name)
            .await
            .expect("fleet ref")
            .expect("fleet exists")
            .id;
        drop(conn);
        for chunk in times.chunks(5_000) {
            let mut tx = headroom::db::begin_write(&ctx.pool).await.expect("tx");
            for at in chunk {
                headroom::db::fleet_samples::insert(&mut tx, fleet_id, &sample(*at, i))
                    .await
                    .expect("insert sample");
            }
            tx.commit().await.expect("commit");
            written += chunk.len();
        }
        // The newest through the one writer of fleet status, as a scrape would.
        headroom::capacity::record::record(ctx, name, &sample(now, i))
            .await
            .expect("record");
        written += 1;
    }
    written
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Loads headroom's `/` and nginx's copy of its bytes, prints both and checks the ratio.
async fn compare(
    goals: &mut goals::Goals,
    what: &str,
    goal: f64,
    base: &str,
    cookie: &str,
    dir: &std::path::Path,
) {
    let client = reqwest::Client::new();
    let page = client
        .get(format!("{base}/"))
        .header("Cookie", cookie)
        .send()
        .await
        .expect("dashboard");
    assert_eq!(page.status(), 200);
    let content_type = page.headers()["content-type"]
        .to_str()
        .expect("content type")
        .to_owned();
    let bytes = page.bytes().await.expect("page bytes");
    let nginx = peers::Nginx::serve(dir, &bytes, &content_type, 2);
    let connections: usize = env_or("HEADROOM_BENCH_CONNECTIONS", 32);
    let seconds: u64 = env_or("HEADROOM_BENCH_SECONDS", 10);
    let cookie_header = vec![format!("Cookie: {cookie}")];
    // wrk is a blocking process: run it off the runtime that serves the simulated fleets.
    let (ours, theirs) = {
        let base = base.to_owned();
        let nginx_url = format!("http://127.0.0.1:{}/", nginx.port);
        tokio::task::spawn_blocking(move || {
            let ours = peers::wrk(&format!("{base}/"), &cookie_header, connections, seconds);
            let theirs = peers::wrk(&nginx_url, &cookie_header, connections, seconds);
            (ours, theirs)
        })
        .await
        .expect("wrk runs")
    };
    drop(nginx);
    println!(
        "{what}: a {:.1} KiB page, {connections} connections, {seconds} s each",
        bytes.len() as f64 / 1024.0
    );
    for (who, r) in [("headroom /", &ours), ("nginx, same bytes", &theirs)] {
        println!(
            "  {who:<18} {:>8.0} req/s  p50 {:>9}  p99 {:>9}  ({} requests, {} errors)",
            r.rps,
            ms(r.p50),
            ms(r.p99),
            r.requests,
            r.errors
        );
    }
    let ratio = ours.rps / theirs.rps;
    println!("  headroom / nginx = {ratio:.2}×");
    goals.check(
        &format!("{what}: at least {goal:.2}× nginx's rate ({ratio:.2}×)"),
        ratio >= goal,
    );
    goals.check(
        &format!("{what}: no error answers ({} from headroom)", ours.errors),
        ours.errors == 0,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    peers::require(&[("nginx", "nginx-light"), ("wrk", "wrk")]);
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = headroom::config::Settings {
        bind: "127.0.0.1:0".into(),
        database_url: format!("sqlite:{}", dir.path().join("bench.db").display()),
        render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
        simulated_provider: true,
        scrape_enabled: true,
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url)
        .await
        .expect("database");
    let app = headroom::startup::Application::bind(settings, pool, Arc::new(SystemClock))
        .await
        .expect("build");
    let port = app.port();
    let state = app.state().clone();
    let ctx = state.ctx.clone();
    headroom::sim::demo::seed_config(&state)
        .await
        .expect("machine config");
    // Healthy fleets that stay so: one spare each, no tenant arriving during the run.
    let options: Vec<SimFleetOptions> = (1..=FLEETS)
        .map(|i| SimFleetOptions {
            name: format!("fleet-{i:02}"),
            first_tenant_after: Duration::from_secs(365 * 24 * 3600),
            tenant_every: None,
            ..SimFleetOptions::default()
        })
        .collect();
    let fleets = headroom::sim::demo::start_fleets(&ctx, &options)
        .await
        .expect("simulated fleets");
    let names: Vec<String> = fleets.iter().map(|f| f.name().to_owned()).collect();
    let t = Instant::now();
    let written = fill_history(&ctx, &names).await;
    println!(
        "history: {FLEETS} fleets, 90 days, {written} samples (with rollups) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let cookie = session::admin_cookie(&ctx, "bench-admin").await;
    tokio::spawn(app.run_until_stopped());
    until_all_scraped_healthy(&ctx).await;

    let base = format!("http://127.0.0.1:{port}");
    let mut goals = goals::Goals::default();
    let nginx_dir = tempfile::tempdir().expect("nginx dir");
    compare(
        &mut goals,
        "20 fleets being scraped",
        0.5,
        &base,
        &cookie,
        nginx_dir.path(),
    )
    .await;
    for name in &names {
        headroom::fleets::delete(&ctx, &Caller::system(), name)
            .await
            .expect("delete fleet");
    }
    compare(
        &mut goals,
        "no fleets",
        0.7,
        &base,
        &cookie,
        nginx_dir.path(),
    )
    .await;
    drop(fleets);
    goals.exit_if_missed();
}

/// Waits (a minute at most) until the scrape loops have read every fleet as healthy.
async fn until_all_scraped_healthy(ctx: &headroom::context::Ctx) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let board = headroom::capacity::board::board(ctx, &Caller::system())
            .await
            .expect("board");
        let healthy = board
            .iter()
            .filter(|f| f.status == headroom::domain::capacity::Health::Healthy)
            .count();
        if healthy == FLEETS {
            println!("all {FLEETS} fleets scraped and healthy");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {healthy} of {FLEETS} fleets healthy after a minute"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
