//! `plan_checks_blocking` and the pin check on filing, with the instance's defaults: an
//! approver cannot approve past a pin nobody verified, a request's pin is downloaded once when
//! it is filed (one download for a burst), and a check the setting names turns its warning
//! into a refusal. Tarballs come from a loopback TLS fake trusted through `outbound_ca_file`.

use headroom::domain::plan_check_blocking::BlockingChecks;
use headroom::domain::Role;
use serde_json::Value;
use wiremock::MockServer;

use crate::helpers::TestApp;
use crate::outbound::{ca_file, serve_tarball, set_tarball, tarball, TlsFake};

/// The demo config pinned to a tarball a TLS fake serves; the app allow-lists exactly it and
/// keeps the instance's default `plan_checks_blocking` unless `adjust` changes it.
pub(crate) async fn app_with_tarball(
    on_request: bool,
    adjust: impl FnOnce(&mut headroom::config::Settings),
) -> (TestApp, MockServer, TlsFake) {
    let upstream = MockServer::start().await;
    let (bytes, sha) = tarball();
    serve_tarball(&upstream, "/yubaba.tar.gz", bytes).await;
    let fake = TlsFake::front("127.0.0.1", &upstream).await;
    let allow = headroom::outbound::AllowList::parse(&[fake.entry()]).unwrap();
    let app = TestApp::spawn_with_config_and(move |s| {
        s.outbound_allow = allow;
        s.outbound_ca_file = Some(ca_file());
        s.pin_check_on_request = on_request;
        s.plan_checks_blocking = BlockingChecks::default();
        adjust(s);
    })
    .await;
    set_tarball(&app, &fake.url("/yubaba.tar.gz"), &sha).await;
    app.create_user("bob", Role::Approver).await;
    (app, upstream, fake)
}

async fn approve(app: &TestApp, token: &str, id: i64) -> (u16, Value) {
    let res = app
        .client
        .post(app.url(&format!("/api/v1/provisions/{id}/approve")))
        .bearer_auth(token)
        .json(&serde_json::json!({ "comment": "" }))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn check<'a>(detail: &'a Value, name: &str) -> &'a Value {
    detail["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {detail}"))
}

#[tokio::test]
async fn an_unverified_pin_blocks_approval_by_default_until_its_tarball_is_checked() {
    let (app, _upstream, fake) = app_with_tarball(false, |_| {}).await;
    let id = app.file_request().await;
    let bob = app.token_for("bob").await;

    let detail = app
        .api_json(&format!("/api/v1/provisions/{id}"), &bob)
        .await;
    let pin = check(&detail, "pin");
    assert_eq!(pin["verdict"], "block", "{pin}");
    let why = pin["detail"].as_str().unwrap();
    assert!(
        why.starts_with("not checked") && why.ends_with("(plan_checks_blocking names pin)"),
        "{why}"
    );
    let (status, body) = approve(&app, &bob, id).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string()
            .contains("the plan check pin blocks approval"),
        "{body}"
    );
    let state: String = sqlx::query_scalar("SELECT state FROM provisions WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        state, "pending_approval",
        "a refused approval writes nothing"
    );

    // The page says the same beside the disabled Approve button.
    let session = app.quick_session("bob").await;
    let page = app
        .get(&format!("/provisions/{id}"), &session)
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("plan_checks_blocking names pin"), "{page}");

    // An operator checks the pin (the config page's button); the same approval now lands.
    app.create_user("op", Role::Operator).await;
    let op = app.token_for("op").await;
    let res = app
        .client
        .post(app.url("/api/v1/machine-configs/spare-fsn1/pin-check"))
        .bearer_auth(&op)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(fake.accepted(), 1);
    let detail = app
        .api_json(&format!("/api/v1/provisions/{id}"), &bob)
        .await;
    assert_eq!(check(&detail, "pin")["verdict"], "pass", "{detail}");
    let (status, body) = approve(&app, &bob, id).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filing_checks_the_pin_once_for_a_burst_of_requests() {
    // Renders are bounded per person and in time: six operators, a loaded machine's time.
    let (app, upstream, _fake) = app_with_tarball(true, |s| {
        s.render_timeout = std::time::Duration::from_secs(10);
    })
    .await;
    headroom::sim::demo::seed_fleet(&app.state).await.unwrap();
    let filings: Vec<_> = (0..6)
        .map(|i| {
            let ctx = app.state.ctx.clone();
            let caller = headroom::domain::Caller {
                actor: headroom::domain::Actor::User(format!("olga{i}")),
                role: Role::Operator,
                user_id: None,
            };
            tokio::spawn(async move {
                let request = headroom::provisioning::NewRequest {
                    fleet: "demo".into(),
                    machine_config: "spare-fsn1".into(),
                    template: None,
                    count: 1,
                    reason: format!("burst {i}"),
                };
                headroom::provisioning::requests::create(&ctx, &caller, &request)
                    .await
                    .unwrap()
                    .id
            })
        })
        .collect();
    let mut ids = Vec::new();
    for filing in filings {
        ids.push(filing.await.unwrap());
    }
    let bob = app.token_for("bob").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let detail = app
            .api_json(&format!("/api/v1/provisions/{}", ids[5]), &bob)
            .await;
        if check(&detail, "pin")["verdict"] == "pass" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pin was never verified: {detail}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Give any second check a moment to show itself before counting downloads.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let downloads = upstream.received_requests().await.unwrap().len();
    assert_eq!(downloads, 1, "one download for six filings");
    let checked_by: Vec<String> = sqlx::query_scalar("SELECT checked_by FROM pin_checks")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(checked_by, ["system"]);
    let (status, body) = approve(&app, &bob, ids[0]).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_check_the_setting_names_refuses_approval_on_its_warning() {
    // The demo config has no ssh key: a warning, which this instance will not approve past.
    let (app, _upstream, _fake) = app_with_tarball(false, |s| {
        s.plan_checks_blocking = BlockingChecks::parse(&["ssh_keys"]).unwrap();
    })
    .await;
    let id = app.file_request().await;
    let bob = app.token_for("bob").await;
    let detail = app
        .api_json(&format!("/api/v1/provisions/{id}"), &bob)
        .await;
    assert_eq!(check(&detail, "ssh_keys")["verdict"], "block", "{detail}");
    // The pin is not named here: unchecked, it only warns.
    assert_eq!(check(&detail, "pin")["verdict"], "warn", "{detail}");
    let (status, body) = approve(&app, &bob, id).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string()
            .contains("the plan check ssh_keys blocks approval"),
        "{body}"
    );
}
