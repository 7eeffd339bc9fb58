//! What a hostile fleet cannot do through its nodes' answers: unbounded or control-laden
//! errors, out-of-range numbers, redirects, huge or repeated memberships, flapping, oversized
//! evidence, a reserved user name, link-local addresses, dripping connections. Each test
//! either reproduced a finding of an attacker's pass over scraping and the deficit loop (the
//! doc comment says which, F1–F8) and pins its fix, or pins a defence that held.
//!
//! Loopback only: every fake node is a wiremock server or a TCP listener on 127.0.0.1. The
//! link-local and unspecified addresses below are only ever judged by the policy (asserted
//! refused by the pure check first, so a regression fails the assertion before any connect),
//! and names resolve through a table, never through DNS.

use std::net::IpAddr;
use std::time::Duration;

use headroom::auth::Caller;
use headroom::capacity::record::record;
use headroom::domain::capacity::{DeficitPolicy, Member, Observation, Sample, Source};
use headroom::domain::fleet::FleetSpec;
use headroom::domain::Role;
use headroom::outbound::policy::{check_resolved, check_url, AllowList, Hop, Purpose, Refusal};
use headroom::scraper::fetch::{self, GetError};
use headroom::scraper::{scrape_once, status, urls};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::TestApp;
use crate::runner::{caller, console, fleet};
use crate::scraper::spec_with;

const INTERVAL: Duration = Duration::from_secs(15);

fn spec(endpoints: &[String]) -> FleetSpec {
    spec_with(endpoints, json!({}))
}

fn leader_status(extra: Value) -> Value {
    let mut v = json!({
        "node_id": 1, "state": "Leader", "current_leader": 1, "current_term": 3,
        "membership_config": { "log_id": null, "membership": {
            "configs": [[1]], "nodes": { "1": { "addr": "127.0.0.1:1" } } } },
        "headroom": { "spare": 0, "required": 1 },
    });
    if let Value::Object(m) = extra {
        for (k, val) in m {
            v[k] = val;
        }
    }
    v
}

async fn serve(s: &MockServer, p: &str, t: ResponseTemplate) {
    Mock::given(method("GET"))
        .and(path(p))
        .respond_with(t)
        .mount(s)
        .await;
}

fn obs(spare: u32, required: u32) -> Observation {
    Observation {
        absorption: None,
        source: Source::Native,
        spare,
        required,
        leader_id: Some(1),
        leader_url: Some("http://127.0.0.1:7443".into()),
        term: Some(7),
        members: vec![Member::listed(1, "127.0.0.1:7443", true)],
        evidence: json!({ "headroom": { "spare": spare, "required": required } }),
    }
}

async fn feed(
    app: &TestApp,
    fleet: &str,
    outcome: impl Fn() -> Result<Observation, String>,
    n: usize,
) {
    let ctx = &app.state.ctx;
    for _ in 0..n {
        app.clock.advance(INTERVAL);
        let s = Sample {
            at: ctx.now(),
            latency_ms: 3,
            outcome: outcome(),
        };
        record(ctx, fleet, &s).await.expect("record");
    }
}

