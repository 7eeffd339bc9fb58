//! What an operator can make the automatic pin check (`pin_check_on_request`) do: it goes
//! through the same outbound policy as the config page's button, it concerns the exact
//! (url, sha256) of the request's config version, and what filing many requests costs.
//! Every address is loopback; a refusal is shown by a loopback listener that is not
//! allow-listed and counts connections.
//!
//! The last two failed before each automatic check claimed its own (url, sha256) and a slot
//! of a few, and a fresh failed verdict was not downloaded again.

use std::time::{Duration, Instant};

use headroom::domain::Caller;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::helpers::TestApp;
use crate::outbound::{serve_tarball, set_tarball, tarball, TlsFake};
use crate::plan_checks::app_with_tarball;

/// Audit entries of pin checks so far.
async fn pin_audits(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'pin.checked'")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Waits (at most 10 s) until `n` pin checks were audited.
async fn until_audited(app: &TestApp, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pin_audits(app).await < n {
        assert!(Instant::now() < deadline, "fewer than {n} pin checks ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_automatic_check_is_refused_where_the_button_is() {
    // An operator points the config at a loopback port nobody allow-listed.
    let (app, _upstream, _allowed) = app_with_tarball(true, |_| {}).await;
    let internal = TlsFake::counting("127.0.0.1").await;
    let (_, sha) = tarball();
    set_tarball(&app, &internal.url("/admin"), &sha).await;
    app.file_request().await;
    until_audited(&app, 1).await;
    assert_eq!(internal.accepted(), 0, "no connection to a refused address");
    let (verdict, message, by): (String, String, String) =
        sqlx::query_as("SELECT verdict, message, checked_by FROM pin_checks")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((verdict.as_str(), by.as_str()), ("error", "system"));
    assert!(
        !message.contains(&internal.addr.port().to_string()),
        "the refusal does not describe the network: {message}"
    );
}

#[tokio::test]
async fn a_verdict_for_a_later_config_version_does_not_clear_a_request() {
    // Filed against one version (its pin unchecked), then the config moves to a version
    // whose pin verifies: the request is superseded, so that verdict can never approve it.
    let (app, _upstream, fake) = app_with_tarball(false, |_| {}).await;
    let (_, sha) = tarball();
    set_tarball(&app, &fake.url("/v1.tar.gz"), &sha).await;
    let id = app.file_request().await;
    set_tarball(&app, &fake.url("/yubaba.tar.gz"), &sha).await;
    let outcome =
        headroom::machine_setup::pins::check(&app.state.ctx, &Caller::system(), "spare-fsn1")
            .await
            .unwrap();
    assert!(outcome.ok(), "{outcome:?}");
    let bob = app.token_for("bob").await;
    let res = app
        .client
        .post(app.url(&format!("/api/v1/provisions/{id}/approve")))
        .bearer_auth(&bob)
        .json(&serde_json::json!({ "comment": "" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 409);
    let body = res.text().await.unwrap();
    assert!(
        body.contains("is now superseded: machine config spare-fsn1 has version"),
        "{body}"
    );
}

#[tokio::test]
async fn filings_against_a_pin_that_fails_download_it_once() {
    // The served bytes do not match the pin: every filing's check downloads again, audits
    // again and queues behind the last, without bound.
    let (app, upstream, fake) = app_with_tarball(true, |_| {}).await;
    let wrong = "0".repeat(64);
    set_tarball(&app, &fake.url("/yubaba.tar.gz"), &wrong).await;
    let filings = 4;
    for _ in 0..filings {
        app.file_request().await;
    }
    // The first check ran; any later one would show itself within a moment.
    until_audited(&app, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let downloads = upstream.received_requests().await.unwrap().len();
    assert_eq!(
        downloads, 1,
        "{filings} filings of one failing pin downloaded it {downloads} times"
    );
}

#[tokio::test]
async fn a_slow_pin_does_not_hold_another_pins_check() {
    // Config A's tarball answers after 3 s (an operator's slow or stalling host); a check of
    // an unrelated, fast pin B started meanwhile waits behind it on the one global lock.
    let (app, upstream, fake) = app_with_tarball(true, |_| {}).await;
    let (bytes, sha) = tarball();
    Mock::given(method("GET"))
        .and(path("/slow.tar.gz"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_bytes(bytes.clone())
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&upstream)
        .await;
    serve_tarball(&upstream, "/fast.tar.gz", bytes).await;
    let ctx = app.state.ctx.clone();
    let (slow, fast) = (fake.url("/slow.tar.gz"), fake.url("/fast.tar.gz"));
    let sha_slow = sha.clone();
    let held = tokio::spawn(async move {
        headroom::machine_setup::pins::check_for_request(&ctx, &slow, &sha_slow).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let outcome = headroom::machine_setup::pins::check_for_request(&app.state.ctx, &fast, &sha)
        .await
        .unwrap()
        .expect("a check ran");
    let waited = started.elapsed();
    assert!(outcome.ok(), "{outcome:?}");
    held.await.unwrap().unwrap();
    assert!(
        waited < Duration::from_secs(1),
        "pin B's check waited {waited:?} for pin A's download"
    );
}
