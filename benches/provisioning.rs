//! Provisioning against the fake Hetzner under Hetzner's budget shape: 100 requests of 3
//! machines, approved through the operations while the runner runs, through the real Hetzner
//! client. Prints provider calls per created server (goal: at most 3, exactly one create
//! each), total creates, and the time from approval to the request's first provider call.
//!
//! `cargo bench --bench provisioning` (the bucket's capacity: `BENCH_CAPACITY`, by default 60
//! requests fewer than the run makes, refilling one request per second, so the last calls of
//! the run are paced by the 1 request/s budget). Exits non-zero when a goal is missed or the
//! budget never bound.

#[path = "../tests/api/fake_hetzner.rs"]
mod fake_hetzner;
#[path = "support/goals.rs"]
mod goals;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headroom::audit::Actor;
use headroom::auth::Caller;
use headroom::context::Ctx;
use headroom::domain::fleet::FleetInput;
use headroom::domain::machine::{MachineInput, ProviderKind};
use headroom::domain::{Role, SystemClock};
use headroom::provider::{
    BoxFuture, Catalogue, Created, MachineProvider, ProviderAction, ProviderError, Server,
    ServerSpec, PROVISION_LABEL,
};
use headroom::provisioning::{requests, runner, NewRequest};

use fake_hetzner::{FakeHetzner, FakeHetznerOptions};

const REQUESTS: usize = 100;
const MACHINES: i64 = 3;
/// The provider calls the run makes when every goal is met: one label lookup per request,
/// one create and one action poll per machine.
const EXPECTED_CALLS: u32 = REQUESTS as u32 * (1 + 2 * MACHINES as u32);
/// How many calls more than the bucket holds the run makes by default: each waits for the
/// refill, so the budget, not the runner, sets the pace at the end (about a minute).
const BUDGET_SHORTFALL: u32 = 60;
const BIN: &str = env!("CARGO_BIN_EXE_headroom");

/// The real client, noting when each request's first provider call (its label lookup) left.
struct Timed {
    inner: Arc<dyn MachineProvider>,
    first_call: Mutex<HashMap<i64, Instant>>,
}

impl MachineProvider for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn catalogue(&self) -> BoxFuture<'_, Result<Catalogue, ProviderError>> {
        self.inner.catalogue()
    }
    fn create_server<'a>(
        &'a self,
        spec: &'a ServerSpec,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        self.inner.create_server(spec)
    }
    fn find_by_label<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Server>, ProviderError>> {
        if let (PROVISION_LABEL, Ok(id)) = (key, value.parse::<i64>()) {
            let mut first = self.first_call.lock().unwrap();
            first.entry(id).or_insert_with(Instant::now);
        }
        self.inner.find_by_label(key, value)
    }
    fn find_by_name<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Server>, ProviderError>> {
        self.inner.find_by_name(name)
    }
    fn server(&self, id: i64) -> BoxFuture<'_, Result<Option<Server>, ProviderError>> {
        self.inner.server(id)
    }
    fn action(&self, id: i64) -> BoxFuture<'_, Result<ProviderAction, ProviderError>> {
        self.inner.action(id)
    }
    fn destroy(&self, id: i64) -> BoxFuture<'_, Result<(), ProviderError>> {
        self.inner.destroy(id)
    }
}

fn user(name: &str, role: Role) -> Caller {
    Caller {
        actor: Actor::User(name.into()),
        role,
        user_id: None,
    }
}

fn config() -> MachineInput {
    MachineInput {
        name: "spare-fsn1".into(),
        provider: "hetzner".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        ssh_keys: vec![serde_json::json!(4711)],
        yubaba_channel: "stable".into(),
        yubaba_url: "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        ..Default::default()
    }
}