async fn scalar(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

// ------------------------------------------------------------------------------------------
// Findings
// ------------------------------------------------------------------------------------------

/// F1: a node's `nodes` key is copied verbatim into the error text (`field_err(format!(
/// "membership_config.membership.nodes.{key}"))`): a ~250 KB key with control characters and
/// markup becomes the sample's error, stored in `fleet_samples` on EVERY tick (and in
/// `fleet_status`, the dashboard card, the log line).
#[tokio::test]
async fn a_bad_node_key_stores_a_bounded_error_without_control_characters() {
    let app = console(|_| {}).await;
    fleet(&app.state.ctx, "prod", &[]).await;
    let node = MockServer::start().await;
    let key = format!(
        "x\n\u{1b}[31m<script>alert(1)</script>\u{202e}{}",
        "A".repeat(250_000)
    );
    let body = json!({
        "node_id": 1, "state": "Leader", "current_leader": 1,
        "membership_config": { "membership": { "configs": [[1]], "nodes": { key: { "addr": "h:1" } } } },
    });
    serve(
        &node,
        "/raft/status",
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    let ctx = &app.state.ctx;
    for _ in 0..3 {
        app.clock.advance(INTERVAL);
        let s = scrape_once(ctx, &spec(&[node.uri()])).await;
        record(ctx, "prod", &s).await.unwrap();
    }
    let stored = scalar(
        &app,
        "SELECT coalesce(sum(length(error)), 0) FROM fleet_samples",
    )
    .await;
    let longest: String =
        sqlx::query_scalar("SELECT error FROM fleet_samples ORDER BY length(error) DESC LIMIT 1")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(
        stored <= 3 * 1024,
        "3 ticks stored {stored} characters of error text (one tick: {})",
        longest.len()
    );
    assert!(
        !longest.chars().any(char::is_control),
        "control characters reach the stored error"
    );
}

/// F2: a native `spare` (or `required`) of 4294967295 passes the parser (it fits a u32) and
/// the chart's `highest + 1` overflows: a panic in debug builds, `y_top = 0` and NaN
/// coordinates in release. One hostile answer breaks the fleet page and its chart partial.
#[tokio::test]
async fn a_spare_of_u32_max_still_draws_the_chart() {
    let app = console(|_| {}).await;
    fleet(&app.state.ctx, "prod", &[]).await;
    feed(&app, "prod", || Ok(obs(u32::MAX, 1)), 3).await;
    let viewer = app.session_for(Role::Viewer).await;
    for p in ["/fleets/prod/chart?range=1h", "/fleets/prod"] {
        let res = app
            .client
            .get(app.url(p))
            .header("Cookie", &viewer.cookie)
            .send()
            .await;
        let res = match res {
            Ok(r) => r,
            Err(e) => panic!("{p}: no answer (the handler panicked?): {e}"),
        };
        assert_eq!(res.status(), StatusCode::OK, "{p}");
        let html = res.text().await.unwrap();
        assert!(!html.contains("NaN"), "{p}: NaN coordinates in the SVG");
    }
}

/// F3: the scrape client follows redirects (≤ 3, each judged by the policy, which allows
/// loopback and private addresses for scraping). A node, or anything answering on a fleet
/// endpoint or a published leader address, can therefore send headroom to ANY path and query
/// on any loopback/private host (not just `/raft/status`, `/node`, `/node/usage`), and the
/// first 200 characters of a non-2xx answer are shown to every viewer as the sample's error.
#[tokio::test]
async fn the_scraper_follows_no_redirect_to_another_path() {
    let app = TestApp::spawn().await;
    let (node, internal) = (MockServer::start().await, MockServer::start().await);
    let target = format!("{}/admin/flush?all=1", internal.uri());
    serve(
        &node,
        "/raft/status",
        ResponseTemplate::new(302).insert_header("Location", target.as_str()),
    )
    .await;
    serve(
        &internal,
        "/admin/flush",
        ResponseTemplate::new(403).set_body_string("internal-token=s3cr3t-visible-to-viewers"),
    )
    .await;
    let s = scrape_once(&app.state.ctx, &spec(&[node.uri()])).await;
    let hits = internal.received_requests().await.unwrap_or_default();
    let err = s.outcome.err().unwrap_or_default();
    assert!(
        hits.is_empty(),
        "the scraper fetched {:?} on an internal service; the sample says {err:?}",
        hits.iter().map(|r| r.url.to_string()).collect::<Vec<_>>()
    );
    assert!(!err.contains("s3cr3t"), "internal body echoed: {err}");
}

/// F4: derived mode asks EVERY member the leader publishes, with no cap on members and no
/// de-duplication of addresses: one answer (≤ 256 KiB, ~8,000 members) makes one tick fire
/// two GETs per member at any loopback/private `host:port` (a port scan run by the fleet),
/// and one idle node listed under many ids counts as many spares.
#[tokio::test]
async fn derived_mode_asks_a_bounded_set_of_distinct_members() {
    let app = TestApp::spawn().await;
    let (leader, idle) = (MockServer::start().await, MockServer::start().await);
    let members = 600;
    let mut nodes = serde_json::Map::new();
    for id in 2..2 + members {
        nodes.insert(
            id.to_string(),
            json!({ "addr": idle.address().to_string() }),
        );
    }
    nodes.insert("1".into(), json!({ "addr": leader.address().to_string() }));
    let body = json!({
        "node_id": 1, "state": "Leader", "current_leader": 1,
        "membership_config": { "membership": { "configs": [[1]], "nodes": nodes } },
    });
    serve(
        &leader,
        "/raft/status",
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    serve(
        &idle,
        "/node",
        ResponseTemplate::new(200).set_body_json(json!({"yah.allocatable.memory_mb": 1024})),
    )
    .await;
    serve(
        &idle,
        "/node/usage",
        ResponseTemplate::new(200).set_body_json(json!({"yah.workloads.count": 0})),
    )
    .await;
    let s = spec_with(
        &[leader.uri()],
        json!({ "required_override": 1, "scrape_timeout_secs": 30 }),
    );
    let sample = scrape_once(&app.state.ctx, &s).await;
    let asked = idle.received_requests().await.unwrap_or_default().len();
    let spare = sample.outcome.as_ref().map(|o| o.spare).unwrap_or(0);
    assert!(
        asked <= 2 * 64,
        "one tick sent {asked} requests to one loopback port for {members} published members"
    );
    assert!(
        spare <= 1,
        "one idle node listed {members} times counted as {spare} spares"
    );
}

/// F5: a flapping fleet (below for `enter_after`, healthy for `leave_after`, repeat) files a
/// fresh restore proposal on every cycle (each superseded), with no cool-down, and every
/// deficit keeps its evidence forever (no retention for `fleet_deficits`, plus a second copy
/// on the request's timeline). At the defaults (3/3 samples, 15 s) that is 960 proposals a
/// day per fleet for approvers to wade through.
///
/// Fixed: a deficit entered within `deficit_cooldown_minutes` (default 30) of the fleet's last
/// proposal being superseded by recovery files none at once (it notes the flapping); retention
/// deletes ended deficits after `rollups_hour_days`
/// (`deficit::retention_deletes_ended_deficits_and_keeps_the_requests_evidence`).
#[tokio::test]
async fn a_flapping_fleet_files_one_proposal_and_notes_each_later_cycle() {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 3,
            leave_after: 3,
        }
    })
    .await;
    fleet(&app.state.ctx, "prod", &[]).await;
    for _ in 0..10 {
        feed(&app, "prod", || Ok(obs(0, 2)), 3).await;
        feed(&app, "prod", || Ok(obs(2, 2)), 3).await;
    }
    let filed = scalar(&app, "SELECT count(*) FROM provisions WHERE fleet = 'prod'").await;
    let deficits = scalar(&app, "SELECT count(*) FROM fleet_deficits").await;
    assert_eq!(
        filed, 1,
        "15 minutes of flapping filed {filed} proposals ({deficits} deficits with evidence)"
    );
    // Every cycle is still a deficit on record, the later ones saying why nothing was filed.
    assert_eq!(deficits, 10);
    let flapping = scalar(
        &app,
        "SELECT count(*) FROM fleet_deficits
         WHERE provision_id IS NULL AND note LIKE 'flapping: request #%'",
    )
    .await;
    assert_eq!(flapping, 9);
}

