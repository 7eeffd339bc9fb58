//! The scraper against fake yubaba nodes on loopback: one wiremock server per node, whose
//! published `addr` is the server's own `127.0.0.1:port`, so following the leader and asking
//! each member are real HTTP hops. Nothing here leaves loopback: the one non-loopback address
//! (link-local) is refused by the outbound policy before any connect.

use std::sync::Arc;
use std::time::Duration;

use headroom::domain::capacity::{Observation, Sample, Source};
use headroom::domain::fleet::{FleetInput, FleetSpec};
use headroom::domain::Role;
use headroom::provider::fake::Fake;
use headroom::provisioning::{requests, runner, NewRequest};
use headroom::scraper::{scrape_once, ScrapeStats};
use serde_json::{json, Value};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{DeadPort, TestApp};
use crate::runner::{caller, console, ctx_with};

/// An example yubaba answer committed with the repo.
fn fixture(name: &str) -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read(root.join("tests/fixtures/yubaba").join(name))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// `host:port` of a fake node, as yubaba publishes it.
pub(crate) fn addr(s: &MockServer) -> String {
    s.address().to_string()
}

/// A `/raft/status` body: `node` as seen by itself, `leader` the one it knows, `members` every
/// node (all voters), `headroom` the section (`None` leaves the key out).
pub(crate) fn status(
    node: u64,
    leader: Option<u64>,
    term: u64,
    members: &[(u64, String)],
    headroom: Option<Value>,
) -> Value {
    let nodes: serde_json::Map<String, Value> = members
        .iter()
        .map(|(id, a)| (id.to_string(), json!({ "addr": a })))
        .collect();
    let voters: Vec<u64> = members.iter().map(|(id, _)| *id).collect();
    let mut v = json!({
        "node_id": node,
        "state": if leader == Some(node) { "Leader" } else { "Follower" },
        "current_leader": leader,
        "current_term": term,
        "last_log_index": 10,
        "last_applied": null,
        "membership_config": { "log_id": null, "membership": { "configs": [voters], "nodes": nodes } },
    });
    if let Some(h) = headroom {
        v["headroom"] = h;
    }
    v
}

