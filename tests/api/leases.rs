//! Several instances on one database (issue 19), in one process: each instance is a context
//! with a name of its own over the same store (SQLite here, PostgreSQL under
//! `HEADROOM_TEST_STORE=postgres`). A lease has one holder however many ask at once; a
//! request left executing by a dead instance is resumed by another only once its lease has
//! run out, and through the label; a runner that lost its lease sends nothing more; a periodic
//! job runs on one instance per tick; each fleet is scraped by one instance, and by another
//! within two intervals of its holder's death; a login on one instance is a session, with its
//! CSRF token and its throttle, on the other.

use std::sync::Arc;
use std::time::Duration;

use headroom::auth::Caller;
use headroom::context::Ctx;
use headroom::domain::lease::Instance;
use headroom::domain::{MachineStatus, ProvisionState, Role, SystemClock};
use headroom::provider::fake::{Fake, Method};
use headroom::provisioning::runner;
use reqwest::StatusCode;

use crate::helpers::TestApp;
use crate::runner::{approved, at_most_one_server_per_machine, console, ctx_with, fleet, record};

/// `ctx` as instance `name` would see the same database (a boot of its own).
fn as_instance(ctx: &Ctx, name: &str) -> Ctx {
    Ctx {
        instance: Arc::new(Instance::new(name, "boot")),
        ..ctx.clone()
    }
}

#[tokio::test]
async fn a_lease_has_exactly_one_holder_however_many_instances_ask_at_once() {
    let app = console(|_| {}).await;
    let ttl = Duration::from_secs(10);
    for round in 0..5 {
        let asks: Vec<_> = (0..16)
            .map(|i| {
                let ctx = as_instance(&app.state.ctx, &format!("i{round}-{i}"));
                tokio::spawn(async move { headroom::leases::hold(&ctx, "job:test", ttl).await })
            })
            .collect();
        let mut holders = 0;
        for a in asks {
            holders += usize::from(a.await.unwrap().unwrap());
        }
        assert_eq!(holders, 1, "round {round}: one holder among sixteen");
        // The lease runs out: the next round's instances may take it, and again only one.
        app.clock.advance(ttl);
    }
    // Within its time, nobody else takes it, and its holder keeps it.
    let a = as_instance(&app.state.ctx, "a");
    let b = as_instance(&app.state.ctx, "b");
    assert!(headroom::leases::hold(&a, "job:x", ttl).await.unwrap());
    app.clock.advance(ttl / 2);
    assert!(!headroom::leases::hold(&b, "job:x", ttl).await.unwrap());
    assert!(headroom::leases::hold(&a, "job:x", ttl).await.unwrap());
    // Given up cleanly, it is free at once.
    headroom::leases::release(&a, "job:x").await;
    assert!(headroom::leases::hold(&b, "job:x", ttl).await.unwrap());
}