/// F6: the stored evidence is not bounded by the scrape body cap: numbers such as `1e15`
/// (4 bytes) are re-serialised as `1000000000000000.0` (18 bytes), so a 256 KiB answer
/// becomes ~1 MB in `fleet_deficits.evidence`, and again in the request's timeline.
#[tokio::test]
async fn stored_evidence_stays_within_the_storage_bound() {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 1,
            leave_after: 1,
        }
    })
    .await;
    fleet(&app.state.ctx, "prod", &[]).await;
    let node = MockServer::start().await;
    // Sized from the cap, so the answer stays just under it if the cap changes.
    let numbers = vec!["1e15"; (fetch::BODY_CAP - 200) / 5].join(",");
    let body = format!(
        r#"{{"node_id":1,"state":"Leader","current_leader":1,"headroom":{{"spare":0,"required":1}},"x":[{numbers}]}}"#
    );
    assert!(body.len() < fetch::BODY_CAP);
    serve(
        &node,
        "/raft/status",
        ResponseTemplate::new(200).set_body_string(body.clone()),
    )
    .await;
    app.clock.advance(INTERVAL);
    let s = scrape_once(&app.state.ctx, &spec(&[node.uri()])).await;
    record(&app.state.ctx, "prod", &s).await.unwrap();
    let stored = scalar(&app, "SELECT max(length(evidence)) FROM fleet_deficits").await;
    let timeline = scalar(
        &app,
        "SELECT coalesce(max(length(details)), 0) FROM provision_events WHERE kind = 'evidence'",
    )
    .await;
    // Tightened from the body cap to the storage bound (16 KiB), which holds whatever the
    // scraper passes on (`deficit::a_huge_evidence_is_stored_as_its_numbers_…` feeds an
    // unbounded one straight to `record`).
    let cap = headroom::capacity::deficit::EVIDENCE_MAX_BYTES;
    assert!(
        stored as usize <= cap && (1..=cap as i64).contains(&timeline),
        "a {} byte answer stored {stored} bytes of deficit evidence and {timeline} on the timeline",
        body.len()
    );
}

