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
    assert!(
        set.starts_with("headroom_session="),
        "plain name without TLS: {set}"
    );

    let tls = TestApp::spawn_with(|s| s.cookie_secure = true).await;
    tls.create_user("alice", Role::Viewer).await;
    let set = session_set_cookie(&tls, None).await;
    assert!(set.contains("Secure"));
    assert!(set.starts_with("__Host-headroom_session="), "{set}");
}

/// The `Set-Cookie` line for cookie `name` in a response.
fn set_cookie_line(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// What browsers demand of a `__Host-` cookie, or they drop it.
fn assert_host_prefix_rules(line: &str) {
    assert!(line.starts_with("__Host-"), "{line}");
    for attr in ["Path=/", "Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(line.split("; ").any(|a| a == attr), "{attr} in {line}");
    }
    assert!(!line.to_ascii_lowercase().contains("domain="), "{line}");
}

#[tokio::test]
async fn with_cookie_secure_the_cookies_carry_the_host_prefix_and_login_works() {
    let app = TestApp::spawn_with(|s| s.cookie_secure = true).await;
    app.create_user("alice", Role::Viewer).await;
    // The test client speaks http and would not send Secure cookies back: send them by hand,
    // as a browser on https would.
    let page = app.client.get(app.url("/login")).send().await.unwrap();
    assert!(set_cookie_line(&page, "headroom_login_csrf").is_none());
    let line = set_cookie_line(&page, "__Host-headroom_login_csrf").expect("login cookie");
    assert_host_prefix_rules(&line);
    let value = crate::helpers::cookie_value(page.headers(), "__Host-headroom_login_csrf").unwrap();
    let token = crate::helpers::input_value(&page.text().await.unwrap(), "csrf_token").unwrap();
    assert_eq!(token, value);
    let post_login = |cookie: String| {
        app.client
            .post(app.url("/login"))
            .header("Cookie", cookie)
            .form(&[
                ("username", "alice"),
                ("password", PASSWORD),
                ("csrf_token", token.as_str()),
            ])
            .send()
    };

    // Over TLS the plain name is what a sibling subdomain can plant, so it is not read.
    let planted = post_login(format!("headroom_login_csrf={value}"))
        .await
        .unwrap();
    assert_eq!(planted.status(), 403);
    assert_eq!(app.count("sessions").await, 0);

    let res = post_login(format!("__Host-headroom_login_csrf={value}"))
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let session_line = set_cookie_line(&res, "__Host-headroom_session").expect("session cookie");
    assert_host_prefix_rules(&session_line);
    assert!(set_cookie_line(&res, "headroom_session").is_none());
    let spent = set_cookie_line(&res, "__Host-headroom_login_csrf").expect("login cookie spent");
    assert!(spent.contains("Max-Age=0"), "{spent}");
    let session = crate::helpers::cookie_value(res.headers(), "__Host-headroom_session").unwrap();

    // The session works under its prefixed name only.
    let account = |cookie: String| {
        app.client
            .get(app.url("/account"))
            .header("Cookie", cookie)
            .send()
    };
    let plain = account(format!("headroom_session={session}"))
        .await
        .unwrap();
    assert_eq!(
        plain.status(),
        303,
        "the plain name is not a session over TLS"
    );
    let page = account(format!("__Host-headroom_session={session}"))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csrf = crate::helpers::input_value(&page.text().await.unwrap(), "csrf_token").unwrap();

    // Logging out clears the prefixed cookie.
    let res = app
        .client
        .post(app.url("/logout"))
        .header("Cookie", format!("__Host-headroom_session={session}"))
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let gone = set_cookie_line(&res, "__Host-headroom_session").expect("cleared");
    assert!(gone.contains("Max-Age=0"), "{gone}");
    assert_eq!(app.count("sessions").await, 0);
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
    let addrs: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM audit_log WHERE action = 'auth.login_failed'",
        crate::helpers::store::json_member("details", "client_addr")
    )))
    .fetch_all(&app.pool)
    .await
    .unwrap();
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
    assert!(session.starts_with("__Host-headroom_session="), "{session}");
}

#[tokio::test]
async fn ipv6_clients_in_one_64_share_an_address_throttle() {
    let app = TestApp::spawn_with(|s| {
        s.throttle.address_failures = 3;
        s.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    // Each guess from a fresh address of one /64, at a fresh account: only the address
    // throttle can stop them.
    for (i, addr) in ["2001:db8:7:7::1", "2001:db8:7:7::2", "2001:db8:7:7:ffff::3"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            failed_login_from(&app, addr, &format!("ghost{i}")).await,
            401
        );
    }
    assert_eq!(
        failed_login_from(&app, "2001:db8:7:7:1234:5678:9abc:def0", "ghost8").await,
        429,
        "a new address in the same /64 is the same client"
    );
    assert_eq!(
        failed_login_from(&app, "2001:db8:7:8::1", "ghost9").await,
        401,
        "the next /64 is another client"
    );
}

/// Signs alice in through the form, sending one extra request header with both the page and
/// the post as a browser behind a proxy would; the session's Set-Cookie line, whichever name
/// (plain or `__Host-`) it was given.
async fn session_set_cookie(app: &TestApp, header: Option<(&str, &str)>) -> String {
    let with = |req: reqwest::RequestBuilder| match header {
        Some((name, value)) => req.header(name, value),
        None => req,
    };
    let page = with(app.client.get(app.url("/login")))
        .send()
        .await
        .unwrap();
    let cookie = ["headroom_login_csrf", "__Host-headroom_login_csrf"]
        .into_iter()
        .find_map(|name| {
            crate::helpers::cookie_value(page.headers(), name).map(|v| format!("{name}={v}"))
        })
        .expect("login csrf cookie");
    let token = crate::helpers::input_value(&page.text().await.unwrap(), "csrf_token").unwrap();
    let res = with(app.client.post(app.url("/login")).header("Cookie", cookie))
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
        .find(|c| c.starts_with("headroom_session=") || c.starts_with("__Host-headroom_session="))
        .expect("signed in")
}