/// Everything before the first request: users, catalogue, config, fleet.
async fn prepare(ctx: &Ctx) {
    let system = Caller::system();
    headroom::machine_setup::templates::ensure_default(ctx)
        .await
        .expect("template");
    headroom::machine_setup::catalogue::refresh(ctx, &system, ProviderKind::Hetzner)
        .await
        .expect("catalogue");
    headroom::machine_setup::configs::create(ctx, &system, &config())
        .await
        .expect("config");
    for (name, role) in [("olga", Role::Operator), ("abe", Role::Approver)] {
        let input = headroom::auth::users::NewUserInput {
            username: name.into(),
            role: role.to_string(),
            password: "correct horse battery staple".into(),
        };
        headroom::auth::users::create_user(ctx, &system, &input)
            .await
            .expect("user");
    }
    let fleet = FleetInput {
        name: "prod".into(),
        endpoints: vec!["http://127.0.0.1:7443".into()],
        restore_machine_config: "spare-fsn1".into(),
        ..FleetInput::default()
    };
    headroom::fleets::create(ctx, &system, &fleet)
        .await
        .expect("fleet");
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let capacity: u32 = std::env::var("BENCH_CAPACITY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(EXPECTED_CALLS - BUDGET_SHORTFALL);
    let fake = FakeHetzner::start_with(FakeHetznerOptions {
        capacity,
        refill_per_sec: 1.0,
        ..FakeHetznerOptions::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = headroom::config::Settings {
        database_url: format!("sqlite:{}", dir.path().join("bench.db").display()),
        render_worker: Some(BIN.into()),
        runner_action_poll: Duration::from_millis(100),
        // The bench's config pins a tarball nobody downloads: no check on filing, and an
        // unchecked pin does not block the approvals the bench measures.
        pin_check_on_request: false,
        plan_checks_blocking: headroom::domain::plan_check_blocking::BlockingChecks::parse::<&str>(
            &[],
        )
        .expect("empty list"),
        ..headroom::config::Settings::default()
    };
    let pool = headroom::db::connect(&settings.database_url)
        .await
        .expect("database");
    let timed = Arc::new(Timed {
        inner: Arc::new(headroom::provider::hetzner::Hetzner::new(
            &fake.uri(),
            fake.token().into(),
        )),
        first_call: Mutex::new(HashMap::new()),
    });
    let mut ctx = Ctx::build(settings, pool, Arc::new(SystemClock)).expect("context");
    ctx.providers = ctx
        .providers
        .clone()
        .with(ProviderKind::Hetzner, timed.clone());
    println!(
        "fake Hetzner budget: capacity {capacity} requests, refill 1 request/s; \
         {REQUESTS} requests × {MACHINES} machines; runner action poll {} ms",
        ctx.settings.runner_action_poll.as_millis()
    );
    prepare(&ctx).await;

    let filing = Instant::now();
    let mut ids = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let request = NewRequest {
            fleet: "prod".into(),
            machine_config: "spare-fsn1".into(),
            template: None,
            count: MACHINES,
            reason: "benchmark".into(),
        };
        let p = requests::create(&ctx, &user("olga", Role::Operator), &request)
            .await
            .expect("file");
        ids.push(p.id);
    }
    println!(
        "filed {REQUESTS} requests (plans rendered) in {}",
        millis(filing.elapsed())
    );
    let before = fake.requests().len();

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let loop_task = tokio::spawn(runner::run_until_stopped(ctx.clone(), stopped));
    let start = Instant::now();
    let mut approved_at = HashMap::new();
    for id in &ids {
        requests::approve(&ctx, &user("abe", Role::Approver), *id, None)
            .await
            .expect("approve");
        approved_at.insert(*id, Instant::now());
    }
    loop {
        let mut open = 0;
        for id in &ids {
            let d = requests::get(&ctx, &Caller::system(), *id).await.unwrap();
            if !d.provision.state.is_terminal() {
                open += 1;
            }
        }
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let took = start.elapsed();
    let _ = stop.send(true);
    loop_task.await.expect("runner loop");

    let mut succeeded = 0;
    for id in &ids {
        let d = requests::get(&ctx, &Caller::system(), *id).await.unwrap();
        if d.provision.state == headroom::domain::ProvisionState::Succeeded {
            succeeded += 1;
        }
    }
    let calls = fake.requests().len() - before;
    let creates = fake.creates().len();
    let servers = fake.servers().len();
    let first_call = timed.first_call.lock().unwrap().clone();
    let mut waits: Vec<Duration> = ids
        .iter()
        .map(|id| first_call[id].saturating_duration_since(approved_at[id]))
        .collect();
    waits.sort();
    println!(
        "finished in {} ({succeeded}/{REQUESTS} succeeded)",
        millis(took)
    );
    println!(
        "provider calls: {calls} for {servers} created servers = {:.2} per server (goal ≤ 3)",
        calls as f64 / servers as f64
    );
    println!(
        "creates: {creates} for {} planned machines ({:.2} per server, goal exactly 1); 429 answers: {}",
        REQUESTS as i64 * MACHINES,
        creates as f64 / servers as f64,
        fake.rate_limited()
    );
    println!(
        "approval → first provider call: median {}, max {} (approvals arrive as a burst; \
         the runner takes one request at a time, so later requests wait their turn)",
        millis(waits[waits.len() / 2]),
        millis(waits[waits.len() - 1])
    );
    println!(
        "approval → first provider call of the first request (runner idle): {}",
        millis(first_call[&ids[0]].saturating_duration_since(approved_at[&ids[0]]))
    );
    let mut goals = goals::Goals::default();
    goals.check(
        &format!("every request succeeded ({succeeded}/{REQUESTS})"),
        succeeded == REQUESTS,
    );
    goals.check(
        &format!("at most 3 provider calls per server ({calls} for {servers})"),
        servers > 0 && calls <= 3 * servers,
    );
    goals.check(
        &format!(
            "exactly one create per planned machine ({creates} for {})",
            REQUESTS as i64 * MACHINES
        ),
        creates as i64 == REQUESTS as i64 * MACHINES,
    );
    // The budget binds when the run needs more calls than the bucket holds: the calls past
    // the capacity can only go out at the refill rate, which then paces the run's end.
    let past_capacity = calls.saturating_sub(capacity as usize);
    goals.check(
        &format!(
            "the 1 request/s budget bound ({calls} calls, capacity {capacity}, \
             {past_capacity} paced over {})",
            millis(took)
        ),
        past_capacity > 0 && took >= Duration::from_secs(past_capacity as u64 - 1),
    );
    goals.exit_if_missed();
}