/// F7: membership parsing is quadratic (`voters.contains(&id)` per node over a `configs` list
/// that may repeat ids): one 256 KiB answer with ~65k voter entries and ~6k nodes costs
/// hundreds of millions of comparisons, synchronously on a runtime worker, which the tick's
/// timeout cannot pre-empt.
///
/// Fixed by capping `configs` (≤ 2 sets of ≤ 256 ids) and `nodes` (≤ 256) before reading
/// them, and looking voters up in a set: the hostile answer is now refused at once (an error
/// sample) instead of parsed, and the largest answer accepted parses in linear time.
#[tokio::test]
async fn a_membership_over_256_nodes_is_refused_and_256_parse() {
    let voters = vec!["1"; 65_000].join(",");
    let nodes: Vec<String> = (10_000..16_000)
        .map(|id| format!(r#""{id}":{{"addr":"a"}}"#))
        .collect();
    let body = format!(
        r#"{{"node_id":1,"state":"Leader","current_leader":1,"membership_config":{{"membership":{{"configs":[[{voters}]],"nodes":{{{}}}}}}}}}"#,
        nodes.join(",")
    );
    assert!(body.len() < fetch::BODY_CAP, "{}", body.len());
    // Refused by the cap, named in the error, before any member is looked up: the cost is
    // bounded by construction, so no wall-clock bound (which would flake on a loaded machine).
    let refused = status::parse(200, body.as_bytes()).expect_err("refused by its size");
    assert!(refused.to_string().contains("at most 256"), "{refused}");
    // The largest membership accepted: two full voter sets and 256 nodes.
    let set = (1..=256)
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let nodes: Vec<String> = (1..=256)
        .map(|id| format!(r#""{id}":{{"addr":"a"}}"#))
        .collect();
    let body = format!(
        r#"{{"node_id":1,"state":"Leader","current_leader":1,"membership_config":{{"membership":{{"configs":[[{set}],[{set}]],"nodes":{{{}}}}}}}}}"#,
        nodes.join(",")
    );
    let parsed = status::parse(200, body.as_bytes()).expect("parses");
    assert_eq!(parsed.members.len(), 256);
    assert!(parsed.members.iter().all(|m| m.voter));
}

/// F8: "system" is an ordinary username, and a request's requester is compared by name: an
/// operator called `system` counts as the requester of every headroom proposal, so may
/// cancel them (an operator may cancel only their own; others need an approver).
///
/// Fixed: `system` and `anonymous` (the console's own actors) are reserved usernames.
#[tokio::test]
async fn no_user_can_be_named_system_and_cancel_proposals_as_the_console() {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 1,
            leave_after: 1,
        }
    })
    .await;
    let ctx = &app.state.ctx;
    fleet(ctx, "prod", &[]).await;
    let created = headroom::auth::users::create_user(
        ctx,
        &Caller::system(),
        &headroom::auth::users::NewUserInput {
            username: "system".into(),
            role: "operator".into(),
            password: crate::helpers::PASSWORD.into(),
        },
    )
    .await;
    if let Err(e) = created {
        // The name is reserved: fixed. Any other refusal would leave the finding untested.
        assert!(
            e.to_string().starts_with("username: is reserved"),
            "refused for another reason: {e}"
        );
        return;
    }
    feed(&app, "prod", || Ok(obs(0, 1)), 1).await;
    let id = scalar(&app, "SELECT id FROM provisions WHERE requester = 'system'").await;
    let r =
        headroom::provisioning::requests::cancel(ctx, &caller("system", Role::Operator), id).await;
    assert!(
        r.is_err(),
        "an operator named `system` cancelled headroom's proposal #{id}"
    );
}

// ------------------------------------------------------------------------------------------
// Defences
// ------------------------------------------------------------------------------------------

#[test]
fn member_addresses_that_are_not_plain_host_port_are_refused() {
    let given = "http://10.0.0.1:7443";
    for bad in [
        "[fe80::1%eth0]:7443",
        "[fe80::1%25eth0]:7443",
        "user@127.0.0.1:7443",
        "user:pw@10.0.0.2:7443",
        "10.0.0.2:7443/../x?",
        "10.0.0.2:7443/admin",
        "http://10.0.0.2:7443",
        "10.0.0.2:7443?x=1",
        "10.0.0.2:7443#f",
        "10.0.0.2:7443\r\nHost: evil",
        "10.0.0.2:7443\\x",
        "10.0.0.2:99999",
        "",
    ] {
        assert_eq!(urls::member_base(bad, given), None, "{bad:?}");
    }
    // The unspecified forms fall back to the given endpoint (never 0.0.0.0 itself).
    for unspecified in ["0.0.0.0:7443", "[::]:7443", "0:7443"] {
        assert_eq!(
            urls::member_base(unspecified, given).as_deref(),
            Some(given),
            "{unspecified}"
        );
    }
    // The scheme is always the endpoint's: an addr cannot switch it.
    assert_eq!(
        urls::member_base("10.0.0.2:443", "https://10.0.0.1:7443").as_deref(),
        Some("https://10.0.0.2")
    );
}

/// Every spelling of the metadata address a hostile node can publish is refused by the scrape
/// policy. Judged as the pure decision only: no test hands a non-loopback address to a real
/// client, even one expected to refuse it. That the client consults this decision before it
/// connects is shown on loopback (`outbound.rs`, `webhooks.rs`).
#[test]
fn link_local_and_unspecified_leader_addresses_are_refused_by_the_scrape_policy() {
    let none = AllowList::default();
    for addr in [
        "169.254.169.254:80",
        "[::ffff:169.254.169.254]:80",
        "[::ffff:a9fe:a9fe]:80",
        "[64:ff9b::a9fe:a9fe]:80",
        "[::169.254.169.254]:80",
        "2852039166:80",
        "0xa9.0xfe.0xa9.0xfe:80",
        "%31%36%39.254.169.254:80",
        "[fe80::1]:80",
        "[::ffff:0.0.0.0]:80",
        "0.0.0.1:80",
    ] {
        let Some(base) = urls::member_base(addr, "http://127.0.0.1:1") else {
            continue; // refused as an address already
        };
        let url = format!("{base}/raft/status");
        let parsed = url::Url::parse(&url).unwrap();
        match check_url(Purpose::Scrape, &none, &parsed, Hop::First) {
            Err(Refusal::LinkLocal | Refusal::Unspecified) => {}
            other => panic!("{addr} → {url}: {other:?}"),
        }
    }
}

/// A member published by NAME that resolves to link-local (alone, or beside a loopback
/// address: rebinding) is refused by the decision the client's resolver applies to every
/// answer, before any connect (`check_resolved`; the resolver's use of it is shown on loopback
/// in `outbound.rs`).
#[test]
fn a_name_resolving_to_link_local_is_refused_in_resolution() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    for (name, answer) in [
        ("meta.hostile-node.invalid", vec![ip("169.254.169.254")]),
        (
            "rebind.hostile-node.invalid",
            vec![ip("127.0.0.1"), ip("169.254.169.254")],
        ),
        (
            "v6.hostile-node.invalid",
            vec![ip("::ffff:169.254.169.254")],
        ),
    ] {
        assert!(urls::member_base(&format!("{name}:80"), "http://127.0.0.1:1").is_some());
        assert_eq!(
            check_resolved(Purpose::Scrape, &AllowList::default(), name, &answer),
            Err(Refusal::LinkLocal),
            "{name}"
        );
    }
}

