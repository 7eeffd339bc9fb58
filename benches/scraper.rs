//! The scraper at scale: 1,000 fleets of 3 fake yubaba nodes each (3,000 HTTP listeners on
//! loopback, answering `/raft/status`, `/node`, `/node/usage` and `/workloads`: two nodes carry
//! 20 sized workloads each, the third is an empty spare, so every tick reads each member's
//! three documents and judges absorption headroom; every other fleet's first endpoint is a
//! follower, so half the ticks follow the leader hop), scraped every 15 s by the real
//! `scraper::run_until_stopped`, each tick recorded by the real `record` into a temp SQLite
//! file. Prints the scraper's CPU time per minute, ticks, missed ticks, failures and the p99
//! scrape lag (goal: under a quarter of a core — 15 s of CPU a minute — and no missed tick).
//!
//! The fake nodes run on a thread of their own (a current-thread runtime); their CPU time is
//! read from that thread's `/proc/thread-self/stat` and subtracted from the process's
//! (`/proc/self/stat`), so the figure is the scraper's, the recorder's and SQLite's.
//!
//! `cargo bench --bench scraper`; `HEADROOM_BENCH_SECONDS=20` for a quick run (default 120),
//! `HEADROOM_BENCH_FLEETS` to change the fleet count.

#[path = "support/goals.rs"]
mod goals;

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::domain::fleet::FleetInput;
use headroom::domain::{Caller, SystemClock};
use headroom::scraper::ScrapeStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NODES: usize = 3;
/// Workloads on each busy node (the absorption goal's fleet carries 20 a member).
const WORKLOADS: usize = 20;

/// What one fake node answers, by path.
struct NodeBodies {
    status: String,
    node: String,
    usage: String,
    workloads: String,
}

/// Node `id`'s `/node`, `/node/usage` and `/workloads`: nodes 1 and 2 carry `WORKLOADS`
/// workloads of 200 MiB and 100 millicores on 7807 MiB and 4000 millicores; node 3 is empty.
fn load_bodies(id: usize) -> (String, String, String) {
    let carried = if id == NODES { 0 } else { WORKLOADS };
    let node = format!(
        "{{\"host.name\": \"bench-{id}\", \"yah.allocatable.memory_mb\": 7807, \
         \"yah.allocatable.cpu_millis\": 4000}}"
    );
    let usage = format!(
        "{{\"yah.workloads.count\": {carried}, \"yah.committed.memory_mb\": {}, \
         \"yah.committed.cpu_millis\": {}}}",
        carried * 200,
        carried * 100
    );
    let list: Vec<String> = (0..carried)
        .map(|n| format!("{{\"ident\": \"w-{id}-{n}\", \"memory_mb\": 200, \"cpu_millis\": 100}}"))
        .collect();
    let workloads = format!("{{\"workloads\": [{}]}}", list.join(", "));
    (node, usage, workloads)
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User plus system CPU seconds in a `/proc/…/stat` file (fields 14 and 15, clock ticks;
/// the command name in parentheses may hold spaces, so fields are counted after its `)`).
fn cpu_seconds(stat_path: &str) -> f64 {
    let text = std::fs::read_to_string(stat_path).expect("read stat");
    let after = &text[text.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // Fields after the name start at 3 (state); utime is 14, stime 15.
    let utime: f64 = fields[14 - 3].parse().expect("utime");
    let stime: f64 = fields[15 - 3].parse().expect("stime");
    // USER_HZ is 100 on Linux for every architecture that matters here.
    (utime + stime) / 100.0
}

/// The status body of node `id` (1-based) of a fleet whose nodes listen on `ports`; node 1
/// leads and carries the headroom section.
fn status_body(id: usize, ports: &[u16]) -> String {
    let nodes: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("\"{}\": {{\"addr\": \"127.0.0.1:{p}\"}}", i + 1))
        .collect();
    let (state, headroom) = if id == 1 {
        ("Leader", "{\"spare\": 3, \"required\": 2}")
    } else {
        ("Follower", "null")
    };
    format!(
        "{{\"node_id\": {id}, \"state\": \"{state}\", \"current_leader\": 1, \"current_term\": 3, \
         \"last_log_index\": 57, \"membership_config\": {{\"membership\": {{\"configs\": [[1, 2, 3]], \
         \"nodes\": {{{}}}}}}}, \"headroom\": {headroom}}}",
        nodes.join(", ")
    )
}

/// Answers HTTP/1.1 keep-alive requests on one connection from `bodies` by path (the query
/// ignored) and 404 otherwise.
async fn serve(mut stream: TcpStream, bodies: Arc<NodeBodies>) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 1024];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 16 * 1024 {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let target = head.split(' ').nth(1).unwrap_or("");
        let path = target.split('?').next().unwrap_or("");
        let body = match path {
            "/raft/status" => Some(&bodies.status),
            "/node" => Some(&bodies.node),
            "/node/usage" => Some(&bodies.usage),
            "/workloads" => Some(&bodies.workloads),
            _ => None,
        };
        let response = match body {
            Some(body) => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
                body.len(),
                body
            ),
            None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned(),
        };
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
        if head.to_ascii_lowercase().contains("connection: close") {
            return;
        }
    }
}

