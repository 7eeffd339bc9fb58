//! Login: success, failure, throttling, CSRF on the form.

use std::time::Duration;

use headroom::domain::Role;

use crate::helpers::{location, texts, TestApp, PASSWORD};

#[tokio::test]
async fn login_succeeds_and_the_home_page_greets_the_user() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Operator).await;
    let s = app.login("alice", PASSWORD).await.expect("login");
    let home = app.get("/", &s).await;
    assert_eq!(home.status(), 200);
    let html = home.text().await.unwrap();
    assert!(texts(&html, ".whoami a")
        .iter()
        .any(|t| t.contains("alice")));
    assert!(app
        .audit_actions()
        .await
        .contains(&"auth.login_succeeded".to_owned()));
}

#[tokio::test]
async fn session_cookie_is_httponly_and_samesite_strict() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let set = session_set_cookie(&app, None).await;
    assert!(set.contains("HttpOnly"));
    assert!(set.contains("SameSite=Strict"));
    assert!(!set.contains("Secure"), "no TLS here, so no Secure flag");

    let tls = TestApp::spawn_with(|s| s.cookie_secure = true).await;
    tls.create_user("alice", Role::Viewer).await;
    let set = session_set_cookie(&tls, None).await;
    assert!(set.contains("Secure"));
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_generic_answer() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let wrong = app.post_login("alice", "not the password at all").await;
    assert_eq!(wrong.status(), 401);
    let a = texts(&wrong.text().await.unwrap(), "p.error-text");
    let unknown = app.post_login("mallory", "not the password at all").await;
    assert_eq!(unknown.status(), 401);
    let b = texts(&unknown.text().await.unwrap(), "p.error-text");
    assert_eq!(a, b);
    assert_eq!(a, vec!["Wrong username or password.".to_owned()]);
    let failures = app
        .audit_actions()
        .await
        .iter()
        .filter(|a| *a == "auth.login_failed")
        .count();
    assert_eq!(failures, 2);
}

#[tokio::test]
async fn disabled_users_cannot_log_in() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let admin = app.session_for(Role::Admin).await;
    app.post_form("/users/alice/disable", &admin, &[]).await;
    let res = app.post_login("alice", PASSWORD).await;
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn repeated_failures_lock_the_account_with_growing_delays() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let base = headroom::config::Settings::default().throttle;
    for _ in 0..base.account_failures {
        assert_eq!(
            app.post_login("alice", "wrong password 123").await.status(),
            401
        );
    }
    // Locked now: even the right password is refused, with Retry-After.
    let locked = app.post_login("alice", PASSWORD).await;
    assert_eq!(locked.status(), 429);
    let retry: u64 = locked.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry, base.base_delay.as_secs());

    // After the delay one more failure locks for twice as long.
    app.clock
        .advance(base.base_delay + Duration::from_millis(1));
    assert_eq!(
        app.post_login("alice", "wrong password 123").await.status(),
        401
    );
    let locked = app.post_login("alice", PASSWORD).await;
    assert_eq!(locked.status(), 429);
    let retry: u64 = locked.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry, base.base_delay.as_secs() * 2);

    app.clock
        .advance(base.base_delay * 2 + Duration::from_millis(1));
    assert!(
        app.login("alice", PASSWORD).await.is_ok(),
        "the lock is temporary"
    );
    // A success clears the account's record.
    assert_eq!(
        app.count("login_throttle WHERE key = 'user:alice'").await,
        0
    );
}

#[tokio::test]
async fn many_failures_from_one_address_lock_that_address() {
    let app = TestApp::spawn_with(|s| s.throttle.address_failures = 6).await;
    app.create_user("alice", Role::Viewer).await;
    // Spraying different names never trips a per-account lock but does trip the address.
    for i in 0..6 {
        assert_eq!(
            app.post_login(&format!("user{i}"), "wrong password 123")
                .await
                .status(),
            401
        );
    }
    assert_eq!(app.post_login("alice", PASSWORD).await.status(), 429);
}