/// A redirect is never followed: the scrape client follows none at all (F3), so the 302
/// itself is the error sample and its target is never asked. The target here is a loopback
/// node that counts what it gets; that a redirect to the metadata address would be refused
/// anyway is the pure decision below.
#[tokio::test]
async fn a_redirect_is_not_followed_and_one_to_link_local_is_refused() {
    assert!(check_url(
        Purpose::Scrape,
        &AllowList::default(),
        &url::Url::parse("http://169.254.169.254/latest/meta-data/").unwrap(),
        Hop::Redirect
    )
    .is_err());
    let app = TestApp::spawn().await;
    let node = MockServer::start().await;
    let target = MockServer::start().await;
    serve(
        &node,
        "/raft/status",
        ResponseTemplate::new(302)
            .insert_header("Location", format!("{}/latest/meta-data/", target.uri())),
    )
    .await;
    let s = scrape_once(&app.state.ctx, &spec(&[node.uri()])).await;
    let err = s.outcome.expect_err("an error sample");
    assert_eq!(err, "HTTP 302: redirects are not followed");
    assert!(target
        .received_requests()
        .await
        .unwrap_or_default()
        .is_empty());
}

/// A node that sends its headers and then drips one byte every 200 ms cannot hold a fetch
/// past the tick's deadline; a chunked body over the cap is cut at the cap.
#[tokio::test]
async fn a_dripping_or_endless_node_is_cut_by_the_deadline_and_the_cap() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let endless = buf.starts_with(b"GET /endless");
                let head = if endless {
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                } else {
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                };
                let _ = sock.write_all(head.as_bytes()).await;
                loop {
                    let r = if endless {
                        sock.write_all(b"4000\r\n").await.ok();
                        sock.write_all(&[b' '; 0x4000]).await.ok();
                        sock.write_all(b"\r\n").await
                    } else {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        sock.write_all(b" ").await
                    };
                    if r.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let app = TestApp::spawn().await;
    let started = tokio::time::Instant::now();
    let r = fetch::get(
        &app.state.ctx.scrape_client,
        &format!("http://{addr}/raft/status"),
        started + Duration::from_secs(1),
    )
    .await;
    assert_eq!(r, Err(GetError::TimedOut));
    // The whole drip would take 20,000 s; anything near the 1 s deadline proves the cut, and
    // 10 s leaves a loaded machine room without letting an uncut fetch pass.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let r = fetch::get(
        &app.state.ctx.scrape_client,
        &format!("http://{addr}/endless"),
        tokio::time::Instant::now() + Duration::from_secs(5),
    )
    .await;
    assert_eq!(r, Err(GetError::TooLarge));
}

