//! Four-eyes covers the cause (issue 14, findings 4 and 5): a proposal headroom files as
//! `system` cannot be approved by whoever last changed a fleet setting it was computed from;
//! proposals are capped by the fleet's `max_restore_machines`; an operator cannot loosen a
//! policy by deleting and recreating the fleet or by a second fleet in front of the same
//! endpoints.

use std::time::Duration;

use headroom::auth::Caller;
use headroom::capacity::record::record;
use headroom::context::Ctx;
use headroom::domain::capacity::{DeficitPolicy, Member, Observation, Sample, Source};
use headroom::domain::fleet::FleetInput;
use headroom::domain::Role;
use headroom::error::OpError;
use headroom::provisioning::{requests, NewRequest};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{texts, TestApp};
use crate::runner::{caller, console};

const INTERVAL: Duration = Duration::from_secs(15);

/// A console (config `spare-fsn1`, operator olga, approver abe, plus approvers ann and
/// bob) that enters a deficit on the first sample below required.
async fn setup() -> (TestApp, Ctx) {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 1,
            leave_after: 1,
        };
    })
    .await;
    app.create_user("ann", Role::Approver).await;
    app.create_user("bob", Role::Approver).await;
    let ctx = app.state.ctx.clone();
    (app, ctx)
}

fn input(name: &str, endpoint: &str) -> FleetInput {
    FleetInput {
        name: name.into(),
        endpoints: vec![endpoint.into()],
        restore_machine_config: "spare-fsn1".into(),
        ..FleetInput::default()
    }
}

/// A leader's answer: `spare` of `required`, two members.
fn below(at: i64, spare: u32, required: u32) -> Sample {
    Sample {
        at,
        latency_ms: 5,
        outcome: Ok(Observation {
            absorption: None,
            source: Source::Native,
            spare,
            required,
            leader_id: Some(1),
            leader_url: Some("http://127.0.0.1:7443".into()),
            term: Some(3),
            members: vec![
                Member::listed(1, "127.0.0.1:7443", true),
                Member::listed(2, "127.0.0.2:7443", false),
            ],
            evidence: json!({ "headroom": { "spare": spare, "required": required } }),
        }),
    }
}