#[tokio::test]
async fn login_without_the_form_csrf_token_is_refused() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let (cookie, _) = app.login_form().await;
    let no_token = app
        .client
        .post(app.url("/login"))
        .header("Cookie", &cookie)
        .form(&[("username", "alice"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), 403);
    let wrong = app
        .client
        .post(app.url("/login"))
        .header("Cookie", &cookie)
        .form(&[
            ("username", "alice"),
            ("password", PASSWORD),
            ("csrf_token", "forged"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);
    let no_cookie = app
        .client
        .post(app.url("/login"))
        .form(&[
            ("username", "alice"),
            ("password", PASSWORD),
            ("csrf_token", "x"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(no_cookie.status(), 403);
    assert_eq!(app.count("sessions").await, 0);
}

#[tokio::test]
async fn login_redirects_only_to_local_paths() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Viewer).await;
    let (cookie, token) = app.login_form().await;
    let res = app
        .client
        .post(app.url("/login"))
        .header("Cookie", &cookie)
        .form(&[
            ("username", "alice"),
            ("password", PASSWORD),
            ("csrf_token", &token),
            ("next", "//evil.example/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/");
    let (cookie, token) = app.login_form().await;
    let res = app
        .client
        .post(app.url("/login"))
        .header("Cookie", &cookie)
        .form(&[
            ("username", "alice"),
            ("password", PASSWORD),
            ("csrf_token", &token),
            ("next", "/audit?actor=alice"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&res), "/audit?actor=alice");
}

#[tokio::test]
async fn anonymous_pages_redirect_to_login_with_next() {
    let app = TestApp::spawn().await;
    let res = app
        .client
        .get(app.url("/audit?actor=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?next=/audit%3Factor%3Dx");
}

async fn failed_login_from(app: &TestApp, forwarded_for: &str, name: &str) -> reqwest::StatusCode {
    let (cookie, token) = app.login_form().await;
    app.client
        .post(app.url("/login"))
        .header("Cookie", cookie)
        .header("X-Forwarded-For", forwarded_for)
        .form(&[
            ("username", name),
            ("password", "wrong password 123"),
            ("csrf_token", token.as_str()),
        ])
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_is_throttled_on_its_own() {
    let app = TestApp::spawn_with(|s| {
        s.throttle.address_failures = 3;
        s.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    app.create_user("alice", Role::Viewer).await;
    for i in 0..3 {
        assert_eq!(
            failed_login_from(&app, "198.51.100.7", &format!("ghost{i}")).await,
            401
        );
    }
    // That client is locked; another one behind the same proxy is not.
    assert_eq!(failed_login_from(&app, "198.51.100.7", "ghost9").await, 429);
    assert_eq!(
        failed_login_from(&app, "203.0.113.5, 198.51.100.99", "ghost9").await,
        401
    );
    let addrs: Vec<String> = sqlx::query_scalar("SELECT json_extract(details, '$.client_addr') FROM audit_log WHERE action = 'auth.login_failed'").fetch_all(&app.pool).await.unwrap();
    assert_eq!(
        addrs.last().unwrap(),
        "198.51.100.99",
        "the right-most untrusted address is the client"
    );
}

#[tokio::test]
async fn forwarded_headers_from_an_untrusted_peer_are_ignored() {
    let app = TestApp::spawn_with(|s| s.throttle.address_failures = 3).await;
    app.create_user("alice", Role::Viewer).await;
    // A forged X-Forwarded-Proto does not change the cookie flags (checked while alice can
    // still sign in, so a session cookie really is issued).
    let set = session_set_cookie(&app, Some(("X-Forwarded-Proto", "https"))).await;
    assert!(!set.contains("Secure"), "{set}");
    // Rotating X-Forwarded-For does not dodge the per-address throttle.
    for i in 0..3 {
        assert_eq!(
            failed_login_from(&app, &format!("192.0.2.{i}"), &format!("ghost{i}")).await,
            401
        );
    }
    assert_eq!(failed_login_from(&app, "192.0.2.200", "ghost7").await, 429);
}

#[tokio::test]
async fn a_trusted_proxy_terminating_tls_gets_secure_cookies() {
    let app = TestApp::spawn_with(|s| s.trusted_proxies = vec!["127.0.0.1".parse().unwrap()]).await;
    app.create_user("alice", Role::Viewer).await;
    let session = session_set_cookie(&app, Some(("X-Forwarded-Proto", "https"))).await;
    assert!(session.contains("Secure"), "{session}");
}

/// Signs alice in through the form with one extra request header; the session's Set-Cookie line.
async fn session_set_cookie(app: &TestApp, header: Option<(&str, &str)>) -> String {
    let (cookie, token) = app.login_form().await;
    let mut req = app.client.post(app.url("/login")).header("Cookie", cookie);
    if let Some((name, value)) = header {
        req = req.header(name, value);
    }
    let res = req
        .form(&[
            ("username", "alice"),
            ("password", PASSWORD),
            ("csrf_token", token.as_str()),
        ])
        .send()
        .await
        .unwrap();
    res.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("headroom_session="))
        .expect("signed in")
}
