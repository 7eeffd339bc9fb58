//! Failover (issue 19, item 4): two headroom processes (`serve`, the binary under test) on one
//! database — PostgreSQL under `HEADROOM_TEST_STORE=postgres`, else one SQLite file — with 20
//! fleets scraped, 30 approved requests executing against the fake Hetzner, webhooks sent to a
//! receiver on loopback and a client alternating between the two. One of them, at random, is
//! killed with SIGKILL ten times at random moments and started again after a random pause
//! (sometimes long enough for the other to take its work over by lease, sometimes short enough
//! for its own next boot to). Afterwards: one server per planned machine and one create each,
//! every request finished, no fleet without a sample for longer than two scrape intervals,
//! every webhook delivered (or pending, when its claim is held by a killed process) and none
//! twice but for a kill between its answer and its recording, and the audit chain verifies.
//! Figures are printed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom::auth::Caller;
use headroom::domain::fleet::{FleetInput, SCRAPE_INTERVAL_SECS_MIN};
use headroom::domain::{ProvisionState, Role};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::crash::{finished, prepare, wait_until_serving, Rng};
use crate::fake_hetzner::FakeHetzner;
use crate::runner::{caller, hetzner_config};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// The binary the two instances run: the test build, or `HEADROOM_FAILOVER_BIN` (a release
/// build, say: `cargo build --release` and point it at `target/release/headroom`).
fn instance_binary() -> String {
    std::env::var("HEADROOM_FAILOVER_BIN").unwrap_or_else(|_| BIN.to_owned())
}
const FLEETS: usize = 20;
const KILLS: usize = 10;
const NAMES: [&str; 2] = ["node-a", "node-b"];
/// The instances' lease: short, so a dead one's work moves within seconds.
const LEASE_SECONDS: u64 = 3;

/// One of the two instances: its process while it runs and the port it serves on.
struct Instance {
    name: &'static str,
    child: Option<Child>,
    port: Option<u16>,
    lives: usize,
}

/// Where the instances live and what they talk to.
struct World<'a> {
    dir: &'a Path,
    db: &'a str,
    fake: &'a FakeHetzner,
    webhook: String,
}

impl World<'_> {
    /// Starts `instance` again and waits until it serves.
    async fn start(&self, instance: &mut Instance) {
        let log_path = self
            .dir
            .join(format!("{}-{}.log", instance.name, instance.lives));
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(instance_binary())
            .args(["--database-url", self.db, "--log-format", "json", "serve"])
            .args(["--bind", "127.0.0.1:0"])
            .env("HEADROOM_INSTANCE_NAME", instance.name)
            .env("HEADROOM_LEASE_SECONDS", LEASE_SECONDS.to_string())
            .env("HEADROOM_WORKERS", "1")
            .env("HEADROOM_HETZNER_API_URL", self.fake.uri())
            .env("HETZNER_API_TOKEN", self.fake.token())
            .env("HEADROOM_RUNNER_POLL_MS", "200")
            // Each request's machines boot for about 3 s (four polls from 200 ms, doubling):
            // the two instances are still executing when the last kill lands.
            .env("HEADROOM_RUNNER_ACTION_POLL_MS", "200")
            .env("HEADROOM_FOLLOW_JOINS", "false")
            .env("HEADROOM_WEBHOOK_URL", &self.webhook)
            .env("HEADROOM_WEBHOOK_SECRET", "failover-webhook-secret")
            // The receiver is on loopback, which webhooks may reach only when allowed.
            .env("HEADROOM_OUTBOUND_ALLOW", "127.0.0.1")
            .env_remove("HETZNER_API_TOKEN_FILE")
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        instance.child = Some(child);
        instance.lives += 1;
        instance.port = Some(wait_until_serving(&log_path).await);
    }
}

/// Ports of the instances up now, for the client.
type Up = Arc<Mutex<[Option<u16>; 2]>>;

