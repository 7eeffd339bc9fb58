//! The real binary, killed with SIGKILL at 20 moments while it provisions against the fake
//! Hetzner and restarted each time: in the end every planned machine has exactly one server,
//! every request is finished, and the audit chain verifies. Most kills land at random; every
//! fifth lands while a create is held at the fake (its server made, its answer not yet sent),
//! so the restart must adopt that server through the label rather than create it again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::auth::Caller;
use headroom::context::Ctx;
use headroom::domain::machine::ProviderKind;
use headroom::domain::{Role, SystemClock};
use headroom::provisioning::requests;

use crate::fake_hetzner::{FakeHetzner, Fault, Route};
use crate::runner::{approved, caller, fleet, hetzner_config};

const BIN: &str = env!("CARGO_BIN_EXE_headroom");
/// Requests filed before the first start, and machines per request.
const REQUESTS: i64 = 30;
const MACHINES: i64 = 3;
const KILLS: usize = 20;
/// Every `HELD`-th life (from the third) is killed while a create is held at the fake.
const HELD: usize = 5;

/// A small seeded generator (xorshift64*), so a failing run can be replayed from its seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A whole number from `lo` to `hi - 1`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// A context on database `db` without a running server (as a later `serve` finds it): the
/// real clock (the binary judges expiry by it), Hetzner at `fake`, the default template and
/// the fake's catalogue.
pub(crate) async fn offline_ctx(db: &str, fake: &FakeHetzner) -> Ctx {
    let pool = headroom::db::connect(db).await.expect("database");
    let settings = headroom::config::Settings {
        render_worker: Some(BIN.into()),
        // The first renders start cold workers of the unoptimised binary, beside other tests.
        render_timeout: Duration::from_secs(2),
        // The config's tarball is never downloaded here: its pin is left unchecked.
        pin_check_on_request: false,
        plan_checks_blocking: crate::helpers::no_blocking_checks(),
        ..headroom::config::Settings::default()
    };
    let mut ctx = Ctx::build(settings, pool, Arc::new(SystemClock)).expect("context");
    let client = headroom::provider::hetzner::Hetzner::new(&fake.uri(), fake.token().into());
    ctx.providers = ctx
        .providers
        .clone()
        .with(ProviderKind::Hetzner, Arc::new(client));
    headroom::machine_setup::templates::ensure_default(&ctx)
        .await
        .expect("default template");
    headroom::machine_setup::catalogue::refresh(&ctx, &Caller::system(), ProviderKind::Hetzner)
        .await
        .expect("catalogue");
    ctx
}

/// The database prepared through the operations, as a person would have left it: users, a
/// Hetzner config (catalogue from the fake), a fleet, and `REQUESTS` approved requests.
pub(crate) async fn prepare(db: &str, fake: &FakeHetzner) -> (Ctx, Vec<i64>) {
    let ctx = offline_ctx(db, fake).await;
    headroom::machine_setup::configs::create(&ctx, &Caller::system(), &hetzner_config())
        .await
        .expect("config");
    for (name, role) in [("olga", Role::Operator), ("abe", Role::Approver)] {
        let input = headroom::auth::users::NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: crate::helpers::PASSWORD.into(),
        };
        headroom::auth::users::create_user(&ctx, &Caller::system(), &input)
            .await
            .expect("user");
    }
    fleet(&ctx, "prod", &[]).await;
    let mut ids = Vec::new();
    for _ in 0..REQUESTS {
        ids.push(approved(&ctx, "prod", MACHINES).await);
    }
    (ctx, ids)
}

