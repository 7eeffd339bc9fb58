//! Issue 16's acceptance walk, in Chromium, through the demo as `headroom demo` runs it (the
//! real application on port 0, the real clock, the simulated cloud, two simulated yubaba
//! fleets on loopback): a person's pre-stage request waits on `legacy`; a tenant takes
//! `demo`'s spare → the inbox lists headroom's restore proposal first, with each fleet's state
//! → the request page says why, shows each machine's payload and the named checks beside
//! Approve → the approver comments, approves and confirms → the machine is created and joins
//! → the request is `succeeded` with `joined_at`, and a fleet page opened before it all turns
//! healthy again without a reload.

use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, Locator};
use headroom::auth::tokens::{self, NewTokenInput};
use headroom::auth::users::{self, NewUserInput};
use headroom::auth::Caller;
use headroom::config::Settings;
use headroom::domain::capacity::DeficitPolicy;
use headroom::domain::SystemClock;
use headroom::sim::release::ReleaseServer;
use headroom::sim::yubaba::{SimFleet, SimFleetOptions};
use headroom::startup::Application;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::browser::{assert_accessible, assert_no_csp_violation, browser, screenshot, Driver};
use crate::helpers::PASSWORD;

/// The whole walk must end within this. It takes well under a minute: the scraper's
/// supervisor lists fleets every 10 s, two 5 s samples enter and leave a deficit, the
/// simulated cloud boots a server in ~8 s, and the join is seen at the next scrape.
const WALK_BUDGET: Duration = Duration::from_secs(90);

/// The fleet that falls into a deficit, and the one that keeps its spare.
const SHORT: &str = "demo";
const SPARED: &str = "legacy";

/// The demo with a browser driver: the application, its accounts and two running simulated
/// fleets the test controls. Everything the walk needs is set up here, in one place.
struct Walk {
    address: String,
    client: reqwest::Client,
    /// Bearer tokens of `approver` (who walks) and `olga` (an operator who pre-stages).
    approver_token: String,
    operator_token: String,
    /// `demo`, which the test lands a tenant on; `legacy`, which stays healthy.
    short: SimFleet,
    _spared: SimFleet,
    stop: tokio::sync::watch::Sender<bool>,
    driver: Driver,
    _dir: tempfile::TempDir,
}

/// Starts the demo: the application on port 0 with its own SQLite file, the real clock and
/// the simulated provider; the demo's machine config; an approver and an operator; and two
/// simulated fleets on loopback, pointed at and followed (their servers join from the
/// simulated cloud), whose tenants land only when the test says.
async fn demo_with_browser() -> Walk {
    let driver = crate::browser::start_driver().await;
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
        // The demo's rule, only shorter: two samples below enter a deficit, two above leave.
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
    let app = Application::bind(settings, pool, Arc::new(SystemClock))
        .await
        .unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    let state = app.state().clone();
    tokio::spawn(app.run_until_stopped());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // The demo config pins the release server's tarball and its pin is checked, as the demo
    // does at start: the default plan_checks_blocking refuses an unverified pin.
    headroom::sim::demo::seed_release(&state, release, stopped.clone())
        .await
        .unwrap();
    let ctx = state.ctx.clone();
    let mut bearer = Vec::new();
    for (name, role) in [("approver", "approver"), ("olga", "operator")] {
        users::create_user(
            &ctx,
            &Caller::system(),
            &NewUserInput {
                username: name.into(),
                role: role.into(),
                password: PASSWORD.into(),
            },
        )
        .await
        .unwrap();
        let (token, _) = tokens::create_token(
            &ctx,
            &Caller::system(),
            &NewTokenInput {
                username: name.into(),
                label: "demo walk".into(),
            },
        )
        .await
        .unwrap();
        bearer.push(token);
    }
    let operator_token = bearer.pop().unwrap();
    let approver_token = bearer.pop().unwrap();

    let cloud = ctx.providers.simulated().expect("the simulated cloud");
    let mut sims = Vec::new();
    for (name, native) in [(SHORT, true), (SPARED, false)] {
        let sim = SimFleet::start(SimFleetOptions {
            name: name.into(),
            native,
            first_tenant_after: Duration::from_secs(3600),
            tenant_every: None,
            join_after: Duration::from_millis(200),
            poll_every: Duration::from_millis(100),
            ..SimFleetOptions::default()
        })
        .await
        .unwrap();
        headroom::sim::demo::point_fleet(&ctx, sim.name(), sim.endpoints())
            .await
            .unwrap();
        tokio::spawn(
            sim.clone()
                .run_until_stopped(Some(cloud.clone()), stopped.clone()),
        );
        sims.push(sim);
    }
    let spared = sims.pop().unwrap();
    let short = sims.pop().unwrap();
    Walk {
        address,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        approver_token,
        operator_token,
        short,
        _spared: spared,
        stop,
        driver,
        _dir: dir,
    }
}

