//! The demo's loop end to end, through the real application (port 0, its own SQLite file, the
//! real clock, the simulated provider) and two simulated yubaba fleets on loopback, one
//! native and one derived: a tenant takes each fleet's spare → the scraper sees the deficit →
//! a restore proposal by `system` → an approver approves it over the API → the runner creates
//! the server on the simulated cloud → it joins its fleet as a spare → the next samples are
//! healthy, the deficit is left and the headroom series is back at the requirement.

use std::sync::Arc;
use std::time::Duration;

use headroom::auth::tokens::{self, NewTokenInput};
use headroom::auth::users::{self, NewUserInput};
use headroom::auth::Caller;
use headroom::config::Settings;
use headroom::domain::capacity::{DeficitPolicy, Source};
use headroom::domain::SystemClock;
use headroom::sim::release::ReleaseServer;
use headroom::sim::yubaba::{SimFleet, SimFleetOptions};
use headroom::startup::Application;
use serde_json::Value;
use tokio::time::Instant;

use crate::helpers::{TestApp, PASSWORD};

/// The whole loop must finish well within this (it takes under a minute: the scraper's
/// supervisor lists fleets every 10 s, two 5 s intervals per threshold, ~9 s of simulated
/// boot per server, and the runner executes one request at a time).
const LOOP_BUDGET: Duration = Duration::from_secs(90);

/// The application as `headroom demo` runs it, but on port 0 with a temp database.
struct DemoApp {
    address: String,
    ctx: headroom::context::Ctx,
    client: reqwest::Client,
    token: String,
    pool: sqlx::AnyPool,
    /// The release server serves while this lives.
    _stop_release: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl DemoApp {
    async fn spawn() -> DemoApp {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("headroom.db");
        // As `headroom demo`: its release server allow-listed, the simulated cloud only.
        let release = ReleaseServer::bind().await.unwrap();
        let settings = Settings {
            bind: "127.0.0.1:0".into(),
            database_url: format!("sqlite:{}", db_path.display()),
            workers: 1,
            render_worker: Some(env!("CARGO_BIN_EXE_headroom").into()),
            simulated_provider: true,
            // Two samples below enter a deficit, two at or above leave it: the rule is the
            // demo's, only shorter.
            deficit: DeficitPolicy {
                enter_after: 2,
                leave_after: 2,
            },
            // The simulated cloud boots in 8 s whatever the poll; a short poll only keeps the
            // runner from sleeping past it.
            runner_action_poll: Duration::from_millis(250),
            ..Settings::default()
        };
        let settings = headroom::sim::demo::simulated_only(settings, &release).unwrap();
        let pool = headroom::db::connect(&settings.database_url).await.unwrap();
        // The real clock: samples, deficits and the series are read back by time.
        let app = Application::bind(settings, pool.clone(), Arc::new(SystemClock))
            .await
            .unwrap();
        let address = format!("http://127.0.0.1:{}", app.port());
        let state = app.state().clone();
        tokio::spawn(app.run_until_stopped());
        // The demo config pins the release server's tarball, checked as the demo does: the
        // default `plan_checks_blocking` would refuse approval of an unverified pin.
        let (stop_release, stopped) = tokio::sync::watch::channel(false);
        headroom::sim::demo::seed_release(&state, release, stopped)
            .await
            .unwrap();
        let ctx = state.ctx.clone();
        users::create_user(
            &ctx,
            &Caller::system(),
            &NewUserInput {
                username: "approver".into(),
                role: "approver".into(),
                password: PASSWORD.into(),
            },
        )
        .await
        .unwrap();
        let (token, _) = tokens::create_token(
            &ctx,
            &Caller::system(),
            &NewTokenInput {
                username: "approver".into(),
                label: "demo loop".into(),
            },
        )
        .await
        .unwrap();
        DemoApp {
            address,
            ctx,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            token,
            pool,
            _stop_release: stop_release,
            _dir: dir,
        }
    }

    async fn get(&self, path: &str) -> Value {
        let res = self
            .client
            .get(format!("{}{path}", self.address))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "GET {path}");
        res.json().await.unwrap()
    }

    /// The fleet's requests, newest first.
    async fn provisions(&self, fleet: &str) -> Vec<Value> {
        let list = self.get(&format!("/api/v1/provisions?fleet={fleet}")).await;
        list["items"].as_array().unwrap().clone()
    }
}