#[tokio::test]
async fn a_periodic_job_runs_on_one_instance_per_tick_and_moves_when_its_holder_dies() {
    let app = console(|_| {}).await;
    let every = Duration::from_secs(60);
    let (a, b) = (
        as_instance(&app.state.ctx, "a"),
        as_instance(&app.state.ctx, "b"),
    );
    // The app's own retention loop runs its first tick at start, under its lease.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let retention = loop {
        let mut conn = app.pool.acquire().await.unwrap();
        if let Some(held) = headroom::db::leases::get(&mut conn, "job:retention")
            .await
            .unwrap()
        {
            break held;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "retention took no lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(retention.holder, app.state.ctx.instance.holder());
    let mut ran = Vec::new();
    for _ in 0..6 {
        // Both instances tick (in either order); one runs the job.
        let (ra, rb) = tokio::join!(
            headroom::leases::runs_job(&a, "test-tick", every),
            headroom::leases::runs_job(&b, "test-tick", every)
        );
        assert!(ra ^ rb, "exactly one instance runs the tick");
        ran.push(if ra { "a" } else { "b" });
        app.clock.advance(every);
    }
    assert!(
        ran.windows(2).all(|w| w[0] == w[1]),
        "the holder keeps it: {ran:?}"
    );
    let holder = if ran[0] == "a" { &a } else { &b };
    let other = if ran[0] == "a" { &b } else { &a };
    // The holder dies: its lease lasts one tick and the lease time beyond its last renewal.
    assert!(!headroom::leases::runs_job(other, "test-tick", every).await);
    app.clock
        .advance(app.state.ctx.settings.lease + Duration::from_millis(1));
    assert!(headroom::leases::runs_job(other, "test-tick", every).await);
    assert!(!headroom::leases::runs_job(holder, "test-tick", every).await);
}

/// Instance `name`'s context for the runner tests: the fake provider, its own wake-up.
fn runner_instance(app: &TestApp, fake: &Fake, name: &str) -> Ctx {
    as_instance(&ctx_with(app, Arc::new(fake.clone())), name)
}

/// Instance `ctx`'s runner, claiming the one approved request and held at its first create
/// (the server made at the fake, the answer not yet given) until the returned pause is
/// released.
async fn held_at_first_create(
    ctx: &Ctx,
    fake: &Fake,
) -> (
    tokio::task::JoinHandle<anyhow::Result<bool>>,
    headroom::provider::fake::CreatePause,
) {
    let pause = fake.pause_create();
    let running = tokio::spawn({
        let ctx = ctx.clone();
        async move { runner::run_once(&ctx).await }
    });
    pause.reached().await;
    (running, pause)
}

#[tokio::test]
async fn a_request_left_by_a_dead_instance_is_resumed_by_another_once_its_lease_runs_out() {
    let app = console(|_| {}).await;
    let fake = Fake::new();
    let a = runner_instance(&app, &fake, "a");
    let b = runner_instance(&app, &fake, "b");
    fleet(&a, "prod", &[]).await;
    let id = approved(&a, "prod", 2).await;

    // Instance a claims the request and dies between "create sent" and "answer stored".
    let (running, _pause) = held_at_first_create(&a, &fake).await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    let (holder, until): (Option<String>, Option<i64>) =
        sqlx::query_as("SELECT runner_id, lease_until FROM provisions WHERE id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(holder.as_deref(), Some(a.instance.holder()));
    let until = until.unwrap();
    assert!(until > a.now(), "the claim took a lease that lasts");

    // While a's lease lasts, b leaves the request alone (a may only be slow).
    assert_eq!(runner::reconcile_on_start(&b).await.unwrap(), 0);
    assert!(!runner::run_once(&b).await.unwrap());
    assert_eq!(fake.count(Method::Create), 1);

    // Once it runs out, b resumes it through the label: the held create's server is adopted.
    app.clock.advance(Duration::from_millis(
        u64::try_from(until - a.now()).unwrap(),
    ));
    assert!(runner::run_once(&b).await.unwrap());
    let after = record(&b, id).await;
    assert_eq!(
        after.provision.state,
        ProvisionState::Succeeded,
        "{}",
        after.provision.state_reason
    );
    assert_eq!(
        fake.count(Method::Create),
        2,
        "one create per machine, never a second"
    );
    at_most_one_server_per_machine(&after, &fake.servers());
    let holder: Option<String> =
        sqlx::query_scalar("SELECT runner_id FROM provisions WHERE id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(holder.as_deref(), Some(b.instance.holder()));
}

#[tokio::test]
async fn a_runner_that_lost_its_lease_sends_nothing_more() {
    let app = console(|_| {}).await;
    let fake = Fake::new();
    let a = runner_instance(&app, &fake, "a");
    let b = runner_instance(&app, &fake, "b");
    fleet(&a, "prod", &[]).await;
    let id = approved(&a, "prod", 2).await;

    // a is held at its first create (paused, not dead) past the end of its lease...
    let (slow, pause) = held_at_first_create(&a, &fake).await;
    app.clock
        .advance(app.state.ctx.settings.lease + Duration::from_secs(1));
    // ...so b takes the request over and finishes it, adopting the server a's create made.
    assert!(runner::run_once(&b).await.unwrap());
    assert_eq!(
        record(&b, id).await.provision.state,
        ProvisionState::Succeeded
    );
    let creates = fake.count(Method::Create);
    // a wakes up: its next step finds the lease gone, so it sends no create for machine 2.
    pause.release();
    let err = slow.await.unwrap().unwrap_err();
    // Stopped by its own step's check, or by its renewal finding the lease gone first.
    let err = format!("{err:#}");
    assert!(
        err.contains("no longer holds the lease") || err.contains("took over its execution"),
        "{err}"
    );
    assert_eq!(fake.count(Method::Create), creates, "a sent nothing more");
    let after = record(&b, id).await;
    assert!(after
        .machines
        .iter()
        .all(|m| m.status == MachineStatus::Created));
    at_most_one_server_per_machine(&after, &fake.servers());
}

#[tokio::test]
async fn a_restarted_instance_resumes_its_own_earlier_boots_work_at_once() {
    let app = console(|_| {}).await;
    let fake = Fake::new();
    let a = runner_instance(&app, &fake, "a");
    fleet(&a, "prod", &[]).await;
    let id = approved(&a, "prod", 1).await;
    let (running, _pause) = held_at_first_create(&a, &fake).await;
    running.abort();
    let _ = running.await;
    // Same name, new boot: no waiting for the dead boot's lease; another name would wait.
    let other = runner_instance(&app, &fake, "z");
    assert_eq!(runner::reconcile_on_start(&other).await.unwrap(), 0);
    let restarted = a.rebooted().unwrap();
    assert_eq!(runner::reconcile_on_start(&restarted).await.unwrap(), 1);
    assert_eq!(
        record(&a, id).await.provision.state,
        ProvisionState::Succeeded
    );
    assert_eq!(fake.count(Method::Create), 1);
}

/// The times of fleet `fleet`'s samples, oldest first.
async fn sample_times(app: &TestApp, fleet: &str) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT s.at FROM fleet_samples s JOIN fleets f ON f.id = s.fleet_id
         WHERE f.name = $1 ORDER BY s.at",
    )
    .bind(fleet)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Who holds each fleet's scrape lease, by fleet name.
async fn scrape_holders(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT holder FROM leases WHERE name LIKE 'scrape:%' ORDER BY name")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn each_fleet_is_scraped_by_one_instance_and_by_another_within_two_intervals_of_its_death() {
    use headroom::domain::fleet::{FleetInput, SCRAPE_INTERVAL_SECS_MIN};
    use headroom::scraper::{supervisor, ScrapeStats};

    let app = console(|_| {}).await;
    let interval = Duration::from_secs(u64::from(SCRAPE_INTERVAL_SECS_MIN));
    let nodes = [
        crate::scrape_supervisor::node().await,
        crate::scrape_supervisor::node().await,
    ];
    for (i, n) in nodes.iter().enumerate() {
        let input = FleetInput {
            name: format!("f{i}"),
            endpoints: vec![n.uri()],
            restore_machine_config: "spare-fsn1".into(),
            scrape_interval_secs: Some(serde_json::json!(SCRAPE_INTERVAL_SECS_MIN)),
            scrape_timeout_secs: Some(serde_json::json!(4)),
            ..FleetInput::default()
        };
        headroom::fleets::create(&app.state.ctx, &Caller::system(), &input)
            .await
            .unwrap();
    }
    // Two instances on the real clock (leases run out in real time here); a's pool is its own,
    // so closing it is a's death as the database sees it: nothing released, nothing renewed.
    let a_pool = headroom::db::connect(&app.state.ctx.settings.database_url)
        .await
        .unwrap();
    let real = |ctx: Ctx| Ctx {
        clock: Arc::new(SystemClock),
        ..ctx
    };
    let a = Ctx {
        pool: a_pool.clone(),
        ..real(as_instance(&app.state.ctx, "a"))
    };
    let b = real(as_instance(&app.state.ctx, "b"));
    let started = std::time::Instant::now();
    let (stop_a, rx_a) = tokio::sync::watch::channel(false);
    let sup_a = tokio::spawn(supervisor::supervise(
        a,
        Arc::new(ScrapeStats::default()),
        rx_a,
        Duration::from_millis(100),
    ));
    // b starts once a scrapes both fleets.
    let deadline = std::time::Instant::now() + interval * 3;
    while scrape_holders(&app).await != ["a#boot", "a#boot"] {
        assert!(
            std::time::Instant::now() < deadline,
            "a never took both fleets"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (stop_b, rx_b) = tokio::sync::watch::channel(false);
    let sup_b = tokio::spawn(supervisor::supervise(
        b,
        Arc::new(ScrapeStats::default()),
        rx_b,
        Duration::from_millis(100),
    ));
    tokio::time::sleep(interval * 2 + Duration::from_secs(1)).await;
    assert_eq!(scrape_holders(&app).await, ["a#boot", "a#boot"]);
    a_pool.close().await;
    let died = std::time::Instant::now();
    tokio::time::sleep(interval * 3).await;
    assert_eq!(scrape_holders(&app).await, ["b#boot", "b#boot"]);
    stop_b.send(true).unwrap();
    sup_b.await.unwrap();
    let _ = stop_a.send(true);
    sup_a.abort();
    let ran = started.elapsed();

    let whole_intervals = ran.as_millis() / interval.as_millis();
    for (i, n) in nodes.iter().enumerate() {
        let fleet = format!("f{i}");
        let times = sample_times(&app, &fleet).await;
        println!(
            "{fleet}: {} samples in {ran:?} (a died after {:?}; {} requests to its node): \
             {times:?}",
            times.len(),
            died - started,
            n.received_requests().await.unwrap().len()
        );
        // One instance at a time: one sample per interval, never one per instance.
        assert!(
            (times.len() as u128) <= whole_intervals + 1,
            "{fleet}: {} samples in {whole_intervals} intervals",
            times.len()
        );
        assert!(
            times.len() >= 4,
            "{fleet}: scraped on after a's death: {times:?}"
        );
        let longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(
            longest <= 2 * i64::try_from(interval.as_millis()).unwrap(),
            "{fleet}: a gap of {longest} ms between samples"
        );
    }
}

#[tokio::test]
async fn a_login_on_one_instance_is_a_session_with_csrf_and_throttle_on_another() {
    let a = TestApp::spawn_with(|s| s.instance_name = "a".into()).await;
    a.create_user("alice", Role::Operator).await;
    let url = a.state.ctx.settings.database_url.clone();
    let b = TestApp::spawn_with(|s| {
        s.database_url = url;
        s.instance_name = "b".into();
    })
    .await;
    let session = a
        .login("alice", crate::helpers::PASSWORD)
        .await
        .expect("login on a");
    // The next request goes to b: the same user, and a's CSRF token is good there.
    let page = b.get("/", &session).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("alice"));
    let out = b.post_form("/logout", &session, &[]).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    // Logged out on b: a refuses the session once its row cache's second has passed.
    a.clock.advance(Duration::from_millis(
        u64::try_from(headroom::auth::sessions::ROW_TTL_MS).unwrap(),
    ));
    let after = a.get("/", &session).await;
    assert_eq!(
        after.status(),
        StatusCode::SEE_OTHER,
        "logged out everywhere"
    );

    // Failed logins count wherever they land: alternating instances, the account locks
    // after as many failures as on one.
    let failures = headroom::config::Settings::default()
        .throttle
        .account_failures;
    for i in 0..failures {
        let app = if i % 2 == 0 { &a } else { &b };
        assert_eq!(
            app.post_login("alice", "wrong password 123").await.status(),
            401
        );
    }
    assert_eq!(
        a.post_login("alice", crate::helpers::PASSWORD)
            .await
            .status(),
        429
    );
    assert_eq!(
        b.post_login("alice", crate::helpers::PASSWORD)
            .await
            .status(),
        429
    );
}
