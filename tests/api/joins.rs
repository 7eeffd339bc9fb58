//! A request follows its created machines until they join the fleet: it succeeds only when
//! every machine appears as a member (matched by the host name its `/node` publishes), and
//! fails, naming the machines, when they do not join within `join_timeout_minutes`. The
//! fleet's members are a loopback mock answering `/node`; samples are handed to the scraper's
//! join follower as the scraper would after recording them.

use std::sync::Arc;
use std::time::Duration;

use headroom::context::Ctx;
use headroom::domain::capacity::{Member, Observation, Source};
use headroom::domain::{MachineStatus, ProvisionState, Role};
use headroom::provider::fake::Fake;
use headroom::provisioning::runner;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::TestApp;
use crate::runner::{approved, caller, console, ctx_with, fleet, record};

const TIMEOUT: Duration = Duration::from_secs(15 * 60);

async fn setup() -> (TestApp, Ctx, Fake) {
    let app = console(|s| s.join_timeout = Some(TIMEOUT)).await;
    let fake = Fake::new();
    let ctx = ctx_with(&app, Arc::new(fake.clone()));
    fleet(&ctx, "prod", &[]).await;
    (app, ctx, fake)
}

/// A fleet member on loopback whose `/node` publishes `host_name`.
async fn member(host_name: &str) -> MockServer {
    let node = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/node"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "schema_version": 1,
            "host.name": host_name,
            "yah.allocatable.memory_mb": 7807,
        })))
        .mount(&node)
        .await;
    node
}

/// The leader's observation listing `members` (raft id, mock), read through the first.
fn observation(members: &[(u64, &MockServer)]) -> Observation {
    Observation {
        absorption: None,
        source: Source::Native,
        spare: 1,
        required: 1,
        leader_id: Some(members[0].0),
        leader_url: Some(members[0].1.uri()),
        term: Some(3),
        members: members
            .iter()
            .map(|(id, m)| Member::listed(*id, m.address().to_string(), *id == 1))
            .collect(),
        evidence: json!({}),
    }
}

#[tokio::test]
async fn a_request_succeeds_only_once_its_machine_has_joined_the_fleet() {
    let (app, ctx, _fake) = setup().await;
    let id = approved(&ctx, "prod", 1).await;
    runner::run_once(&ctx).await.unwrap();

    // The server runs, but it is not a spare yet: the request waits, and says so.
    let detail = record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Executing);
    assert_eq!(detail.machines[0].status, MachineStatus::Created);
    assert_eq!(detail.machines[0].joined_at, None);
    assert!(
        detail.events.iter().any(|e| e
            .message
            .contains("waiting up to 15 min for it to join fleet prod")),
        "{:?}",
        detail.events
    );
    // Another pass of the runner neither finishes it nor repeats the note.
    runner::run_once(&ctx).await.unwrap();
    let detail = record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Executing);
    let machine = detail.machines[0].name.clone();

    // Members that are not the machine change nothing.
    let leader = member("prod-leader").await;
    let other = member("someone-else").await;
    let obs = observation(&[(1, &leader), (2, &other)]);
    headroom::scraper::joins::follow(&ctx, "prod", &obs, ctx.now()).await;
    assert_eq!(
        record(&ctx, id).await.provision.state,
        ProvisionState::Executing
    );

    // The machine's node appears as member 7: joined, and the request succeeds.
    app.clock.advance(Duration::from_secs(90));
    let ours = member(&machine).await;
    let obs = observation(&[(1, &leader), (2, &other), (7, &ours)]);
    headroom::scraper::joins::follow(&ctx, "prod", &obs, ctx.now()).await;
    let detail = record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Succeeded);
    assert_eq!(detail.machines[0].joined_at, Some(ctx.now()));
    assert_eq!(detail.machines[0].member_id, Some(7));
    assert!(detail.events.iter().any(|e| e.kind == "joined"));

    // The API and the page say it too.
    let token = app.token_for("abe").await;
    let json: serde_json::Value = app
        .api_json(&format!("/api/v1/provisions/{id}"), &token)
        .await;
    assert_eq!(json["state"], "succeeded");
    assert_eq!(json["machines"][0]["member_id"], 7);
    assert!(
        json["machines"][0]["joined_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{json}"
    );
    let viewer = app.session_for(Role::Viewer).await;
    let page = app
        .get(&format!("/provisions/{id}"), &viewer)
        .await
        .text()
        .await
        .unwrap();
    let joined = crate::helpers::texts(&page, "td.machine-joined");
    assert!(joined[0].ends_with("as member 7"), "{joined:?}");
}