/// Records one sample below required and returns the proposal headroom filed for it.
async fn proposal(app: &TestApp, ctx: &Ctx, fleet: &str, spare: u32, required: u32) -> i64 {
    app.clock.advance(INTERVAL);
    record(ctx, fleet, &below(ctx.now(), spare, required))
        .await
        .expect("record");
    let (id, requester): (i64, String) = sqlx::query_as(
        "SELECT id, requester FROM provisions WHERE fleet = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(fleet)
    .fetch_one(&app.pool)
    .await
    .expect("a proposal was filed");
    assert_eq!(requester, "system");
    id
}

async fn count_of(app: &TestApp, id: i64) -> i64 {
    sqlx::query_scalar("SELECT count FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

fn refusal(r: Result<headroom::provisioning::Provision, OpError>) -> String {
    match r {
        Err(OpError::Forbidden(m)) => m,
        other => panic!("expected a four-eyes refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_approver_who_set_the_required_override_cannot_approve_the_proposal_alone() {
    let (app, ctx) = setup().await;
    let mut i = input("prod", "http://127.0.0.1:7443");
    i.required_override = Some(json!(25));
    headroom::fleets::create(&ctx, &caller("abe", Role::Approver), &i)
        .await
        .unwrap();
    let id = proposal(&app, &ctx, "prod", 0, 25).await;

    // Through the API, as the finding did it: 403 naming the rule.
    let token = app.token_for("abe").await;
    let res = app
        .client
        .post(app.url(&format!("/api/v1/provisions/{id}/approve")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let problem: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::FORBIDDEN, "{problem}");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("four-eyes: you last changed fleet prod's")
            && detail.contains("required_override")
            && detail.contains("another approver must"),
        "{detail}"
    );
    let state: String = sqlx::query_scalar("SELECT state FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(state, "pending_approval", "nothing was approved");
    // Nor is it offered to him: the approvals badge counts only what he may approve.
    let waiting = |who: &'static str| {
        let ctx = ctx.clone();
        async move {
            requests::awaiting_approval_count(&ctx, &caller(who, Role::Approver))
                .await
                .unwrap()
        }
    };
    assert_eq!(waiting("abe").await, 0);
    assert_eq!(waiting("ann").await, 1);

    // Another approver, who changed nothing, may.
    let ok = requests::approve(&ctx, &caller("ann", Role::Approver), id, None).await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn a_proposal_asks_for_at_most_the_fleets_cap_of_machines() {
    let (app, ctx) = setup().await;
    headroom::fleets::create(
        &ctx,
        &Caller::system(),
        &input("prod", "http://127.0.0.1:7443"),
    )
    .await
    .unwrap();
    let id = proposal(&app, &ctx, "prod", 0, 25).await;
    assert_eq!(count_of(&app, id).await, 2, "the default cap is 2");
}

/// The fleets, their history and the audit log (an API call updates its token's last use).
async fn settings(app: &TestApp) -> Vec<(String, i64, String)> {
    let keep = ["fleets", "fleet_changes", "audit_log", "provisions"];
    app.snapshot()
        .await
        .into_iter()
        .filter(|(t, _, _)| keep.contains(&t.as_str()))
        .collect()
}

#[tokio::test]
async fn an_operator_cannot_delete_a_fleet_to_loosen_its_policy() {
    let (app, _ctx) = setup().await;
    let abe = app.token_for("abe").await;
    let olga = app.token_for("olga").await;
    let strict = json!({
        "name": "prod", "endpoints": ["http://127.0.0.1:7443"],
        "restore_machine_config": "spare-fsn1", "approvals_required": 2, "approval_ttl_hours": 1,
    });
    let res = app
        .client
        .post(app.url("/api/v1/fleets"))
        .bearer_auth(&abe)
        .json(&strict)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let before = settings(&app).await;

    let res = app
        .client
        .delete(app.url("/api/v1/fleets/prod"))
        .bearer_auth(&olga)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(settings(&app).await, before, "nothing changed");

    // A second, looser fleet in front of the same cluster is refused, naming the first.
    let loose = json!({
        "name": "prod-too", "endpoints": ["http://127.0.0.1:7443/"],
        "restore_machine_config": "spare-fsn1", "approvals_required": 1,
    });
    let res = app
        .client
        .post(app.url("/api/v1/fleets"))
        .bearer_auth(&olga)
        .json(&loose)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let problem: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "endpoints", "{problem}");
    let message = problem["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("fleet prod"), "{message}");
    assert_eq!(settings(&app).await, before, "nothing changed");
}

/// Files a restore proposal for `fleet` as headroom does (requester `system`).
async fn file_as_system(ctx: &Ctx, fleet: &str, config: &str) -> i64 {
    let request = NewRequest {
        fleet: fleet.into(),
        machine_config: config.into(),
        template: None,
        count: 1,
        reason: "headroom deficit #0: test proposal".into(),
    };
    match requests::create_unless_open(ctx, &Caller::system(), &request)
        .await
        .expect("filed")
    {
        requests::Filing::Filed(p) => p.id,
        other => panic!("{other:?}"),
    }
}

/// A second machine config (`spare-hel1`), written by `system`.
async fn second_config(ctx: &Ctx) {
    let input = headroom::domain::machine::MachineInput {
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
        mesh_tags: vec!["tag:spare".into()],
        ..Default::default()
    };
    headroom::machine_setup::configs::create(ctx, &Caller::system(), &input)
        .await
        .expect("second config");
}

#[tokio::test]
async fn whoever_last_changed_any_setting_a_proposal_was_computed_from_cannot_approve_it() {
    let (app, ctx) = setup().await;
    second_config(&ctx).await;
    type Change = fn(&mut FleetInput);
    let cases: Vec<(&str, Change)> = vec![
        ("endpoints", |i| {
            i.endpoints = vec!["http://127.0.0.1:7999".into()];
        }),
        ("required_override", |i| {
            i.required_override = Some(json!(3))
        }),
        ("restore_machine_config", |i| {
            i.restore_machine_config = "spare-hel1".into();
        }),
        ("approvals_required", |i| {
            i.approvals_required = Some(json!(2))
        }),
        ("approval_ttl_hours", |i| {
            i.approval_ttl_hours = Some(json!(2))
        }),
        ("max_restore_machines", |i| {
            i.max_restore_machines = Some(json!(5));
        }),
        ("headroom_rule", |i| {
            i.headroom_rule = Some(json!("absorption"));
        }),
    ];
    for (n, (field, change)) in cases.into_iter().enumerate() {
        let name = format!("f{n}");
        let endpoint = format!("http://127.0.0.1:{}", 7100 + n);
        headroom::fleets::create(&ctx, &Caller::system(), &input(&name, &endpoint))
            .await
            .unwrap();
        let mut changed = input(&name, &endpoint);
        change(&mut changed);
        headroom::fleets::update(&ctx, &caller("ann", Role::Approver), &name, &changed)
            .await
            .unwrap();
        let config = changed.restore_machine_config.clone();
        let id = file_as_system(&ctx, &name, &config).await;
        let m = refusal(requests::approve(&ctx, &caller("ann", Role::Approver), id, None).await);
        assert_eq!(
            m,
            format!(
                "four-eyes: you last changed fleet {name}'s {field}, which this proposal was \
                 computed from, so you cannot approve it; another approver must"
            )
        );
        let ok = requests::approve(&ctx, &caller("bob", Role::Approver), id, None).await;
        assert!(ok.is_ok(), "{field}: {ok:?}");
    }
    // A person's request is not held to it: its requester is the second pair of eyes.
    let id = crate::runner::file(&ctx, "f1", 1).await;
    let ok = requests::approve(&ctx, &caller("ann", Role::Approver), id, None).await;
    assert!(ok.is_ok(), "{ok:?}");
    drop(app);
}

#[tokio::test]
async fn the_rule_is_per_field_and_as_of_filing() {
    let (app, ctx) = setup().await;
    let base = input("prod", "http://127.0.0.1:7443");
    headroom::fleets::create(&ctx, &Caller::system(), &base)
        .await
        .unwrap();
    // abe sets the override; ann then makes a harmless change, so abe is no longer the
    // fleet's last changer, but still the last changer of the override.
    let mut raised = base.clone();
    raised.required_override = Some(json!(25));
    headroom::fleets::update(&ctx, &caller("abe", Role::Approver), "prod", &raised)
        .await
        .unwrap();
    let mut harmless = raised.clone();
    harmless.scrape_interval_secs = Some(json!(30));
    headroom::fleets::update(&ctx, &caller("ann", Role::Approver), "prod", &harmless)
        .await
        .unwrap();
    let fleet = headroom::fleets::get(&ctx, &Caller::system(), "prod")
        .await
        .unwrap();
    assert_eq!(fleet.updated_by, "ann");
    let id = proposal(&app, &ctx, "prod", 0, 25).await;

    // After filing, bob changes the override again: the proposal was computed from abe's.
    let mut later = harmless.clone();
    later.required_override = Some(json!(30));
    headroom::fleets::update(&ctx, &caller("bob", Role::Approver), "prod", &later)
        .await
        .unwrap();
    let m = refusal(requests::approve(&ctx, &caller("abe", Role::Approver), id, None).await);
    assert!(
        m.contains("fleet prod's required_override, which this proposal"),
        "{m}"
    );
    let ok = requests::approve(&ctx, &caller("bob", Role::Approver), id, None).await;
    assert!(ok.is_ok(), "bob's change came after filing: {ok:?}");
}

#[tokio::test]
async fn deleting_and_recreating_a_fleet_makes_the_recreator_its_cause() {
    let (app, ctx) = setup().await;
    headroom::fleets::create(
        &ctx,
        &Caller::system(),
        &input("prod", "http://127.0.0.1:7443"),
    )
    .await
    .unwrap();
    headroom::fleets::delete(&ctx, &caller("ann", Role::Approver), "prod")
        .await
        .unwrap();
    let mut again = input("prod", "http://127.0.0.1:7443");
    again.required_override = Some(json!(9));
    headroom::fleets::create(&ctx, &caller("abe", Role::Approver), &again)
        .await
        .unwrap();
    let id = proposal(&app, &ctx, "prod", 0, 9).await;
    let m = refusal(requests::approve(&ctx, &caller("abe", Role::Approver), id, None).await);
    for field in ["endpoints", "required_override", "approvals_required"] {
        assert!(m.contains(field), "{m}");
    }

    // The history keeps all three, newest first, through the API (viewer) and on the page.
    app.create_user("vera", Role::Viewer).await;
    let token = app.token_for("vera").await;
    let res = app
        .client
        .get(app.url("/api/v1/fleets/prod/history"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let history: Value = res.json().await.unwrap();
    let kinds: Vec<(&str, &str)> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["kind"].as_str().unwrap(), c["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("created", "abe"),
            ("deleted", "ann"),
            ("created", "system")
        ]
    );
    assert_eq!(
        history["items"][0]["changes"]["required_override"],
        json!({ "before": null, "after": 9 })
    );
    let session = app.quick_session("vera").await;
    let html = app
        .get("/fleets/prod", &session)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        texts(&html, "#history th[scope=col]"),
        ["When", "Who", "Change", "What changed"]
    );
    assert_eq!(texts(&html, "#history caption").len(), 1);
    let who: Vec<String> = texts(&html, "#history tbody tr td:nth-child(2)");
    assert_eq!(who, ["abe", "ann", "system"]);
    assert!(texts(&html, "#history tbody tr:first-child li")
        .iter()
        .any(|t| t == "required_override: — → 9"));
}

#[tokio::test]
async fn a_hostile_required_of_ten_thousand_gives_a_capped_suspicious_proposal_of_two() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let (app, ctx) = setup().await;
    let node = MockServer::start().await;
    let addr = node.address().to_string();
    let body = json!({
        "node_id": 1, "state": "Leader", "current_leader": 1, "current_term": 3,
        "last_log_index": 10, "last_applied": null,
        "membership_config": { "log_id": null, "membership": {
            "configs": [[1]], "nodes": { "1": { "addr": addr } } } },
        "headroom": { "spare": 0, "required": 10000 },
    });
    Mock::given(method("GET"))
        .and(path("/raft/status"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&node)
        .await;
    let mut i = input("hostile", &node.uri());
    i.scrape_timeout_secs = Some(json!(3));
    headroom::fleets::create(&ctx, &Caller::system(), &i)
        .await
        .unwrap();
    let spec = headroom::fleets::get(&ctx, &Caller::system(), "hostile")
        .await
        .unwrap()
        .spec;
    app.clock.advance(INTERVAL);
    let sample = headroom::scraper::scrape_once(&ctx, &spec).await;
    assert_eq!(sample.outcome.as_ref().map(|o| o.required), Ok(10_000));
    record(&ctx, "hostile", &sample).await.unwrap();

    let (id, count, reason): (i64, i64, String) =
        sqlx::query_as("SELECT id, count, reason FROM provisions WHERE fleet = 'hostile'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(count, 2);
    assert!(
        reason.contains("capped at 2 by the fleet's max_restore_machines (10000 missing"),
        "{reason}"
    );
    let evidence: String =
        sqlx::query_scalar("SELECT evidence FROM fleet_deficits ORDER BY id DESC LIMIT 1")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let evidence: Value = serde_json::from_str(&evidence).unwrap();
    assert_eq!(evidence["suspicious"]["required"], 10_000);
    assert_eq!(evidence["suspicious"]["members"], 1);

    // The request's page shows both.
    let session = app.quick_session("abe").await;
    let html = app
        .get(&format!("/provisions/{id}"), &session)
        .await
        .text()
        .await
        .unwrap();
    let cells = texts(&html, "td");
    assert!(
        cells.iter().any(|t| t.contains(
            "suspicious: yubaba reported required 10000, above its 1 members + \
             max_restore_machines 2"
        )),
        "{cells:?}"
    );
    assert!(
        texts(&html, "body")[0].contains("capped at 2"),
        "the reason is shown"
    );
}

/// Saves a new version of template `name` as `who` (an approver): its body plus one comment.
async fn edit_template(ctx: &Ctx, who: &str, name: &str) -> i64 {
    let current = headroom::machine_setup::templates::latest(ctx, &Caller::system(), name)
        .await
        .expect("the template");
    let body = format!("{}\n# tuned for the autumn peak\n", current.content);
    let (saved, changed) =
        headroom::machine_setup::templates::update(ctx, &caller(who, Role::Approver), name, &body)
            .await
            .expect("a new template version");
    assert!(changed);
    saved.version
}

/// The template a request's plan uses, and its version.
async fn template_of(ctx: &Ctx, id: i64) -> (String, i64) {
    let p = requests::get(ctx, &Caller::system(), id)
        .await
        .expect("the request")
        .provision;
    (p.template.into(), p.template_version)
}

#[tokio::test]
async fn a_new_template_version_supersedes_a_pending_proposal() {
    let (app, ctx) = setup().await;
    headroom::fleets::create(
        &ctx,
        &Caller::system(),
        &input("t0", "http://127.0.0.1:7200"),
    )
    .await
    .unwrap();
    let id = file_as_system(&ctx, "t0", "spare-fsn1").await;
    let (template, planned) = template_of(&ctx, id).await;
    let newer = edit_template(&ctx, "ann", &template).await;
    assert_eq!(newer, planned + 1);

    let r = requests::approve(&ctx, &caller("bob", Role::Approver), id, None).await;

    assert!(
        matches!(r, Err(OpError::Conflict(ref m)) if m.contains("superseded")),
        "{r:?}"
    );
    let p = requests::get(&ctx, &Caller::system(), id)
        .await
        .unwrap()
        .provision;
    assert_eq!(p.state, headroom::domain::ProvisionState::Superseded);
    assert_eq!(
        p.state_reason,
        format!("template {template} has version {newer} since the plan used version {planned}")
    );
    drop(app);
}

#[tokio::test]
async fn the_author_of_a_template_change_cannot_approve_the_proposal_it_caused() {
    let (app, ctx) = setup().await;
    headroom::fleets::create(
        &ctx,
        &Caller::system(),
        &input("t1", "http://127.0.0.1:7201"),
    )
    .await
    .unwrap();
    // ann edits the template spare-fsn1 renders with; headroom's next proposal uses it.
    let template = headroom::cloud_init::DEFAULT_TEMPLATE;
    let version = edit_template(&ctx, "ann", template).await;
    let id = file_as_system(&ctx, "t1", "spare-fsn1").await;
    assert_eq!(template_of(&ctx, id).await, (template.to_owned(), version));

    let m = refusal(requests::approve(&ctx, &caller("ann", Role::Approver), id, None).await);

    assert_eq!(
        m,
        format!(
            "four-eyes: you wrote template {template} version {version}, which this plan \
             uses, so you cannot approve it; another approver must"
        )
    );
    let ok = requests::approve(&ctx, &caller("bob", Role::Approver), id, None).await;
    assert!(ok.is_ok(), "{ok:?}");
    drop(app);
}