/// A client alternating between whichever instances are up, with one token, until stopped:
/// returns (requests answered 200, requests that failed).
async fn client(up: Up, token: String, stop: Arc<std::sync::atomic::AtomicBool>) -> (u64, u64) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (mut ok, mut failed) = (0, 0);
    let mut turn = 0usize;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        turn += 1;
        let port = {
            let up = up.lock().unwrap();
            up[turn % 2].or(up[(turn + 1) % 2])
        };
        if let Some(port) = port {
            let res = http
                .get(format!("http://127.0.0.1:{port}/api/v1/fleets"))
                .bearer_auth(&token)
                .send()
                .await;
            match res {
                Ok(r) if r.status() == 200 => ok += 1,
                _ => failed += 1,
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (ok, failed)
}

#[tokio::test]
async fn two_instances_with_one_killed_ten_times_lose_nothing_and_create_nothing_twice() {
    let started = Instant::now();
    let fake = FakeHetzner::start().await;
    // Four polls per create action (see HEADROOM_RUNNER_ACTION_POLL_MS above).
    fake.set_action_polls(4);
    let dir = tempfile::tempdir().unwrap();
    let db = crate::helpers::store::database_url(dir.path()).await;
    let (ctx, ids) = prepare(&db, &fake).await;
    let interval = Duration::from_secs(u64::from(SCRAPE_INTERVAL_SECS_MIN));
    let mut nodes = Vec::new();
    for i in 0..FLEETS {
        let n = crate::scrape_supervisor::node().await;
        let input = FleetInput {
            name: format!("fleet-{i:02}"),
            endpoints: vec![n.uri()],
            restore_machine_config: hetzner_config().name,
            scrape_interval_secs: Some(serde_json::json!(SCRAPE_INTERVAL_SECS_MIN)),
            scrape_timeout_secs: Some(serde_json::json!(4)),
            ..FleetInput::default()
        };
        headroom::fleets::create(&ctx, &Caller::system(), &input)
            .await
            .unwrap();
        nodes.push(n);
    }
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&receiver)
        .await;
    let token = headroom::auth::tokens::create_token(
        &ctx,
        &Caller::system(),
        &headroom::auth::tokens::NewTokenInput {
            username: "olga".into(),
            label: "failover".into(),
        },
    )
    .await
    .unwrap()
    .0;
    let world = World {
        dir: dir.path(),
        db: &db,
        fake: &fake,
        webhook: format!("{}/hook", receiver.uri()),
    };
    let prepared = started.elapsed();

    let mut instances = NAMES.map(|name| Instance {
        name,
        child: None,
        port: None,
        lives: 0,
    });
    let up: Up = Arc::default();
    for (i, instance) in instances.iter_mut().enumerate() {
        world.start(instance).await;
        up.lock().unwrap()[i] = instance.port;
    }
    let stop_client = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = tokio::spawn(client(up.clone(), token, stop_client.clone()));

    let seed = std::env::var("HEADROOM_FAILOVER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xfa11_0e55_u64);
    let mut rng = Rng(seed);
    let mut kills = Vec::new();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.between(1_000, 3_500))).await;
        let victim = usize::try_from(rng.between(0, 2)).unwrap();
        up.lock().unwrap()[victim] = None;
        let instance = &mut instances[victim];
        let mut child = instance.child.take().unwrap();
        // `Child::kill` is SIGKILL on Unix: no shutdown, no lease given up.
        child.kill().unwrap();
        child.wait().unwrap();
        let down = Duration::from_millis(rng.between(0, 6_000));
        let done = finished(&ctx, &ids).await;
        kills.push((instance.name, started.elapsed() - prepared, down, done));
        tokio::time::sleep(down).await;
        world.start(instance).await;
        up.lock().unwrap()[victim] = instance.port;
    }
    let during = kills.iter().filter(|k| k.3 < ids.len()).count();
    assert!(
        during >= KILLS / 2,
        "only {during} of {KILLS} kills hit running executions: make the work longer"
    );
    // Both run until every request is finished (a hang guard far beyond the work).
    let deadline = Instant::now() + Duration::from_secs(120);
    while finished(&ctx, &ids).await < ids.len() {
        assert!(Instant::now() < deadline, "requests never finished");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // One more interval of scraping, so the end of the record is covered too.
    tokio::time::sleep(interval).await;
    stop_client.store(true, std::sync::atomic::Ordering::SeqCst);
    let (answered, failed) = client.await.unwrap();
    let scraped_until = ctx.now();
    for instance in &mut instances {
        let mut child = instance.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let ran = started.elapsed() - prepared;

    // Provisioning: one server per planned machine, one create each, every request done.
    let servers = fake.servers();
    let mut planned = 0;
    for id in &ids {
        let d = headroom::provisioning::requests::get(&ctx, &caller("abe", Role::Approver), *id)
            .await
            .unwrap();
        assert_eq!(
            d.provision.state,
            ProvisionState::Succeeded,
            "request {id}: {}",
            d.provision.state_reason
        );
        for m in &d.machines {
            planned += 1;
            let matching: Vec<_> = servers.iter().filter(|s| s.name == m.name).collect();
            assert_eq!(matching.len(), 1, "{}: {matching:?}", m.name);
            assert_eq!(m.server_id, Some(matching[0].id), "{}", m.name);
        }
    }
    assert_eq!(servers.len(), planned, "no server beyond the plan");
    assert_eq!(
        fake.creates().len(),
        planned,
        "exactly one create per machine"
    );

    // Scraping: no fleet went longer than two intervals without a sample, from its first
    // sample to the end.
    let limit = i64::try_from(2 * interval.as_millis()).unwrap();
    let mut gaps = Vec::new();
    for i in 0..FLEETS {
        let times: Vec<i64> = sqlx::query_scalar(
            "SELECT s.at FROM fleet_samples s JOIN fleets f ON f.id = s.fleet_id
             WHERE f.name = $1 ORDER BY s.at",
        )
        .bind(format!("fleet-{i:02}"))
        .fetch_all(&ctx.pool)
        .await
        .unwrap();
        assert!(times.len() > 3, "fleet-{i:02}: {times:?}");
        let mut ends = times.clone();
        ends.push(scraped_until);
        let longest = ends.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        gaps.push(longest);
        assert!(
            longest <= limit,
            "fleet-{i:02}: {longest} ms without a sample (limit {limit}): {times:?}"
        );
    }

    // Webhooks: at least once each, and not twice unless a kill landed between the
    // receiver's answer and its recording (then the delivery id lets the receiver drop it).
    let mut deliveries: BTreeMap<i64, usize> = BTreeMap::new();
    for r in receiver.received_requests().await.unwrap() {
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        *deliveries
            .entry(body["delivery_id"].as_i64().unwrap())
            .or_default() += 1;
    }
    // A delivery claimed by an instance killed before sending waits out its claim (60 s):
    // received or still pending, every request's `provision.finished` is there.
    let pending: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'")
            .fetch_one(&ctx.pool)
            .await
            .unwrap();
    assert!(
        deliveries.len() + usize::try_from(pending).unwrap() >= ids.len(),
        "{} deliveries received and {pending} pending for {} requests",
        deliveries.len(),
        ids.len()
    );
    let twice = deliveries.values().filter(|n| **n > 1).count();
    assert!(twice <= KILLS, "{twice} deliveries received more than once");

    // The audit chain is one chain.
    let verify = Command::new(BIN)
        .args(["--database-url", &db, "audit", "verify"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    println!(
        "failover on {}, instances {}: seed {seed:#x}; {KILLS} kills (instance, at, down for, requests finished): {kills:?}",
        if crate::helpers::store::on_postgres() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        instance_binary()
    );
    println!(
        "{} requests, {planned} machines, {} creates, {} servers; {FLEETS} fleets, longest \
         gap without a sample {} ms (limit {limit}), per fleet {gaps:?}; {} deliveries \
         received ({twice} twice), {pending} pending; client {answered} answered, {failed} \
         failed; ran {ran:?} after {prepared:?} of set-up",
        ids.len(),
        fake.creates().len(),
        servers.len(),
        gaps.iter().max().unwrap(),
        deliveries.len(),
    );
    // A request sent as its instance was killed may fail; nothing else may.
    assert!(failed <= KILLS as u64, "{failed} client requests failed");
}