#[tokio::test]
async fn a_created_server_that_never_joins_fails_its_request_with_the_join_timeout_reason() {
    let (app, ctx, fake) = setup().await;
    let id = approved(&ctx, "prod", 2).await;
    runner::run_once(&ctx).await.unwrap();
    let detail = record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Executing);
    let names: Vec<String> = detail.machines.iter().map(|m| m.name.clone()).collect();

    // One of the two joins; the other's cloud-init broke.
    let leader = member("prod-leader").await;
    let first = member(&names[0]).await;
    let obs = observation(&[(1, &leader), (5, &first)]);
    headroom::scraper::joins::follow(&ctx, "prod", &obs, ctx.now()).await;

    // Just inside the timeout: still waiting.
    app.clock.advance(TIMEOUT - Duration::from_secs(1));
    runner::run_once(&ctx).await.unwrap();
    assert_eq!(
        record(&ctx, id).await.provision.state,
        ProvisionState::Executing
    );

    // Past it: failed, naming the machine that never joined; that machine is failed too, so
    // an approver may destroy it, while the one that joined stays.
    app.clock.advance(Duration::from_secs(2));
    assert!(
        runner::run_once(&ctx).await.unwrap(),
        "the timeout is work done"
    );
    let detail = record(&ctx, id).await;
    assert_eq!(detail.provision.state, ProvisionState::Failed);
    assert_eq!(
        detail.provision.state_reason,
        format!("created but did not join within 15 min: {}", names[1])
    );
    assert_eq!(detail.machines[0].status, MachineStatus::Created);
    assert_eq!(detail.machines[0].member_id, Some(5));
    assert_eq!(detail.machines[1].status, MachineStatus::Failed);
    assert_eq!(
        detail.machines[1].error.as_deref(),
        Some("created but did not join within 15 min")
    );
    runner::destroy_machine(&ctx, &caller("abe", Role::Approver), id, 1)
        .await
        .expect("the machine that never joined can be destroyed");
    assert_eq!(fake.servers().len(), 1, "only the joined server is left");

    // A late join changes nothing once the request has ended.
    let second = member(&names[1]).await;
    let obs = observation(&[(1, &leader), (5, &first), (6, &second)]);
    headroom::scraper::joins::follow(&ctx, "prod", &obs, ctx.now()).await;
    assert_eq!(
        record(&ctx, id).await.provision.state,
        ProvisionState::Failed
    );
}

#[tokio::test]
async fn without_a_join_timeout_a_request_ends_when_its_servers_run() {
    let app = console(|s| s.join_timeout = None).await;
    let fake = Fake::new();
    let ctx = ctx_with(&app, Arc::new(fake.clone()));
    fleet(&ctx, "prod", &[]).await;
    let id = approved(&ctx, "prod", 1).await;
    runner::run_once(&ctx).await.unwrap();
    assert_eq!(
        record(&ctx, id).await.provision.state,
        ProvisionState::Succeeded
    );
}

#[tokio::test]
async fn twenty_followers_at_once_record_one_join_and_one_success() {
    let (app, ctx, _fake) = setup().await;
    let id = approved(&ctx, "prod", 1).await;
    runner::run_once(&ctx).await.unwrap();
    let machine = record(&ctx, id).await.machines[0].name.clone();
    let leader = member("prod-leader").await;
    let ours = member(&machine).await;
    let obs = observation(&[(1, &leader), (7, &ours)]);
    // As if many scrape ticks (or instances) saw the member at once, with the runner's
    // timeout sweep running beside them at the very edge of the window.
    app.clock.advance(TIMEOUT);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (ctx, obs) = (ctx.clone(), obs.clone());
        tasks.spawn(async move {
            headroom::scraper::joins::follow(&ctx, "prod", &obs, ctx.now()).await;
        });
    }
    let sweeper = ctx.clone();
    tasks.spawn(async move {
        runner::run_once(&sweeper).await.unwrap();
    });
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let detail = record(&ctx, id).await;
    let joined = detail.events.iter().filter(|e| e.kind == "joined").count();
    let states: Vec<&str> = detail
        .events
        .iter()
        .filter(|e| e.kind == "state")
        .map(|e| e.message.as_str())
        .collect();
    // Either the join or the timeout won, never both, and the join is written once.
    match detail.provision.state {
        ProvisionState::Succeeded => assert_eq!(joined, 1, "{states:?}"),
        ProvisionState::Failed => assert_eq!(joined, 0, "{states:?}"),
        other => panic!("ended {other:?}: {states:?}"),
    }
    let transitions: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_log WHERE target_id = $1 AND action IN ('provision.succeeded', 'provision.failed')",
    )
    .bind(id.to_string())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(transitions, 1, "one end, recorded once");
}