/// Binds every fleet's nodes and serves them on this (current) thread's runtime until
/// `stop`; returns each fleet's ports and, at the end, the thread's own CPU seconds.
fn start_fake_nodes(
    fleets: usize,
) -> (
    Vec<Vec<u16>>,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<f64>,
) {
    let (ports_tx, ports_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("fake runtime");
        rt.block_on(async move {
            let mut all = Vec::new();
            let mut listeners = Vec::new();
            for _ in 0..fleets {
                let mut ports = Vec::new();
                for _ in 0..NODES {
                    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                    ports.push(l.local_addr().unwrap().port());
                    listeners.push(l);
                }
                all.push(ports);
            }
            for (i, l) in listeners.into_iter().enumerate() {
                let ports = &all[i / NODES];
                let id = i % NODES + 1;
                let (node, usage, workloads) = load_bodies(id);
                let bodies = Arc::new(NodeBodies {
                    status: status_body(id, ports),
                    node,
                    usage,
                    workloads,
                });
                tokio::spawn(async move {
                    while let Ok((stream, _)) = l.accept().await {
                        tokio::spawn(serve(stream, bodies.clone()));
                    }
                });
            }
            ports_tx.send(all).expect("ports");
            let _ = stop_rx.await;
        });
        drop(rt);
        cpu_seconds("/proc/thread-self/stat")
    });
    let ports = ports_rx.recv().expect("fake nodes started");
    (ports, stop_tx, handle)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fleets: usize = env_or("HEADROOM_BENCH_FLEETS", 1_000);
    let seconds: u64 = env_or("HEADROOM_BENCH_SECONDS", 120);
    // Each fleet holds a few sockets on both sides: 3,000 listeners plus connections.
    let wanted = (fleets * NODES * 4 + 1024) as u64;
    match rlimit::increase_nofile_limit(wanted) {
        Ok(got) if got < wanted => eprintln!("open-file limit only {got} (wanted {wanted})"),
        Ok(_) => {}
        Err(e) => eprintln!("cannot raise the open-file limit: {e}"),
    }
    let (ports, stop_nodes, nodes_thread) = start_fake_nodes(fleets);

    let dir = tempfile::tempdir().expect("temp dir");
    let settings = headroom::config::Settings {
        database_url: format!("sqlite:{}", dir.path().join("bench.db").display()),
        render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
        simulated_provider: true,
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url)
        .await
        .expect("database");
    let ctx = headroom::context::Ctx::build(settings, pool, Arc::new(SystemClock)).expect("ctx");
    // What `headroom demo` has before its machine config: the default template and the
    // simulated cloud's catalogue it is checked against.
    headroom::machine_setup::templates::ensure_default(&ctx)
        .await
        .expect("default template");
    headroom::sim::demo::fill_simulated_catalogue(&ctx)
        .await
        .expect("simulated catalogue");
    let config = headroom::domain::machine::MachineInput {
        name: "spare-fsn1".into(),
        provider: "simulated".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        yubaba_channel: "stable".into(),
        yubaba_url: "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        // Declared, so absorption also answers how many restore machines would be needed.
        allocatable: headroom::domain::machine::AllocatableInput {
            memory_mb: Some(serde_json::json!(3584)),
            cpu_millis: Some(serde_json::json!(2000)),
        },
        ..Default::default()
    };
    headroom::machine_setup::configs::create(&ctx, &Caller::system(), &config)
        .await
        .expect("machine config");
    for (i, p) in ports.iter().enumerate() {
        let mut endpoints: Vec<String> =
            p.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        if i % 2 == 1 {
            // A follower first: the scraper reads it, then follows `current_leader`.
            endpoints.swap(0, 1);
        }
        let input = FleetInput {
            name: format!("fleet-{i:04}"),
            endpoints,
            restore_machine_config: "spare-fsn1".into(),
            ..FleetInput::default()
        };
        headroom::fleets::create(&ctx, &Caller::system(), &input)
            .await
            .expect("create fleet");
    }
    println!("{fleets} fleets × {NODES} fake nodes on loopback; scraping for {seconds} s");

    let stats = Arc::new(ScrapeStats::default());
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let cpu_before = cpu_seconds("/proc/self/stat");
    let started = Instant::now();
    let task = tokio::spawn(headroom::scraper::run_until_stopped(
        ctx.clone(),
        stats.clone(),
        shutdown,
    ));
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(60), task).await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_process = cpu_seconds("/proc/self/stat") - cpu_before;
    let _ = stop_nodes.send(());
    let cpu_nodes = nodes_thread.join().expect("fake nodes thread");
    // The fake nodes did nothing before the scraper started but bind, so their whole
    // thread's time is scrape traffic (binding is a few ms).
    let cpu_scraper = (cpu_process - cpu_nodes).max(0.0);
    let per_minute = cpu_scraper / elapsed * 60.0;
    let samples: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM fleet_samples")
        .fetch_one(&ctx.pool)
        .await
        .expect("count samples");
    // Every ok sample read its members' three documents and judged absorption.
    // Judged from the workloads' sizes, not the committed-total fallback (the cheaper path a
    // broken `/workloads` read would fall back to without failing a sample).
    let (ok_samples, judged): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(ok), 0),
                COALESCE(SUM(json_extract(absorption, '$.basis') = 'workloads'), 0)
         FROM fleet_samples",
    )
    .fetch_one(&ctx.pool)
    .await
    .expect("count judged samples");
    println!("elapsed {elapsed:.1} s");
    println!(
        "CPU: scraper+record {cpu_scraper:.2} s ({per_minute:.2} s per minute = {:.3} of a core; goal < 0.25), fake nodes {cpu_nodes:.2} s",
        per_minute / 60.0
    );
    println!(
        "ticks {}, missed ticks {} (goal 0), failures {}, samples stored {samples}",
        stats.ticks(),
        stats.missed_ticks(),
        stats.failures()
    );
    println!(
        "scrape lag p50 {} ms, p99 {} ms",
        stats.lag_quantile_ms(0.5).unwrap_or(0),
        stats.lag_quantile_ms(0.99).unwrap_or(0)
    );
    let mut goals = goals::Goals::default();
    let cores = per_minute / 60.0;
    goals.check(
        &format!("scraper under 0.25 of a core ({cores:.3})"),
        cores < 0.25,
    );
    goals.check(
        &format!("no missed tick ({})", stats.missed_ticks()),
        stats.missed_ticks() == 0,
    );
    goals.check(
        &format!(
            "absorption judged from workload sizes on every ok sample ({judged} of {ok_samples})"
        ),
        ok_samples > 0 && judged == ok_samples,
    );
    goals.exit_if_missed();
}