impl Walk {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// GETs `path` over the API as the approver.
    async fn get(&self, path: &str) -> Value {
        let res = self
            .client
            .get(self.url(path))
            .bearer_auth(&self.approver_token)
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

    /// A browser window signed in as `user`.
    async fn signed_in(&self, user: &str) -> Client {
        let c = browser(&self.driver).await;
        c.goto(&self.url("/login")).await.unwrap();
        c.find(Locator::Css("#f-username"))
            .await
            .unwrap()
            .send_keys(user)
            .await
            .unwrap();
        c.find(Locator::Css("#f-password"))
            .await
            .unwrap()
            .send_keys(PASSWORD)
            .await
            .unwrap();
        c.find(Locator::Css("button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        c.wait().for_element(Locator::Css(".whoami")).await.unwrap();
        c
    }
}

/// Prints how long the walk has taken at this step.
fn step(started: Instant, what: &str) {
    eprintln!("{:>5.1} s  {what}", started.elapsed().as_secs_f64());
}

/// Polls `probe` every 250 ms until it yields a value, failing once the walk is over budget.
async fn until<T, F, Fut>(started: Instant, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    loop {
        if let Some(v) = probe().await {
            step(started, what);
            return v;
        }
        assert!(
            started.elapsed() < WALK_BUDGET,
            "waited {:?} for: {what}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs `js` in `c` until `ok` accepts its answer (within the walk's budget); answers it.
async fn until_js(
    c: &Client,
    started: Instant,
    what: &str,
    js: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    loop {
        last = c.execute(js, vec![]).await.unwrap_or(last);
        if ok(&last) {
            step(started, what);
            return last;
        }
        assert!(
            started.elapsed() < WALK_BUDGET,
            "waited {:?} for: {what}; last seen {last}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The fleet page's live "now" block, and whether the page is still the one first loaded
/// (`window.__walk`, set once, is lost on any navigation or reload).
const FLEET_NOW_JS: &str = "var s = document.querySelector('#now [data-status]'); \
     var nk = document.querySelector('#now .nk'); \
     return [window.__walk === 1, s ? s.dataset.status : null, nk ? nk.textContent : null];";

/// The inbox's rows in order: id, fleet, its status word and N+k.
const INBOX_JS: &str = "return Array.from(document.querySelectorAll('#inbox tbody tr[data-id]')).map(function (r) { \
       var s = r.querySelector('.fleet-now [data-status]'); var nk = r.querySelector('.fleet-now .nk'); \
       return [Number(r.dataset.id), r.children[1].textContent.trim(), s ? s.dataset.status : null, \
               nk ? nk.textContent : null]; });";

/// The request page as an approver reads it: why, each machine and its payload, the checks
/// and where they stand against the Approve button.
const REQUEST_JS: &str = "var q = function (s) { return document.querySelector(s); }; \
     var approve = q('#approve'); var checks = q('#checks'); \
     return { \
       why: q('#why-deficit') ? q('#why-deficit').textContent : null, \
       evidence: q('#evidence pre') ? q('#evidence pre').textContent : null, \
       machines: Array.from(document.querySelectorAll('#plan-machines tbody tr')).map(function (r) { return r.querySelector('code').textContent; }), \
       payloads: Array.from(document.querySelectorAll('#what details.payload')).map(function (d) { \
         return [d.querySelector('summary').textContent, d.querySelector('pre').textContent]; }), \
       checks: Array.from(document.querySelectorAll('#checks li.check')).map(function (l) { return [l.dataset.check, l.dataset.verdict]; }), \
       checks_before_approve: !!(approve && checks && (checks.compareDocumentPosition(approve) & Node.DOCUMENT_POSITION_FOLLOWING)), \
       approve_disabled: approve ? approve.disabled : null, \
       monthly: q('#monthly-cost') ? q('#monthly-cost').textContent : null };";

/// The request's progress as the page polls it: state, each machine's status and join cell,
/// and the timeline's kinds in order.
const PROGRESS_JS: &str = "var p = document.querySelector('#progress'); \
     if (!p) return null; \
     return [p.dataset.state, \
       Array.from(p.querySelectorAll('#machines tr[data-machine]')).map(function (r) { \
         return [r.dataset.machine, r.querySelector('.machine-status').dataset.status, r.querySelector('.machine-joined').textContent]; }), \
       Array.from(p.querySelectorAll('#timeline tbody tr')).map(function (r) { return r.children[1].textContent; }), \
       p.getAttribute('hx-trigger'), window.__request === 1];";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    headroom_skip_browser,
    ignore = "HEADROOM_SKIP_BROWSER was set when the tests were built"
)]
async fn an_approver_walks_the_demo_from_deficit_to_a_joined_spare_in_the_browser() {
    let walk = demo_with_browser().await;
    let started = Instant::now();
    let detail = format!("/api/v1/fleets/{SHORT}");
    for fleet in [SHORT, SPARED] {
        until(
            started,
            &format!("{fleet}: healthy with its spare"),
            || async {
                let f = walk.get(&format!("/api/v1/fleets/{fleet}")).await;
                (f["status"] == "healthy").then_some(())
            },
        )
        .await;
    }

    // A person pre-stages a machine on the healthy fleet, before any deficit: older, and
    // expiring sooner, than the restore to come.
    let res = walk
        .client
        .post(walk.url("/api/v1/provisions"))
        .bearer_auth(&walk.operator_token)
        .json(
            &json!({"fleet": SPARED, "machine_config": "spare-fsn1", "count": 1,
                      "reason": "pre-stage a spare before Monday's migration"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let prestage = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    step(started, &format!("olga pre-staged #{prestage} on {SPARED}"));

    // The fleet page, opened before the deficit in its own window and never navigated again.
    let fleet_window = walk.signed_in("approver").await;
    fleet_window
        .goto(&walk.url(&format!("/fleets/{SHORT}")))
        .await
        .unwrap();
    fleet_window
        .wait()
        .for_element(Locator::Css("#now [data-status]"))
        .await
        .unwrap();
    fleet_window
        .execute("window.__walk = 1;", vec![])
        .await
        .unwrap();
    let before = fleet_window.execute(FLEET_NOW_JS, vec![]).await.unwrap();
    assert_eq!(
        before,
        json!([true, "healthy", "N+1 of N+1 required"]),
        "the fleet page before the deficit"
    );
    step(started, "fleet page open, healthy N+1");

    // A tenant takes demo's only spare: a deficit, and headroom's restore proposal.
    assert_eq!(walk.short.land_tenant(), Some(4));
    step(started, "a tenant landed on demo's spare");
    let proposal = until(started, "deficit → restore proposal by system", || async {
        walk.provisions(SHORT).await.first().cloned()
    })
    .await;
    assert_eq!(proposal["requester"], "system", "{proposal}");
    assert_eq!(proposal["state"], "pending_approval", "{proposal}");
    assert_eq!(
        proposal["count"], 1,
        "required − spare machines: {proposal}"
    );
    let id = proposal["id"].as_i64().unwrap();
    assert_eq!(walk.get(&detail).await["status"], "deficit");
    // The open fleet page follows by itself.
    until_js(
        &fleet_window,
        started,
        "fleet page shows the deficit, not reloaded",
        FLEET_NOW_JS,
        |v| v[1] == "deficit",
    )
    .await;
    assert_eq!(
        fleet_window.execute(FLEET_NOW_JS, vec![]).await.unwrap(),
        json!([true, "deficit", "N+0 of N+1 required"])
    );

    // The approver's inbox: the live restore first, each fleet's state beside its request.
    let ap = walk.signed_in("approver").await;
    ap.goto(&walk.url("/approvals")).await.unwrap();
    ap.wait().for_element(Locator::Css("#inbox")).await.unwrap();
    let rows = ap.execute(INBOX_JS, vec![]).await.unwrap();
    assert_eq!(
        rows,
        json!([
            [id, SHORT, "deficit", "N+0 of N+1 required"],
            [prestage, SPARED, "healthy", "N+1 of N+1 required"]
        ]),
        "the live restore sorts above the older pre-stage request"
    );
    assert_accessible(&ap, "the approvals inbox").await;
    screenshot(&ap, "walk-inbox").await;
    step(started, "inbox: the restore first, fleets' states shown");

    // The request page: why, what (each machine with its payload), the checks, Approve.
    ap.find(Locator::Css(&format!("#inbox a[href='/provisions/{id}']")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    ap.wait()
        .for_element(Locator::Css("#approve"))
        .await
        .unwrap();
    let page = ap.execute(REQUEST_JS, vec![]).await.unwrap();
    let why = page["why"].as_str().unwrap_or_default();
    assert!(
        why.contains("spare 0 of required 1"),
        "the why names the deficit: {page}"
    );
    assert!(
        page["evidence"].as_str().is_some_and(|e| e.contains('{')),
        "yubaba's evidence is shown: {page}"
    );
    let machines: Vec<String> = serde_json::from_value(page["machines"].clone()).unwrap();
    let payloads = page["payloads"].as_array().unwrap();
    assert_eq!(machines.len(), 1, "{page}");
    assert_eq!(
        payloads.len(),
        machines.len(),
        "a payload per machine: {page}"
    );
    for (name, payload) in machines.iter().zip(payloads) {
        assert!(
            payload[0].as_str().unwrap().contains(name.as_str()),
            "{page}"
        );
        assert!(
            payload[1].as_str().unwrap().contains("#cloud-config"),
            "{name}'s payload is shown: {page}"
        );
    }
    let checks: Vec<(String, String)> = serde_json::from_value(page["checks"].clone()).unwrap();
    let names: Vec<&str> = checks.iter().map(|(n, _)| n.as_str()).collect();
    for needed in ["pin", "ssh_keys", "max_restore_machines"] {
        assert!(names.contains(&needed), "check {needed} listed: {page}");
    }
    assert!(
        checks.iter().all(|(_, v)| v != "block"),
        "nothing blocks the demo's restore: {page}"
    );
    assert!(
        checks.iter().any(|(n, v)| n == "pin" && v == "pass"),
        "the demo's tarball was downloaded and matched its pin: {page}"
    );
    assert_eq!(
        page["checks_before_approve"], true,
        "the checks sit right before Approve: {page}"
    );
    assert_eq!(page["approve_disabled"], false, "{page}");
    eprintln!("        checks: {checks:?}");
    assert_accessible(&ap, "the request page awaiting approval").await;
    screenshot(&ap, "walk-request").await;
    step(started, "request page: why, payload, checks");

    // Approve with a comment; the confirmation repeats the count and the cost.
    let comment = "restoring demo's spare; tenant 4 took it";
    ap.find(Locator::Css("#f-comment"))
        .await
        .unwrap()
        .send_keys(comment)
        .await
        .unwrap();
    ap.find(Locator::Css("#approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    ap.wait()
        .for_element(Locator::Css("#confirm-question"))
        .await
        .unwrap();
    let question = crate::browser::text_of(&ap, "#confirm-question").await;
    let monthly = page["monthly"].as_str().unwrap();
    assert_eq!(
        question,
        format!("Approve 1 machine for {monthly}?"),
        "count and cost repeated"
    );
    assert_eq!(
        crate::browser::text_of(&ap, "#confirm-comment").await,
        comment
    );
    assert_accessible(&ap, "the approval's confirmation").await;
    screenshot(&ap, "walk-confirm").await;
    ap.find(Locator::Css("#confirm-approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    step(started, &format!("approved #{id} with a comment"));

    // The request page follows the run until the machine joined, without a reload.
    let request_path = format!("/provisions/{id}");
    until_js(
        &ap,
        started,
        "back on the request page",
        "return [location.pathname, !!document.querySelector('#progress'), \
                 !!document.querySelector('#confirm-question')];",
        |v| *v == json!([request_path, true, false]),
    )
    .await;
    ap.execute("window.__request = 1;", vec![]).await.unwrap();
    let executing = until_js(&ap, started, "request page: executing", PROGRESS_JS, |v| {
        v[0] != "approved"
    })
    .await;
    assert_ne!(executing[0], "failed", "{executing}");
    let done = until_js(
        &ap,
        started,
        "request page: succeeded (joined)",
        PROGRESS_JS,
        |v| v[0] == "succeeded" || v[0] == "failed",
    )
    .await;
    assert_eq!(done[0], "succeeded", "{done}");
    assert_eq!(done[4], true, "the page followed in place: {done}");
    assert_eq!(done[3], Value::Null, "polling stopped: {done}");
    let row = &done[1][0];
    assert_eq!(row[1], "created", "{done}");
    assert!(
        row[2].as_str().unwrap().contains("as member"),
        "the page shows the machine joined: {done}"
    );
    let kinds: Vec<String> = serde_json::from_value(done[2].clone()).unwrap();
    let at = |k: &str| kinds.iter().position(|x| x == k);
    assert!(
        matches!((at("awaiting_join"), at("joined")), (Some(a), Some(j)) if a < j),
        "created, then joined: {kinds:?}"
    );
    assert_accessible(&ap, "the finished request").await;
    screenshot(&ap, "walk-succeeded").await;

    // The API agrees: succeeded, each machine joined as the member its server became.
    let api = walk.get(&format!("/api/v1/provisions/{id}")).await;
    assert_eq!(api["state"], "succeeded", "{api}");
    let machine = &api["machines"][0];
    assert!(machine["joined_at"].as_str().is_some(), "{api}");
    let server = machine["server_id"].as_i64().unwrap();
    let member = machine["member_id"].as_u64().unwrap();
    assert!(
        walk.short
            .nodes()
            .iter()
            .any(|n| n.id == member && n.server_id == Some(server) && n.is_spare()),
        "joined as the spare its server became: {api}"
    );
    assert!(
        row[2]
            .as_str()
            .unwrap()
            .contains(&format!("as member {member}")),
        "{done}"
    );
    let audit = walk
        .get(&format!(
            "/api/v1/audit?action=provision.approved&target=provision:{id}"
        ))
        .await;
    let entry = &audit["items"][0];
    assert_eq!(entry["actor"], "approver", "{audit}");
    assert_eq!(entry["details"]["comment"], comment, "{audit}");
    step(
        started,
        "API: succeeded, joined_at, member_id; audit has the comment",
    );

    // The fleet page opened at the start: healthy again, in place.
    let healthy = until_js(
        &fleet_window,
        started,
        "fleet page healthy N+1 again, not reloaded",
        FLEET_NOW_JS,
        |v| v[1] == "healthy",
    )
    .await;
    assert_eq!(
        healthy,
        json!([true, "healthy", "N+1 of N+1 required"]),
        "the same page, updated in place"
    );
    assert_eq!(walk.get(&detail).await["status"], "healthy");
    assert_accessible(&fleet_window, "the fleet page").await;
    screenshot(&fleet_window, "walk-fleet-healthy").await;
    assert_no_csp_violation(&fleet_window, "the fleet page's window").await;
    assert_no_csp_violation(&ap, "the approver's walk").await;
    step(started, "walk done");

    walk.stop.send(true).unwrap();
    fleet_window.close().await.unwrap();
    ap.close().await.unwrap();
}
