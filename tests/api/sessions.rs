//! Session expiry and logout.

use std::time::Duration;

use headroom::config::Settings;
use headroom::domain::Role;

use crate::helpers::{location, TestApp};

#[tokio::test]
async fn an_idle_session_expires() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let idle = Settings::default().session_idle;
    app.clock.advance(idle - Duration::from_secs(60));
    assert_eq!(
        app.get("/", &s).await.status(),
        200,
        "still within the idle limit"
    );
    app.clock.advance(idle + Duration::from_secs(1));
    let res = app.get("/", &s).await;
    assert_eq!(res.status(), 303);
    assert!(location(&res).starts_with("/login"));
    assert_eq!(app.count("sessions").await, 0, "the expired row is deleted");
}

#[tokio::test]
async fn a_busy_session_still_ends_at_the_absolute_limit() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let settings = Settings::default();
    let step = settings.session_idle / 2;
    let mut elapsed = Duration::ZERO;
    while elapsed + step < settings.session_absolute {
        app.clock.advance(step);
        elapsed += step;
        assert_eq!(
            app.get("/", &s).await.status(),
            200,
            "active after {elapsed:?}"
        );
    }
    app.clock.advance(step + Duration::from_secs(1));
    assert!(
        elapsed + step >= settings.session_absolute,
        "now past the absolute limit"
    );
    assert_eq!(app.get("/", &s).await.status(), 303);
}

#[tokio::test]
async fn logout_deletes_the_session_and_the_cookie_stops_working() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let res = app.post_form("/logout", &s, &[]).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login");
    let cleared = res.headers().get_all("set-cookie").iter().any(|v| {
        let v = v.to_str().unwrap();
        v.starts_with("headroom_session=;") && v.contains("Max-Age=0")
    });
    assert!(cleared);
    assert_eq!(app.count("sessions").await, 0);
    assert_eq!(app.get("/", &s).await.status(), 303);
    assert!(app
        .audit_actions()
        .await
        .contains(&"auth.logout".to_owned()));
}

#[tokio::test]
async fn changing_the_password_ends_other_sessions_but_keeps_this_one() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let a = app.login("alice", crate::helpers::PASSWORD).await.unwrap();
    let b = app.login("alice", crate::helpers::PASSWORD).await.unwrap();
    let new = "a brand new passphrase";
    let res = app
        .post_form(
            "/account/password",
            &a,
            &[
                ("current_password", crate::helpers::PASSWORD),
                ("new_password", new),
                ("confirm_password", new),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(app.get("/", &a).await.status(), 200);
    assert_eq!(app.get("/", &b).await.status(), 303);
    assert!(app.login("alice", new).await.is_ok());
    assert!(app.login("alice", crate::helpers::PASSWORD).await.is_err());
    assert!(app
        .audit_actions()
        .await
        .contains(&"user.password_changed".to_owned()));
}

#[tokio::test]
async fn a_wrong_current_password_changes_nothing() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let a = app.login("alice", crate::helpers::PASSWORD).await.unwrap();
    let before = app.snapshot().await;
    let res = app
        .post_form(
            "/account/password",
            &a,
            &[
                ("current_password", "not my password"),
                ("new_password", "another long one!"),
                ("confirm_password", "another long one!"),
            ],
        )
        .await;
    assert_eq!(res.status(), 422);
    let html = res.text().await.unwrap();
    assert!(crate::helpers::texts(&html, ".field-error")
        .iter()
        .any(|t| t.contains("not your current password")));
    // Only the attempt itself is recorded: counted by the form's throttle and audited.
    let after = app.snapshot().await;
    for table in ["users", "sessions", "api_tokens"] {
        let row = |snap: &Vec<(String, i64, String)>| snap.iter().find(|r| r.0 == table).cloned();
        assert_eq!(row(&after), row(&before), "{table} changed");
    }
    assert_eq!(
        app.audit_actions().await.last().map(String::as_str),
        Some("auth.password_change_failed")
    );
    assert_eq!(
        app.count("login_throttle WHERE key = 'password_change:alice'")
            .await,
        1
    );
}