/// Deep nesting, numbers out of range, wrong types: typed errors, no panic, no stack
/// overflow; the 503 text is cleaned and capped.
#[test]
fn hostile_status_bodies_are_typed_errors() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(status::parse(200, deep.as_bytes()).is_err());
    let deep_inside = format!(
        r#"{{"node_id":1,"state":"Leader","x":{}{}}}"#,
        "{\"a\":".repeat(10_000),
        "1}".repeat(10_000)
    );
    assert!(status::parse(200, deep_inside.as_bytes()).is_err());
    for h in [
        json!({"spare": -1, "required": 1}),
        json!({"spare": 4_294_967_296_u64, "required": 1}),
        json!({"spare": 1.5, "required": 1}),
        json!({"spare": "1", "required": 1}),
        json!({"spare": 1e0, "required": 1}),
        json!({"spare": 1}),
    ] {
        let body = leader_status(json!({ "headroom": h.clone() }));
        assert!(
            status::parse(200, body.to_string().as_bytes()).is_err(),
            "{h} accepted"
        );
    }
    for id in [
        json!(-1),
        json!("18446744073709551616"),
        json!(" 1"),
        json!(1.0),
    ] {
        let body = leader_status(json!({ "current_leader": id.clone() }));
        assert!(
            status::parse(200, body.to_string().as_bytes()).is_err(),
            "{id}"
        );
    }
    let text = format!("\u{1b}[31m<b>{}", "x".repeat(10_000));
    let e = status::parse(503, text.as_bytes()).unwrap_err().to_string();
    assert!(
        e.chars().count() < 260 && !e.chars().any(char::is_control),
        "{e}"
    );
}

/// A hostile `required` of u32::MAX files one request of at most `COUNT_MAX` machines, for
/// the fleet's own restore config, as `system`, awaiting a human approver.
#[tokio::test]
async fn a_huge_required_files_one_capped_proposal_for_the_fleets_config() {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 2,
            leave_after: 2,
        }
    })
    .await;
    fleet(&app.state.ctx, "prod", &[]).await;
    feed(&app, "prod", || Ok(obs(0, u32::MAX)), 10).await;
    let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT requester, machine_config, state, count FROM provisions WHERE fleet = 'prod'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [(
            "system".to_owned(),
            "spare-fsn1".to_owned(),
            "pending_approval".to_owned(),
            i64::from(headroom::provisioning::COUNT_MAX)
        )]
    );
}