/// Polls `probe` every 250 ms until it yields a value, failing after the loop's budget.
async fn until<T, F, Fut>(started: Instant, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    loop {
        if let Some(v) = probe().await {
            eprintln!("{:>5.1} s  {what}", started.elapsed().as_secs_f64());
            return v;
        }
        assert!(
            started.elapsed() < LOOP_BUDGET,
            "waited {:?} for: {what}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A demo fleet that lives only when told to: tenants are landed by the test.
fn sim_options(name: &str, native: bool) -> SimFleetOptions {
    SimFleetOptions {
        name: name.into(),
        native,
        first_tenant_after: Duration::from_secs(3600),
        tenant_every: None,
        join_after: Duration::from_millis(200),
        poll_every: Duration::from_millis(100),
        ..SimFleetOptions::default()
    }
}

/// Drives one fleet through the loop and checks each step.
async fn one_loop(app: &DemoApp, sim: &SimFleet, started: Instant) {
    let name = sim.name().to_owned();
    let detail = format!("/api/v1/fleets/{name}");
    let source = if name == "demo" { "native" } else { "derived" };
    until(
        started,
        &format!("{name}: healthy with its one spare"),
        || async {
            let f = app.get(&detail).await;
            (f["status"] == "healthy").then_some(())
        },
    )
    .await;
    let f = app.get(&detail).await;
    assert_eq!(
        (f["spare"].as_u64(), f["required"].as_u64()),
        (Some(1), Some(1))
    );
    let leader = f["leader"].as_str().unwrap().to_owned();
    assert_eq!(
        leader,
        format!("http://{}", sim.nodes()[0].addr),
        "followed to the leader"
    );

    assert_eq!(sim.land_tenant(), Some(4));
    let proposal = until(
        started,
        &format!("{name}: deficit → proposal by system"),
        || async {
            let items = app.provisions(&name).await;
            items.first().cloned()
        },
    )
    .await;
    assert_eq!(proposal["requester"], "system");
    assert_eq!(proposal["state"], "pending_approval");
    assert_eq!(proposal["count"], 1, "required − spare machines");
    assert_eq!(proposal["machine_config"], "spare-fsn1");
    assert_eq!(app.get(&detail).await["status"], "deficit");

    let id = proposal["id"].as_i64().unwrap();
    // The demo's pin was downloaded from its release server and matched: under the default
    // plan_checks_blocking an unverified pin would refuse the approval below.
    let checks = app.get(&format!("/api/v1/provisions/{id}")).await["checks"].clone();
    let pin = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "pin")
        .unwrap_or_else(|| panic!("a pin check: {checks}"));
    assert_eq!(pin["verdict"], "pass", "{pin}");
    let res = app
        .client
        .post(format!("{}/api/v1/provisions/{id}/approve", app.address))
        .bearer_auth(&app.token)
        .json(&serde_json::json!({ "plan_hash": proposal["plan_hash"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    eprintln!(
        "{:>5.1} s  {name}: approved #{id}",
        started.elapsed().as_secs_f64()
    );

    let done = until(
        started,
        &format!("{name}: provisioned on the simulated cloud"),
        || async {
            let p = app.get(&format!("/api/v1/provisions/{id}")).await;
            assert!(
                ["approved", "executing", "succeeded"].contains(&p["state"].as_str().unwrap()),
                "{p}"
            );
            (p["state"] == "succeeded").then_some(p)
        },
    )
    .await;
    let server_id = done["machines"][0]["server_id"].as_i64().unwrap();
    // Succeeded means joined: the request followed the scrape until the server was a member.
    assert!(
        done["machines"][0]["joined_at"].as_str().is_some(),
        "{name}: succeeded only once joined: {done}"
    );
    let member = done["machines"][0]["member_id"].as_u64().unwrap();
    assert!(
        sim.nodes()
            .iter()
            .any(|n| n.id == member && n.server_id == Some(server_id)),
        "{name}: joined as the member its server became"
    );
    until(
        started,
        &format!("{name}: the new server joined as a spare"),
        || async {
            sim.nodes()
                .iter()
                .any(|n| n.server_id == Some(server_id) && n.is_spare())
                .then_some(())
        },
    )
    .await;
    until(
        started,
        &format!("{name}: healthy again, deficit left"),
        || async {
            let f = app.get(&detail).await;
            (f["status"] == "healthy").then_some(())
        },
    )
    .await;

    let f = app.get(&detail).await;
    assert_eq!(
        (f["spare"].as_u64(), f["required"].as_u64()),
        (Some(1), Some(1))
    );
    let (ended, provision): (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT d.ended_at, d.provision_id FROM fleet_deficits d JOIN fleets f ON f.id = d.fleet_id
         WHERE f.name = $1",
    )
    .bind(&name)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(ended.is_some(), "{name}: the deficit is left");
    assert_eq!(
        provision,
        Some(id),
        "{name}: the deficit names its proposal"
    );
    assert_eq!(
        app.provisions(&name).await.len(),
        1,
        "{name}: one proposal, no second"
    );

    let series = app
        .get(&format!("/api/v1/fleets/{name}/headroom?step=5"))
        .await;
    let points: Vec<&Value> = series["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["ok"] == true)
        .collect();
    assert!(
        points
            .iter()
            .any(|p| p["spare"].as_u64() < p["required"].as_u64()),
        "{name}: the deficit shows in the series: {series}"
    );
    let last = points.last().expect("ok points");
    assert!(
        last["spare"].as_u64() >= last["required"].as_u64(),
        "{name}: the series is back at the requirement: {series}"
    );
    assert_eq!(last["source"], source);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deficit_is_proposed_approved_provisioned_and_restored_in_both_simulated_fleets() {
    let app = DemoApp::spawn().await;
    let native = SimFleet::start(sim_options("demo", true)).await.unwrap();
    let derived = SimFleet::start(sim_options("legacy", false)).await.unwrap();
    let cloud = app.ctx.providers.simulated().expect("the simulated cloud");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    for sim in [&native, &derived] {
        headroom::sim::demo::point_fleet(&app.ctx, sim.name(), sim.endpoints())
            .await
            .unwrap();
        tokio::spawn(
            sim.clone()
                .run_until_stopped(Some(cloud.clone()), stopped.clone()),
        );
    }
    let started = Instant::now();
    tokio::join!(
        one_loop(&app, &native, started),
        one_loop(&app, &derived, started)
    );
    eprintln!(
        "{:>5.1} s  both fleets restored",
        started.elapsed().as_secs_f64()
    );
    // Each fleet joined exactly its own server.
    assert_eq!(native.nodes().len(), 5);
    assert_eq!(derived.nodes().len(), 5);
    assert_eq!(cloud.servers().len(), 2);
    stop.send(true).unwrap();
}

#[tokio::test]
async fn the_scraper_reads_the_simulated_fleets_natively_and_derived() {
    let app = TestApp::spawn_with_config().await;
    let ctx = &app.state.ctx;
    for (name, native, source) in [
        ("demo", true, Source::Native),
        ("legacy", false, Source::Derived),
    ] {
        let sim = SimFleet::start(sim_options(name, native)).await.unwrap();
        headroom::sim::demo::point_fleet(ctx, name, sim.endpoints())
            .await
            .unwrap();
        let spec = headroom::fleets::get(ctx, &Caller::system(), name)
            .await
            .unwrap()
            .spec;
        assert_eq!(spec.scrape_interval_secs(), 5);
        let numbers = |s: &headroom::domain::capacity::Sample| {
            let o = s.outcome.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
            (o.source, o.spare, o.required, o.leader_id, o.members.len())
        };
        let before = headroom::scraper::scrape_once(ctx, &spec).await;
        assert_eq!(numbers(&before), (source, 1, 1, Some(1), 4), "{name}");
        // Every member's load is read in both modes, so the list names the spare and what
        // the others carry (natively too, though yubaba's own count is the number).
        let roles: Vec<String> = before
            .outcome
            .as_ref()
            .unwrap()
            .members
            .iter()
            .map(|m| m.role_words())
            .collect();
        assert_eq!(
            roles.iter().filter(|r| r.as_str() == "spare").count(),
            1,
            "{name}: {roles:?}"
        );
        assert_eq!(
            roles.iter().filter(|r| r.starts_with("carrying ")).count(),
            3,
            "{name}: {roles:?}"
        );
        sim.land_tenant().unwrap();
        let after = headroom::scraper::scrape_once(ctx, &spec).await;
        assert_eq!(numbers(&after), (source, 0, 1, Some(1), 4), "{name}");
        sim.add_spare().await.unwrap();
        let restored = headroom::scraper::scrape_once(ctx, &spec).await;
        assert_eq!(numbers(&restored), (source, 1, 1, Some(1), 5), "{name}");
    }
}

/// The demo's fleets show yubaba's count and absorption disagreeing, each way: `demo` once a
/// tenant took its spare (count short, absorption fine) and `tight` (count fine, absorption
/// short by two tenants, which one restore machine of the demo config covers).
#[tokio::test]
async fn the_demo_fleets_show_the_two_rules_disagreeing_each_way() {
    let app = TestApp::spawn_with_config().await;
    let ctx = &app.state.ctx;
    let options = headroom::sim::demo::demo_fleets();
    let start = |name: &str| {
        let o = options
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("the demo runs {name}"))
            .clone();
        async move {
            let sim = SimFleet::start(o).await.unwrap();
            headroom::sim::demo::point_fleet(ctx, sim.name(), sim.endpoints())
                .await
                .unwrap();
            let spec = headroom::fleets::get(ctx, &Caller::system(), sim.name())
                .await
                .unwrap()
                .spec;
            (sim, spec)
        }
    };
    let scrape = |spec: headroom::domain::fleet::FleetSpec| async move {
        headroom::scraper::scrape_once(ctx, &spec)
            .await
            .outcome
            .expect("an ok sample")
    };

    let (tight, spec) = start(headroom::sim::demo::TIGHT_FLEET).await;
    let o = scrape(spec).await;
    assert_eq!(
        (o.spare, o.required),
        (1, 1),
        "yubaba's count: N+1, healthy"
    );
    let a = o.absorption.expect("judged");
    assert!(!a.absorbed(), "{a:?}");
    assert_eq!(
        a.words(),
        "short 2 GiB, 1000 millicores if node 1 goes · 1 more restore machine covers it"
    );
    drop(tight);

    for name in [
        headroom::sim::demo::DEMO_FLEET,
        headroom::sim::demo::LEGACY_FLEET,
    ] {
        let (sim, spec) = start(name).await;
        sim.land_tenant().unwrap();
        let o = scrape(spec).await;
        assert_eq!(
            (o.spare, o.required),
            (0, 1),
            "{name}: yubaba's count: N+0, short"
        );
        let a = o.absorption.expect("judged");
        assert!(
            a.absorbed(),
            "{name}: every voter's two tenants fit elsewhere: {a:?}"
        );
        assert_eq!(a.words(), "survives losing any node", "{name}");
    }
}

#[tokio::test]
async fn pointing_an_existing_fleet_at_new_ports_keeps_what_an_operator_changed() {
    let app =
        TestApp::spawn_with_config_and(|s| crate::helpers::declare(s, &["tunnel=env:DEMO_TUNNEL"]))
            .await;
    let ctx = &app.state.ctx;
    headroom::sim::demo::seed_fleet(&app.state).await.unwrap();
    let caller = Caller::system();
    let mut input = headroom::domain::fleet::FleetInput {
        name: "demo".into(),
        endpoints: vec!["http://127.0.0.1:7480".into()],
        restore_machine_config: "spare-fsn1".into(),
        approvals_required: Some(serde_json::json!(2)),
        required_override: Some(serde_json::json!(3)),
        ..Default::default()
    };
    input.secrets.insert("tunnel_token".into(), "tunnel".into());
    headroom::fleets::update(ctx, &caller, "demo", &input)
        .await
        .unwrap();
    let sim = SimFleet::start(sim_options("demo", true)).await.unwrap();
    headroom::sim::demo::point_fleet(ctx, "demo", sim.endpoints())
        .await
        .unwrap();
    let spec = headroom::fleets::get(ctx, &caller, "demo")
        .await
        .unwrap()
        .spec;
    assert_eq!(spec.endpoints(), sim.endpoints());
    assert_eq!(
        (spec.scrape_interval_secs(), spec.scrape_timeout_secs()),
        (5, 2)
    );
    assert_eq!(spec.approvals_required(), 2);
    assert_eq!(spec.required_override(), Some(3));
    assert_eq!(spec.secrets().len(), 1);
    // Pointing again at the same ports changes nothing and records nothing.
    let updates = app
        .audit_actions()
        .await
        .iter()
        .filter(|a| *a == "fleet.updated")
        .count();
    headroom::sim::demo::point_fleet(ctx, "demo", sim.endpoints())
        .await
        .unwrap();
    let again = app
        .audit_actions()
        .await
        .iter()
        .filter(|a| *a == "fleet.updated")
        .count();
    assert_eq!(again, updates);
}