/// Answers `/raft/status` with `body`.
pub(crate) async fn serve_status(s: &MockServer, body: Value) {
    Mock::given(method("GET"))
        .and(path("/raft/status"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(s)
        .await;
}

async fn serve_raw(s: &MockServer, code: u16, body: Vec<u8>) {
    Mock::given(method("GET"))
        .and(path("/raft/status"))
        .respond_with(ResponseTemplate::new(code).set_body_bytes(body))
        .mount(s)
        .await;
}

/// A fleet spec for `scrape_once` (not stored: the native paths read nothing else).
fn spec(endpoints: &[String], timeout_secs: u32) -> FleetSpec {
    spec_with(endpoints, json!({ "scrape_timeout_secs": timeout_secs }))
}

/// A fleet spec as storage hands it over, with `changes` over the defaults: endpoints stay
/// exactly as written (unnormalised, even repeated), as a scrape of an older spec sees them.
pub fn spec_with(endpoints: &[String], changes: Value) -> FleetSpec {
    let mut stored = json!({
        "name": "prod",
        "endpoints": endpoints,
        "restore_machine_config": "spare-fsn1",
        "approvals_required": 1,
        "approval_ttl_hours": 4,
        "scrape_interval_secs": 15,
        "scrape_timeout_secs": 5,
        "required_override": null,
        "secrets": {},
        "max_restore_machines": 2,
    });
    edit(&mut stored, changes);
    FleetSpec::from_stored("prod", &stored.to_string()).unwrap()
}

/// `spec` with `changes` applied, as if its stored JSON had been edited.
pub fn edited(spec: &FleetSpec, changes: Value) -> FleetSpec {
    let mut stored = serde_json::to_value(spec).unwrap();
    edit(&mut stored, changes);
    FleetSpec::from_stored(spec.name(), &stored.to_string()).unwrap()
}

fn edit(stored: &mut Value, changes: Value) {
    if let (Some(s), Value::Object(c)) = (stored.as_object_mut(), changes) {
        s.extend(c);
    }
}

fn ok(sample: &Sample) -> &Observation {
    sample
        .outcome
        .as_ref()
        .unwrap_or_else(|e| panic!("expected numbers, got the error {e:?}"))
}

fn err(sample: &Sample) -> &str {
    match &sample.outcome {
        Err(e) => e,
        Ok(o) => panic!("expected an error sample, got {o:?}"),
    }
}

#[tokio::test]
async fn a_leader_change_is_followed_from_a_follower_endpoint() {
    let app = TestApp::spawn().await;
    let ctx = &app.state.ctx;
    let (n1, n2, n3) = (
        MockServer::start().await,
        MockServer::start().await,
        MockServer::start().await,
    );
    let members = [(1, addr(&n1)), (2, addr(&n2)), (3, addr(&n3))];
    let fleet = spec(&[n3.uri()], 3);

    // Node 1 leads; the endpoint is follower 3.
    serve_status(&n3, status(3, Some(1), 3, &members, Some(Value::Null))).await;
    serve_status(
        &n1,
        status(
            1,
            Some(1),
            3,
            &members,
            Some(json!({"spare": 1, "required": 1, "zones": 2})),
        ),
    )
    .await;
    serve_status(&n2, status(2, Some(1), 3, &members, Some(Value::Null))).await;
    let first = scrape_once(ctx, &fleet).await;
    let o = ok(&first);
    assert_eq!((o.leader_id, o.term), (Some(1), Some(3)));
    assert_eq!(o.leader_url.as_deref(), Some(n1.uri().as_str()));
    assert_eq!((o.source, o.spare, o.required), (Source::Native, 1, 1));
    assert_eq!(
        o.evidence["headroom"]["zones"], 2,
        "the raw section is kept"
    );
    assert_eq!(o.voters(), 3);

    // Leadership moves to node 2 in term 4.
    for n in [&n1, &n2, &n3] {
        n.reset().await;
    }
    serve_status(&n3, status(3, Some(2), 4, &members, Some(Value::Null))).await;
    serve_status(&n1, status(1, Some(2), 4, &members, Some(Value::Null))).await;
    serve_status(
        &n2,
        status(
            2,
            Some(2),
            4,
            &members,
            Some(json!({"spare": 0, "required": 1})),
        ),
    )
    .await;
    let second = scrape_once(ctx, &fleet).await;
    let o = ok(&second);
    assert_eq!((o.leader_id, o.term), (Some(2), Some(4)));
    assert_eq!(o.leader_url.as_deref(), Some(n2.uri().as_str()));
    assert_eq!((o.spare, o.required), (0, 1));
    assert_eq!(
        status_requests(&n1).await,
        0,
        "the old leader is not asked for the status"
    );
}

/// How long a hanging node takes to answer: far beyond any scrape timeout.
const NODE_HANGS_FOR: Duration = Duration::from_secs(30);

#[tokio::test]
async fn an_endpoint_going_down_makes_a_gap_and_recovery_resumes() {
    let app = TestApp::spawn().await;
    let ctx = &app.state.ctx;
    let n1 = MockServer::start().await;
    let members = [(1, addr(&n1))];
    let healthy = status(
        1,
        Some(1),
        3,
        &members,
        Some(json!({"spare": 2, "required": 1})),
    );
    let fleet = spec(&[n1.uri()], 1);

    serve_status(&n1, healthy.clone()).await;
    assert_eq!(ok(&scrape_once(ctx, &fleet).await).spare, 2);

    n1.reset().await;
    serve_raw(&n1, 500, b"internal error".to_vec()).await;
    // The body is the server's, not shown: the code only.
    assert_eq!(err(&scrape_once(ctx, &fleet).await), "HTTP 500");

    // A node that hangs past the fleet's timeout: the tick ends at its deadline.
    n1.reset().await;
    Mock::given(method("GET"))
        .and(path("/raft/status"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(healthy.clone())
                .set_delay(NODE_HANGS_FOR),
        )
        .mount(&n1)
        .await;
    let hung = scrape_once(ctx, &fleet).await;
    assert_eq!(err(&hung), "timed out");
    // Bounds a loaded machine cannot break: not before the fleet's 1 s timeout, and before
    // the node would have answered (only the timeout can have ended it).
    assert!(hung.latency_ms >= 900, "latency {}", hung.latency_ms);
    assert!(
        u128::from(hung.latency_ms) < NODE_HANGS_FOR.as_millis(),
        "latency {}",
        hung.latency_ms
    );
    // The deadline is the fleet's own: with a 2 s timeout the tick lasts at least 2 s.
    let hung_longer = scrape_once(ctx, &spec(&[n1.uri()], 2)).await;
    assert_eq!(err(&hung_longer), "timed out");
    assert!(
        (1_900..NODE_HANGS_FOR.as_millis() as u64).contains(&hung_longer.latency_ms),
        "latency {}",
        hung_longer.latency_ms
    );

    // It recovers.
    n1.reset().await;
    serve_status(&n1, healthy).await;
    let back = scrape_once(ctx, &fleet).await;
    assert_eq!(ok(&back).spare, 2);

    // A node that is gone: nothing listens any more.
    let dead = DeadPort::bind();
    let gone = format!("http://127.0.0.1:{}", dead.port());
    assert_eq!(
        err(&scrape_once(ctx, &spec(std::slice::from_ref(&gone), 1)).await),
        "could not connect"
    );

    // With a second endpoint, the dead first one is passed over.
    let o = ok(&scrape_once(ctx, &spec(&[gone.clone(), n1.uri()], 2)).await).clone();
    assert_eq!(o.leader_url.as_deref(), Some(n1.uri().as_str()));
    let both_dead = scrape_once(ctx, &spec(&[gone.clone(), gone], 1)).await;
    assert_eq!(
        err(&both_dead),
        "could not connect (and 1 other endpoints failed)"
    );
}

/// A member that answers `/node` with `node` and `/node/usage?window_ms=500` with `usage`.
async fn member(node: Value, usage: Value) -> MockServer {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/node"))
        .respond_with(ResponseTemplate::new(200).set_body_json(node))
        .mount(&s)
        .await;
    // Only with the window: without it the node measures against whoever polled last.
    Mock::given(method("GET"))
        .and(path("/node/usage"))
        .and(query_param("window_ms", "500"))
        .respond_with(ResponseTemplate::new(200).set_body_json(usage))
        .mount(&s)
        .await;
    s
}

#[tokio::test]
async fn derived_mode_counts_idle_members_with_published_capacity_and_regions_set_required() {
    let app = console(|_| {}).await;
    let fake = Fake::new();
    let ctx = ctx_with(&app, Arc::new(fake.clone()));
    let node = fixture_json("node.json");
    let idle = fixture_json("node-usage-idle.json");
    let busy = fixture_json("node-usage-busy.json");
    let mut unpublished = node.clone();
    unpublished
        .as_object_mut()
        .unwrap()
        .remove("yah.allocatable.memory_mb");

    // Leader 1 is busy, 2 and 3 idle with capacity, 4 idle without capacity, 5 unreachable.
    let n1 = member(node.clone(), busy).await;
    let n2 = member(node.clone(), idle.clone()).await;
    let n3 = member(node.clone(), idle.clone()).await;
    let n4 = member(unpublished, idle).await;
    let dead = DeadPort::bind();
    let members = [
        (1, addr(&n1)),
        (2, addr(&n2)),
        (3, addr(&n3)),
        (4, addr(&n4)),
        (5, format!("127.0.0.1:{}", dead.port())),
    ];
    // No `headroom` key: an older build.
    serve_status(&n1, status(1, Some(1), 3, &members, None)).await;

    let input = FleetInput {
        name: "prod".into(),
        endpoints: vec![n1.uri()],
        restore_machine_config: "spare-fsn1".into(),
        scrape_timeout_secs: Some(json!(3)),
        ..FleetInput::default()
    };
    headroom::fleets::create(&ctx, &headroom::auth::Caller::system(), &input)
        .await
        .unwrap();
    let stored = || async {
        headroom::fleets::get(&ctx, &headroom::auth::Caller::system(), "prod")
            .await
            .unwrap()
            .spec
    };

    let sample = scrape_once(&ctx, &stored().await).await;
    let o = ok(&sample);
    assert_eq!(o.source, Source::Derived);
    assert_eq!(o.spare, 2, "members 2 and 3");
    assert_eq!(o.required, 1, "one region: eu-central");
    assert_eq!(o.members.len(), 5);
    // Each member keeps what it answered, which its role is read from; the unreachable one
    // keeps no reading, so it is never taken for a spare.
    let by_id = |id: u64| o.members.iter().find(|m| m.id == id).unwrap();
    assert_eq!(by_id(1).role_words(), "carrying 3 tenants");
    assert_eq!(
        by_id(2).role(),
        headroom::domain::capacity::MemberRole::Spare
    );
    assert_eq!(
        by_id(3).role(),
        headroom::domain::capacity::MemberRole::Spare
    );
    assert_eq!(
        (by_id(4).tenants, by_id(4).capacity_published),
        (Some(0), Some(false))
    );
    assert_eq!(
        (by_id(5).tenants, by_id(5).capacity_published),
        (None, None)
    );
    assert_ne!(
        by_id(5).role(),
        headroom::domain::capacity::MemberRole::Spare
    );

    // A restore that succeeded with a config in a second region makes it N+2.
    let mut second = headroom::domain::machine::MachineInput {
        name: "spare-hel1".into(),
        provider: "simulated".into(),
        location: "hel1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-north".into(),
        zone: "hel1-dc2".into(),
        yubaba_channel: "stable".into(),
        yubaba_url: "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        ..Default::default()
    };
    second.mesh_tags = vec!["tag:spare".into()];
    headroom::machine_setup::configs::create(&ctx, &headroom::auth::Caller::system(), &second)
        .await
        .unwrap();
    // A request still open does not count: only machines that exist do.
    let request = NewRequest {
        fleet: "prod".into(),
        machine_config: "spare-hel1".into(),
        template: None,
        count: 1,
        reason: "a spare in the second region".into(),
    };
    let id = requests::create(&ctx, &caller("olga", Role::Operator), &request)
        .await
        .unwrap()
        .id;
    assert_eq!(ok(&scrape_once(&ctx, &stored().await).await).required, 1);
    requests::approve(&ctx, &caller("abe", Role::Approver), id, None)
        .await
        .unwrap();
    assert!(runner::run_once(&ctx).await.unwrap());
    let sample = scrape_once(&ctx, &stored().await).await;
    assert_eq!((ok(&sample).spare, ok(&sample).required), (2, 2));

    // The override wins over both rules.
    let over = edited(&stored().await, json!({ "required_override": 3 }));
    assert_eq!(ok(&scrape_once(&ctx, &over).await).required, 3);
}

#[tokio::test]
async fn declared_member_regions_decide_derived_required_over_the_configs() {
    let app = console(|_| {}).await;
    let ctx = &app.state.ctx;
    let node = fixture_json("node.json");
    let idle = fixture_json("node-usage-idle.json");
    let (n1, n2) = (
        member(node.clone(), idle.clone()).await,
        member(node, idle).await,
    );
    let members = [(1, addr(&n1)), (2, addr(&n2))];
    let input = FleetInput {
        name: "prod".into(),
        endpoints: vec![n1.uri()],
        restore_machine_config: "spare-fsn1".into(),
        scrape_timeout_secs: Some(json!(3)),
        ..FleetInput::default()
    };
    headroom::fleets::create(ctx, &headroom::auth::Caller::system(), &input)
        .await
        .unwrap();
    let spec = headroom::fleets::get(ctx, &headroom::auth::Caller::system(), "prod")
        .await
        .unwrap()
        .spec;
    // The fleet's one config is in one region. Members that all declare theirs (yubaba
    // 0.8.48 names them in a top-level `members` map) decide by yubaba's own rule: two
    // declared regions are N+2, one is N+1. None declared leaves the configs' one region; a
    // half-labelled fleet takes the larger count. Each answer is mounted over the last.
    for (priority, declared, required) in [
        (4, json!([null, null]), 1),
        (3, json!(["eu-central", "eu-north"]), 2),
        (2, json!(["eu-north", "eu-north"]), 1),
        (1, json!([null, "eu-north"]), 1),
    ] {
        let mut body = status(1, Some(1), 3, &members, None);
        body["members"] = json!({
            "1": { "addr": addr(&n1), "region": declared[0] },
            "2": { "addr": addr(&n2), "region": declared[1] },
        });
        Mock::given(method("GET"))
            .and(path("/raft/status"))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .with_priority(priority)
            .mount(&n1)
            .await;
        let sample = scrape_once(ctx, &spec).await;
        assert_eq!(ok(&sample).source, Source::Derived);
        assert_eq!(ok(&sample).required, required, "{declared}");
    }
}

#[tokio::test]
async fn an_endpoint_that_knows_no_leader_is_passed_over_for_the_next_one() {
    let app = TestApp::spawn().await;
    let ctx = &app.state.ctx;
    let (learner, follower, leader) = (
        MockServer::start().await,
        MockServer::start().await,
        MockServer::start().await,
    );
    let members = [(1, addr(&leader)), (2, addr(&follower))];
    // An uninitialised learner, and a follower between elections (`current_leader: null`).
    serve_status(&learner, fixture_json("raft-status-uninitialised.json")).await;
    serve_status(&follower, status(2, None, 4, &members, Some(Value::Null))).await;
    serve_status(
        &leader,
        status(
            1,
            Some(1),
            4,
            &members,
            Some(json!({"spare": 2, "required": 1})),
        ),
    )
    .await;

    let fleet = spec(&[learner.uri(), follower.uri(), leader.uri()], 3);
    let sample = scrape_once(ctx, &fleet).await;
    let o = ok(&sample);
    assert_eq!(o.leader_id, Some(1));
    assert_eq!(o.leader_url.as_deref(), Some(leader.uri().as_str()));
    assert_eq!((o.spare, o.required), (2, 1));
    for n in [&learner, &follower, &leader] {
        assert_eq!(status_requests(n).await, 1, "each asked once");
    }

    // The leader's answer ends the search: endpoints after it are not asked.
    let after = MockServer::start().await;
    let fleet = spec(&[leader.uri(), after.uri()], 3);
    assert_eq!(ok(&scrape_once(ctx, &fleet).await).leader_id, Some(1));
    assert!(after.received_requests().await.unwrap().is_empty());

    // Only when every endpoint failed is the tick a gap, with the first endpoint's reason.
    let dead = DeadPort::bind();
    let gone = format!("http://127.0.0.1:{}", dead.port());
    let sample = scrape_once(ctx, &spec(&[learner.uri(), follower.uri(), gone], 3)).await;
    assert_eq!(err(&sample), "no leader (and 2 other endpoints failed)");
}

#[tokio::test]
async fn a_follower_whose_leader_is_unreachable_is_passed_over_for_the_leader_endpoint() {
    let app = TestApp::spawn().await;
    let ctx = &app.state.ctx;
    let (follower, leader) = (MockServer::start().await, MockServer::start().await);
    // The leader advertises an address the console cannot reach (nothing listens there), but
    // the fleet's second endpoint reaches the leader itself.
    let dead = DeadPort::bind();
    let unreachable = format!("127.0.0.1:{}", dead.port());
    let members = [(1, unreachable), (2, addr(&follower))];
    serve_status(
        &follower,
        status(2, Some(1), 7, &members, Some(Value::Null)),
    )
    .await;
    serve_status(
        &leader,
        status(
            1,
            Some(1),
            7,
            &members,
            Some(json!({"spare": 0, "required": 1})),
        ),
    )
    .await;

    let alone = scrape_once(ctx, &spec(&[follower.uri()], 3)).await;
    assert_eq!(err(&alone), "leader 1: could not connect");

    let sample = scrape_once(ctx, &spec(&[follower.uri(), leader.uri()], 3)).await;
    let o = ok(&sample);
    assert_eq!((o.leader_id, o.term), (Some(1), Some(7)));
    assert_eq!(o.leader_url.as_deref(), Some(leader.uri().as_str()));
    assert_eq!((o.spare, o.required), (0, 1));
    assert_eq!(leader.received_requests().await.unwrap().len(), 1);

    // A hop to a node that no longer leads is not chased further, but the next endpoint is
    // still asked.
    let stale = MockServer::start().await;
    let members = [(1, addr(&leader)), (2, addr(&stale))];
    serve_status(
        &stale,
        status(
            2,
            Some(3),
            7,
            &[(2, addr(&stale)), (3, addr(&follower))],
            None,
        ),
    )
    .await;
    let fleet = spec(&[stale.uri(), leader.uri()], 3);
    leader.reset().await;
    serve_status(
        &leader,
        status(
            1,
            Some(1),
            8,
            &members,
            Some(json!({"spare": 1, "required": 1})),
        ),
    )
    .await;
    let o = ok(&scrape_once(ctx, &fleet).await).clone();
    assert_eq!((o.leader_id, o.spare), (Some(1), 1));
    let stale_alone = scrape_once(ctx, &spec(&[stale.uri()], 3)).await;
    assert_eq!(err(&stale_alone), "leader 3 is no longer the leader");
}

/// A follower naming a leader on the cloud metadata range: the leader's URL is built from its
/// `addr` and refused by the scrape policy. Judged as the pure decision only, so no test hands
/// the address to a real client.
#[test]
fn a_link_local_leader_address_is_refused_by_the_policy() {
    let leader = headroom::scraper::urls::member_base("169.254.169.254:80", "http://127.0.0.1:1")
        .expect("a plain host:port");
    let url = url::Url::parse(&format!("{leader}/raft/status")).unwrap();
    assert_eq!(
        headroom::outbound::policy::check_url(
            headroom::outbound::policy::Purpose::Scrape,
            &headroom::outbound::policy::AllowList::default(),
            &url,
            headroom::outbound::policy::Hop::First,
        ),
        Err(headroom::outbound::policy::Refusal::LinkLocal)
    );
}

#[tokio::test]
async fn oversized_garbage_503_and_unevaluated_answers_are_error_samples() {
    let app = TestApp::spawn().await;
    let ctx = &app.state.ctx;
    let n1 = MockServer::start().await;
    let fleet = spec(&[n1.uri()], 2);

    let mut big = fixture_json("raft-status-leader-with-headroom.json");
    big["padding"] = json!("x".repeat(300 * 1024));
    serve_status(&n1, big).await;
    assert_eq!(
        err(&scrape_once(ctx, &fleet).await),
        "body larger than 256 KiB"
    );

    n1.reset().await;
    serve_raw(&n1, 503, fixture("raft-status-503-body.txt")).await;
    assert_eq!(
        err(&scrape_once(ctx, &fleet).await),
        "HTTP 503: raft not configured: start yubaba with --raft-node-id to enable clustering"
    );

    n1.reset().await;
    serve_raw(&n1, 200, b"\x00\x01garbage{".to_vec()).await;
    assert!(err(&scrape_once(ctx, &fleet).await).starts_with("unreadable status: not JSON"));

    n1.reset().await;
    let body = fixture("raft-status-leader-with-headroom.json");
    serve_raw(&n1, 200, body[..body.len() / 2].to_vec()).await;
    assert!(err(&scrape_once(ctx, &fleet).await).contains("ends early"));

    n1.reset().await;
    serve_status(
        &n1,
        json!({"node_id": 1, "state": "Leader", "headroom": {"spare": -1, "required": 1}}),
    )
    .await;
    assert_eq!(
        err(&scrape_once(ctx, &fleet).await),
        "unreadable status: `headroom.spare` must be a whole number from 0 to 10000 (at most 10000)"
    );

    // A `required` past the sanity bound is unreadable too, never a huge proposal.
    n1.reset().await;
    serve_status(
        &n1,
        json!({"node_id": 1, "state": "Leader", "headroom": {"spare": 0, "required": 10001}}),
    )
    .await;
    assert_eq!(
        err(&scrape_once(ctx, &fleet).await),
        "unreadable status: `headroom.required` must be a whole number from 0 to 10000 (at most 10000)"
    );

    // Any other non-2xx body is not echoed: the code only.
    n1.reset().await;
    serve_raw(&n1, 500, b"internal-token=s3cr3t".to_vec()).await;
    assert_eq!(err(&scrape_once(ctx, &fleet).await), "HTTP 500");

    // A leader whose first evaluation has not run yet.
    n1.reset().await;
    let members = [(1, addr(&n1))];
    serve_status(&n1, status(1, Some(1), 3, &members, Some(Value::Null))).await;
    assert_eq!(
        err(&scrape_once(ctx, &fleet).await),
        "leader has not evaluated headroom yet"
    );

    // An uninitialised learner knows no leader.
    n1.reset().await;
    serve_status(&n1, fixture_json("raft-status-uninitialised.json")).await;
    assert_eq!(err(&scrape_once(ctx, &fleet).await), "no leader");
}

#[tokio::test]
async fn a_single_node_cluster_on_an_unspecified_address_is_read_from_the_given_url() {
    let app = TestApp::spawn().await;
    let n1 = MockServer::start().await;
    let mut body = fixture_json("raft-status-single-node.json");
    body["headroom"] = json!({"spare": 0, "required": 1});
    serve_status(&n1, body).await;
    let sample = scrape_once(&app.state.ctx, &spec(&[format!("{}/", n1.uri())], 2)).await;
    let o = ok(&sample);
    assert_eq!(o.leader_url.as_deref(), Some(n1.uri().as_str()));
    assert_eq!(o.members[0].addr, "0.0.0.0:7443");
}

/// Samples stored for fleet `name`.
async fn samples_of(app: &TestApp, name: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM fleet_samples s JOIN fleets f ON f.id = s.fleet_id WHERE f.name = $1",
    )
    .bind(name)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn run_until_stopped_scrapes_every_fleet_and_stops_on_shutdown() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    let n1 = MockServer::start().await;
    let members = [(1, addr(&n1))];
    serve_status(
        &n1,
        status(
            1,
            Some(1),
            3,
            &members,
            Some(json!({"spare": 1, "required": 1})),
        ),
    )
    .await;
    let dead = DeadPort::bind();
    let gone = format!("http://127.0.0.1:{}", dead.port());
    for (name, endpoint) in [("alpha", n1.uri()), ("beta", gone)] {
        let input = FleetInput {
            name: name.into(),
            endpoints: vec![endpoint],
            restore_machine_config: "spare-fsn1".into(),
            scrape_interval_secs: Some(json!(5)),
            scrape_timeout_secs: Some(json!(2)),
            ..FleetInput::default()
        };
        headroom::fleets::create(&ctx, &headroom::auth::Caller::system(), &input)
            .await
            .unwrap();
    }
    let stats = Arc::new(ScrapeStats::default());
    let (tx, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(headroom::scraper::run_until_stopped(ctx, stats.clone(), rx));

    // Each loop starts within one interval (5 s) of its random offset.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while samples_of(&app, "alpha").await == 0 || samples_of(&app, "beta").await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not both fleets sampled in time"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ok_alpha: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM fleet_samples s JOIN fleets f ON f.id = s.fleet_id
         WHERE f.name = 'alpha' AND s.ok AND s.spare = 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(ok_alpha >= 1);
    let failed_beta: Option<String> = sqlx::query_scalar(
        "SELECT s.error FROM fleet_samples s JOIN fleets f ON f.id = s.fleet_id WHERE f.name = 'beta'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(failed_beta.as_deref(), Some("could not connect"));
    assert!(stats.ticks() >= 2 && stats.failures() >= 1, "{stats:?}");
    assert_eq!(stats.missed_ticks(), 0);
    assert!(stats.lag_p99_ms().unwrap() < 1_000, "{stats:?}");

    tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(3), task)
        .await
        .expect("stops promptly")
        .unwrap();
}

#[tokio::test]
async fn a_chunked_body_past_the_cap_is_cut_off_without_reading_further() {
    let app = TestApp::spawn().await;
    // No Content-Length: the body streams forever, so only the cap can end the read early.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = written.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let (mut sock, _) = listener.accept().await.unwrap();
        // Read the request head before answering, as a server would.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            use tokio::io::AsyncReadExt;
            if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        sock.write_all(answer.as_bytes()).await.unwrap();
        let chunk = format!("{:x}\r\n{}\r\n", 16 * 1024, " ".repeat(16 * 1024));
        while sock.write_all(chunk.as_bytes()).await.is_ok() {
            counter.fetch_add(16 * 1024, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let fleet = spec(&[format!("http://127.0.0.1:{port}")], 5);
    let sample = scrape_once(&app.state.ctx, &fleet).await;
    assert_eq!(err(&sample), "body larger than 256 KiB");
    assert!(
        sample.latency_ms < 4_000,
        "ended by the cap, not the timeout"
    );
    // The writer stops once the reader hangs up; socket buffers hold at most a few MiB.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(written.load(std::sync::atomic::Ordering::Relaxed) < 16 * 1024 * 1024);
}

#[tokio::test]
async fn a_redirect_is_an_error_sample_and_its_target_is_never_asked() {
    let app = TestApp::spawn().await;
    let (n1, target) = (MockServer::start().await, MockServer::start().await);
    serve_status(
        &target,
        status(
            1,
            Some(1),
            3,
            &[(1, addr(&target))],
            Some(json!({"spare": 1, "required": 1})),
        ),
    )
    .await;
    for code in [301, 302, 307, 308] {
        n1.reset().await;
        Mock::given(method("GET"))
            .and(path("/raft/status"))
            .respond_with(
                ResponseTemplate::new(code)
                    .insert_header("Location", format!("{}/raft/status", target.uri()).as_str())
                    .set_body_string("moved: secret"),
            )
            .mount(&n1)
            .await;
        let sample = scrape_once(&app.state.ctx, &spec(&[n1.uri()], 2)).await;
        assert_eq!(
            err(&sample),
            format!("HTTP {code}: redirects are not followed")
        );
    }
    assert!(target.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn members_sharing_one_address_are_asked_once_and_count_as_one_spare() {
    let app = TestApp::spawn().await;
    let leader = MockServer::start().await;
    let idle = member(
        fixture_json("node.json"),
        fixture_json("node-usage-idle.json"),
    )
    .await;
    let other = member(
        fixture_json("node.json"),
        fixture_json("node-usage-idle.json"),
    )
    .await;
    // 200 ids at one idle address, one more idle node, and the (unanswering) leader itself.
    let mut members: Vec<(u64, String)> = (2..202).map(|id| (id, addr(&idle))).collect();
    members.push((202, addr(&other)));
    members.push((1, addr(&leader)));
    serve_status(&leader, status(1, Some(1), 3, &members, None)).await;
    let fleet = spec_with(
        &[leader.uri()],
        json!({ "scrape_timeout_secs": 5, "required_override": 1 }),
    );
    let sample = scrape_once(&app.state.ctx, &fleet).await;
    assert_eq!(ok(&sample).spare, 2);
    assert_eq!(ok(&sample).source, Source::Derived);
    // `/node`, `/node/usage` and `/workloads`, once each.
    let per_node = headroom::scraper::derived::GETS_PER_NODE;
    assert_eq!(idle.received_requests().await.unwrap().len(), per_node);
    assert_eq!(other.received_requests().await.unwrap().len(), per_node);

    // Past 256 members the status is refused outright: no member is asked.
    let many: Vec<(u64, String)> = (1..=257).map(|id| (id, addr(&idle))).collect();
    leader.reset().await;
    idle.reset().await;
    let mut body = status(1, Some(1), 3, &many, None);
    body["membership_config"]["membership"]["configs"] = json!([[1]]);
    serve_status(&leader, body).await;
    let sample = scrape_once(&app.state.ctx, &fleet).await;
    assert!(
        err(&sample).ends_with("has more than 256 members"),
        "{}",
        err(&sample)
    );
    assert!(idle.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn every_error_sample_is_cleaned_and_capped_where_it_is_built() {
    let app = TestApp::spawn().await;
    let n1 = MockServer::start().await;
    let nasty = format!(
        "raft not configured\u{202e}\u{1b}[2J\n\t<b>{}",
        "z ".repeat(5_000)
    );
    serve_raw(&n1, 503, nasty.into_bytes()).await;
    let sample = scrape_once(&app.state.ctx, &spec(&[n1.uri()], 2)).await;
    let e = err(&sample);
    assert!(
        e.starts_with("HTTP 503: raft not configured[2J <b>z z"),
        "{e}"
    );
    assert!(e.chars().count() <= 301, "{}", e.chars().count());
    assert!(!e.chars().any(headroom::scraper::text::is_hidden), "{e:?}");
    assert!(!e.contains("  "));
}

#[tokio::test]
async fn evidence_keeps_the_reduced_status_and_is_bounded() {
    let app = TestApp::spawn().await;
    let n1 = MockServer::start().await;
    let mut body = status(
        1,
        Some(1),
        9,
        &[(1, addr(&n1))],
        Some(json!({"spare": 1, "required": 2, "zones": ["a"]})),
    );
    body["membership_config"]["log_id"] = json!({"index": 4});
    body["membership_config"]["membership"]["nodes"]["1"]["extra"] = json!("x");
    serve_status(&n1, body).await;
    let sample = scrape_once(&app.state.ctx, &spec(&[n1.uri()], 2)).await;
    let e = &ok(&sample).evidence;
    assert_eq!(
        e["headroom"],
        json!({"spare": 1, "required": 2, "zones": ["a"]})
    );
    assert_eq!(e["last_log_index"], 10);
    assert_eq!(
        e["membership_config"],
        json!({"membership": {"configs": [[1]], "nodes": {"1": {"addr": addr(&n1)}}}})
    );

    n1.reset().await;
    let mut big = status(
        1,
        Some(1),
        9,
        &[(1, addr(&n1))],
        Some(json!({"spare": 0, "required": 1})),
    );
    big["padding"] = json!(vec![1e15; 10_000]);
    serve_status(&n1, big).await;
    let sample = scrape_once(&app.state.ctx, &spec(&[n1.uri()], 2)).await;
    let e = &ok(&sample).evidence;
    assert!(
        serde_json::to_vec(e).unwrap().len() <= headroom::scraper::evidence::EVIDENCE_CAP_BYTES
    );
    assert_eq!(
        *e,
        json!({"truncated": true, "headroom": {"spare": 0, "required": 1},
            "node_id": 1, "current_leader": 1, "current_term": 9})
    );
}

/// The characters a node must not get in front of a reader: bidi overrides and isolates, a
/// zero-width space, NUL and ESC (as themselves, or as JSON writes them).
const HIDDEN: [char; 5] = ['\u{202e}', '\u{2066}', '\u{200b}', '\u{0}', '\u{1b}'];

/// What of `HIDDEN` (or a run of the 10 KB filler) `text` carries, raw or JSON-escaped.
fn hidden_in(text: &str) -> Vec<String> {
    let mut found: Vec<String> = HIDDEN
        .iter()
        .filter(|c| text.contains(**c))
        .map(|c| format!("U+{:04X}", u32::from(*c)))
        .collect();
    for escaped in [
        "\\u0000", "\\u001b", "\\u001B", "\\u202e", "\\u2066", "\\u200b",
    ] {
        if text.contains(escaped) {
            found.push(escaped.to_owned());
        }
    }
    if text.contains(&"W".repeat(1_000)) {
        found.push("the 10 KB string".to_owned());
    }
    found
}

/// Every text value of every table, except `instance_keys` (random key bytes, never text and
/// never scraped), read from the store's own catalogue.
async fn every_stored_value(pool: &sqlx::AnyPool) -> Vec<(String, String)> {
    use sqlx::Row;
    let pg = crate::helpers::store::on_postgres();
    let columns: Vec<(String, String)> = sqlx::query_as(if pg {
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx\\_%'
           AND table_name <> 'instance_keys'"
    } else {
        "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
           AND m.name NOT LIKE '_sqlx_%' AND m.name <> 'instance_keys'"
    })
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(columns.len() > 50, "the schema's columns are listed");
    let mut values = Vec::new();
    for (table, column) in columns {
        // Names read from the schema itself, not from input.
        let cast = if pg { "TEXT" } else { "BLOB" };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(\"{column}\" AS {cast}) FROM \"{table}\""
        )))
        .fetch_all(pool)
        .await
        .unwrap();
        for row in rows {
            let text = if pg {
                row.get::<Option<String>, _>(0)
            } else {
                row.get::<Option<Vec<u8>>, _>(0)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
            };
            if let Some(text) = text {
                values.push((format!("{table}.{column}"), text));
            }
        }
    }
    values
}

#[tokio::test]
async fn hidden_characters_in_scraped_strings_reach_no_table_page_or_answer() {
    let app = console(|_| {}).await;
    let ctx = app.state.ctx.clone();
    let leader = MockServer::start().await;
    let filler = "W".repeat(10 * 1024);
    let members = [
        (1, addr(&leader)),
        (2, "127.0.0.1:1\u{202e}7442".to_owned()),
        (
            3,
            "\u{2066}127.0.0.3\u{200b}:7443\u{0}\u{1b}[31m".to_owned(),
        ),
        (4, format!("{filler}:7443")),
    ];
    let mut body = status(
        1,
        Some(1),
        3,
        &members,
        Some(json!({"spare": 0, "required": 1, "zone": "fsn1\u{202e}cba"})),
    );
    body["state"] = json!("Leader\u{2066}");
    body["note\u{202e}"] = json!(format!("\u{1b}]0;owned\u{7}{filler}"));
    serve_status(&leader, body).await;
    let input = FleetInput {
        name: "prod".into(),
        endpoints: vec![leader.uri()],
        restore_machine_config: "spare-fsn1".into(),
        scrape_timeout_secs: Some(json!(3)),
        ..FleetInput::default()
    };
    headroom::fleets::create(&ctx, &headroom::auth::Caller::system(), &input)
        .await
        .unwrap();
    let fleet = headroom::fleets::get(&ctx, &headroom::auth::Caller::system(), "prod")
        .await
        .unwrap()
        .spec;

    // Enough samples below the requirement to open a deficit, whose evidence is stored.
    for _ in 0..ctx.settings.deficit.enter_after {
        let sample = scrape_once(&ctx, &fleet).await;
        let o = ok(&sample);
        assert_eq!(o.members.len(), 4, "every member is kept, cleaned");
        headroom::capacity::record::record(&ctx, "prod", &sample)
            .await
            .unwrap();
    }
    assert_eq!(app.count("fleet_deficits").await, 1);

    let stored: Vec<_> = every_stored_value(&app.pool)
        .await
        .into_iter()
        .filter_map(|(at, text)| {
            let found = hidden_in(&text);
            (!found.is_empty()).then_some((at, found))
        })
        .collect();
    assert!(stored.is_empty(), "stored uncleaned: {stored:?}");

    let viewer = app.session_for(Role::Viewer).await;
    let page = app.get("/fleets/prod", &viewer).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("127.0.0.1:1"), "the members are on the page");
    assert_eq!(hidden_in(&page), Vec::<String>::new(), "the fleet page");

    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    for path in [
        "/api/v1/fleets/prod",
        "/api/v1/fleets/prod/headroom",
        "/api/v1/provisions?fleet=prod",
    ] {
        let answer = app
            .client
            .get(app.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        let answer = answer.text().await.unwrap();
        assert_eq!(hidden_in(&answer), Vec::<String>::new(), "{path}: {answer}");
    }
}

/// Status requests a fake node received (member reads, `/node` and `/node/usage`, aside).
async fn status_requests(node: &MockServer) -> usize {
    node.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/raft/status")
        .count()
}