/// Recovery supersedes only a proposal still awaiting approval: once a person approved it,
/// a fleet that recovers (or flaps) cannot take it back.
#[tokio::test]
async fn recovery_does_not_supersede_an_approved_proposal() {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 1,
            leave_after: 1,
        }
    })
    .await;
    let ctx = &app.state.ctx;
    fleet(ctx, "prod", &[]).await;
    feed(&app, "prod", || Ok(obs(0, 1)), 1).await;
    let id = scalar(&app, "SELECT id FROM provisions WHERE requester = 'system'").await;
    headroom::provisioning::requests::approve(ctx, &caller("abe", Role::Approver), id, None)
        .await
        .expect("abe approves");
    feed(&app, "prod", || Ok(obs(1, 1)), 3).await;
    let state: String = sqlx::query_scalar("SELECT state FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_ne!(state, "superseded");
}

/// The headroom API's query: huge ranges, tiny steps, junk and unknown keys are refused
/// before any read; a viewer may read, an anonymous caller may not.
#[tokio::test]
async fn headroom_api_bounds_its_query() {
    let app = console(|_| {}).await;
    fleet(&app.state.ctx, "prod", &[]).await;
    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    let get = |q: &str| {
        app.client
            .get(app.url(&format!("/api/v1/fleets/prod/headroom{q}")))
            .bearer_auth(&token)
            .send()
    };
    for (q, want) in [
        ("?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", 422),
        (
            "?from=2026-01-01T00:00:00Z&to=2026-12-01T00:00:00Z&step=5",
            422,
        ),
        ("?step=0", 422),
        ("?step=-5", 422),
        ("?step=NaN", 422),
        ("?step=1e9", 422),
        ("?step=99999999999999999999999", 422),
        ("?from=2026-12-02T10:00:00Z&to=2026-12-02T09:00:00Z", 422),
        ("?from=2026-12-02T10:00:00%2B99:00", 422),
        ("?setp=60", 400),
        ("", 200),
        ("?step=5", 200),
    ] {
        let res = get(q).await.unwrap();
        assert_eq!(res.status().as_u16(), want, "{q}");
        if want == 200 {
            let v: Value = res.json().await.unwrap();
            assert!(v["points"].as_array().unwrap().len() <= 2000);
        }
    }
    let anon = app
        .client
        .get(app.url("/api/v1/fleets/prod/headroom"))
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), StatusCode::UNAUTHORIZED);
}

/// Markup in the chart partial's `range` is escaped in the 400 page; an unknown fleet is 404.
#[tokio::test]
async fn chart_partial_escapes_its_range_and_refuses_unknown_fleets() {
    let app = console(|_| {}).await;
    fleet(&app.state.ctx, "prod", &[]).await;
    let viewer = app.session_for(Role::Viewer).await;
    let res = app
        .get(
            "/fleets/prod/chart?range=%3Cscript%3Ealert(1)%3C/script%3E",
            &viewer,
        )
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let html = res.text().await.unwrap();
    assert!(!html.contains("<script>alert(1)"), "{html}");
    let res = app.get("/fleets/nope/chart?range=1h", &viewer).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

/// Fleet-supplied strings (member addresses, the error text) are escaped on the fleet page and
/// the dashboard cards.
#[tokio::test]
async fn fleet_supplied_strings_are_escaped_on_pages() {
    let app = console(|_| {}).await;
    fleet(&app.state.ctx, "prod", &[]).await;
    let evil = "<img src=x onerror=alert(1)>:7443";
    feed(
        &app,
        "prod",
        || {
            let mut o = obs(1, 1);
            o.members.push(Member::listed(9, evil, false));
            Ok(o)
        },
        1,
    )
    .await;
    feed(
        &app,
        "prod",
        || Err("HTTP 503: <script>alert(2)</script>".into()),
        1,
    )
    .await;
    let viewer = app.session_for(Role::Viewer).await;
    for p in ["/fleets/prod", "/dashboard/cards", "/"] {
        let html = app.get(p, &viewer).await.text().await.unwrap();
        assert!(!html.contains("<img src=x"), "{p}");
        assert!(!html.contains("<script>alert(2)"), "{p}");
    }
}