/// `headroom serve` on a free port, provisioning against `fake` with short runner waits.
pub(crate) fn start(dir: &Path, db: &str, fake: &FakeHetzner, life: usize) -> (Child, PathBuf) {
    let log_path = dir.join(format!("serve-{life}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(BIN)
        .args(["--database-url", db, "--log-format", "json", "serve"])
        .args(["--bind", "127.0.0.1:0"])
        .env("HEADROOM_WORKERS", "1")
        // Every life is one instance restarted (its port changes, its name does not): it
        // resumes its earlier boot's executions at once instead of waiting their leases out.
        .env("HEADROOM_INSTANCE_NAME", "crash-test")
        .env("HEADROOM_HETZNER_API_URL", fake.uri())
        .env("HETZNER_API_TOKEN", fake.token())
        .env("HEADROOM_RUNNER_POLL_MS", "50")
        .env("HEADROOM_RUNNER_ACTION_POLL_MS", "20")
        // No fleet answers here: the test pins the provider side, so a request ends when its
        // servers run rather than waiting for members that never come.
        .env("HEADROOM_FOLLOW_JOINS", "false")
        .env_remove("HETZNER_API_TOKEN_FILE")
        .env("RUST_LOG", "info")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    (child, log_path)
}

/// Waits until the process announced its port (it is serving and its runner started), and
/// returns that port. Waits up to 20 s: a debug build beside a loaded test run starts slowly.
pub(crate) async fn wait_until_serving(log_path: &Path) -> u16 {
    for _ in 0..800 {
        let text = std::fs::read_to_string(log_path).unwrap_or_default();
        let port = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find_map(|v| v["port"].as_u64());
        if let Some(port) = port {
            return u16::try_from(port).expect("a port fits in u16");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the server never announced its port: {}",
        std::fs::read_to_string(log_path).unwrap_or_default()
    );
}

/// How many of `ids` are finished.
pub(crate) async fn finished(ctx: &Ctx, ids: &[i64]) -> usize {
    let mut n = 0;
    for id in ids {
        let d = requests::get(ctx, &Caller::system(), *id).await.unwrap();
        if d.provision.state.is_terminal() {
            n += 1;
        }
    }
    n
}

#[tokio::test]
async fn the_binary_killed_at_twenty_random_moments_still_makes_exactly_one_server_per_machine() {
    let started = Instant::now();
    let fake = FakeHetzner::start().await;
    // Four polls per create action: execution outlasts the twenty lives, so every kill
    // interrupts it.
    fake.set_action_polls(4);
    let dir = tempfile::tempdir().unwrap();
    // SQLite, or a database of its own on PostgreSQL under HEADROOM_TEST_STORE=postgres.
    let db = crate::helpers::store::database_url(dir.path()).await;
    let (ctx, ids) = prepare(&db, &fake).await;

    let seed = std::env::var("HEADROOM_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026_u64);
    let mut rng = Rng(seed);
    let mut delays = Vec::new();
    let mut during_execution = 0;
    let mut held = 0;
    for life in 0..KILLS {
        let (mut child, log) = start(dir.path(), &db, &fake, life);
        wait_until_serving(&log).await;
        if life % HELD == 2 {
            kill_while_a_create_is_held(&fake, life).await;
            held += 1;
            delays.push(0);
        } else {
            let delay = rng.between(20, 400);
            delays.push(delay);
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        // `Child::kill` is SIGKILL on Unix: no shutdown, no flush, no goodbye.
        child.kill().unwrap();
        child.wait().unwrap();
        let done = finished(&ctx, &ids).await;
        if done < ids.len() {
            during_execution += 1;
        }
        println!(
            "life {life}: killed after {} ms (0: at a held create); {done}/{} requests \
             finished, {} servers",
            delays[life],
            ids.len(),
            fake.servers().len()
        );
    }
    println!("seed {seed:#x}, kill delays (ms) {delays:?}");
    assert!(
        during_execution >= KILLS - 3,
        "only {during_execution} of {KILLS} kills hit a running execution: make the work longer"
    );

    // The last life runs to the end.
    let (mut child, log) = start(dir.path(), &db, &fake, KILLS);
    wait_until_serving(&log).await;
    // A hang guard only, far beyond the few seconds the work takes.
    let deadline = Instant::now() + Duration::from_secs(180);
    while finished(&ctx, &ids).await < ids.len() {
        assert!(Instant::now() < deadline, "requests never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // Each held create's server was found through its label after the restart.
    let adopted = adopted_by_label(&ctx, &ids).await;
    println!("{adopted} servers adopted through their label, {held} creates held at a kill");
    assert!(
        adopted >= held,
        "{adopted} adoptions through the label for {held} kills between \"create sent\" and \
         \"answer stored\""
    );

    let servers = fake.servers();
    let mut planned = 0;
    for id in &ids {
        let d = requests::get(&ctx, &caller("abe", Role::Approver), *id)
            .await
            .unwrap();
        assert_eq!(
            d.provision.state,
            headroom::domain::ProvisionState::Succeeded,
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
    assert_eq!(planned, REQUESTS * MACHINES);
    assert_eq!(servers.len() as i64, planned, "no server beyond the plan");
    assert_eq!(
        fake.creates().len() as i64,
        planned,
        "exactly one create per machine: every interrupted create was adopted"
    );
    println!(
        "{} creates for {planned} machines; {} requests to the fake",
        fake.creates().len(),
        fake.requests().len()
    );

    let verify = Command::new(BIN)
        .args(["--database-url", &db, "audit", "verify"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "audit verify: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // Reported, not asserted: on a loaded machine the wall clock proves nothing.
    println!("took {:?}", started.elapsed());
}

/// Holds the next create at the fake (its server made, its answer not sent) and kills the
/// process once the fake has taken it: the kill lands between "create sent" and "answer
/// stored". The caller then kills the child.
async fn kill_while_a_create_is_held(fake: &FakeHetzner, life: usize) {
    // Far beyond the moment of the kill; short enough not to keep the fake busy afterwards.
    fake.push_fault(
        Route::CreateServer,
        Fault::CreateThenHang(Duration::from_secs(10)),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.queued_faults(Route::CreateServer) > 0 {
        assert!(
            Instant::now() < deadline,
            "life {life}: no create was sent to hold"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many machines of `ids` took over a server found through the provision label.
async fn adopted_by_label(ctx: &Ctx, ids: &[i64]) -> usize {
    let mut n = 0;
    for id in ids {
        let d = requests::get(ctx, &Caller::system(), *id).await.unwrap();
        n += d
            .events
            .iter()
            .filter(|e| {
                e.kind == "provider.answer"
                    && e.details["adopted"] == true
                    && e.message.ends_with("found by its provision label")
            })
            .count();
    }
    n
}
