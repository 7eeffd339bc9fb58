//! CSRF on every unsafe route, enumerated from the route table so a new route cannot skip it.

use headroom::domain::Role;
use headroom::startup::route_table;

use crate::helpers::TestApp;

/// A concrete path for a route pattern.
pub fn sample_path(pattern: &str) -> String {
    headroom::web::paths::fill(
        pattern,
        &[("username", "target"), ("id", "1"), ("file", "app.css")],
    )
}

/// Plausible bodies so that only the CSRF token decides the outcome.
fn plausible_fields() -> Vec<(&'static str, &'static str)> {
    vec![
        ("username", "newuser"),
        ("role", "operator"),
        ("password", "a perfectly fine password"),
        ("label", "automation"),
        ("current_password", crate::helpers::PASSWORD),
        ("new_password", "a perfectly fine password"),
        ("confirm_password", "a perfectly fine password"),
        ("body", "#cloud-config\nhostname: {{ hostname | yaml }}\n"),
        ("config", "spare-fsn1"),
        ("provider", "simulated"),
    ]
}

async fn setup() -> (TestApp, crate::helpers::Session) {
    let app = TestApp::spawn_with_config().await;
    app.create_user("target", Role::Viewer).await;
    let admin = app.session_for(Role::Admin).await;
    // A token with id 1 exists so the revoke route has something to act on.
    app.token_for("target").await;
    (app, admin)
}

#[tokio::test]
async fn every_unsafe_route_refuses_a_missing_or_wrong_csrf_token_and_changes_nothing() {
    let (app, admin) = setup().await;
    let unsafe_routes: Vec<_> = route_table()
        .into_iter()
        .filter(|e| e.is_unsafe())
        .collect();
    assert!(
        unsafe_routes.len() >= 9,
        "the table lists the unsafe routes: {unsafe_routes:?}"
    );
    for route in &unsafe_routes {
        let path = sample_path(route.path);
        let before = app.snapshot().await;
        let fields = plausible_fields();

        // Form body without the token.
        let res = app
            .client
            .request(crate::helpers::method(&route.method), app.url(&path))
            .header("Cookie", &admin.cookie)
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{route:?} without token");
        // Form body with a wrong token.
        let mut wrong = fields.clone();
        wrong.push((
            "csrf_token",
            "0000000000000000000000000000000000000000000000000000000000000000",
        ));
        let res = app
            .client
            .request(crate::helpers::method(&route.method), app.url(&path))
            .header("Cookie", &admin.cookie)
            .form(&wrong)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{route:?} with a wrong token");
        // Header with a wrong token (the htmx path), JSON body (the API path).
        let res = app.client.request(crate::helpers::method(&route.method), app.url(&path)).header("Cookie", &admin.cookie).header("X-CSRF-Token", "forged").json(&serde_json::json!({"username": "x", "role": "admin", "password": "a perfectly fine password"})).send().await.unwrap();
        assert_eq!(res.status(), 403, "{route:?} with a wrong header token");
        // Another session's token is wrong too.
        let other = app.quick_session("target").await;
        let res = app
            .client
            .request(crate::helpers::method(&route.method), app.url(&path))
            .header("Cookie", &admin.cookie)
            .header("X-CSRF-Token", &other.csrf)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{route:?} with another session's token");
        sqlx::query(
            "DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE username = 'target')",
        )
        .execute(&app.pool)
        .await
        .unwrap();

        assert_eq!(
            app.snapshot().await,
            before,
            "{route:?} changed something without a valid token"
        );
    }
}

#[tokio::test]
async fn the_same_requests_with_the_right_token_pass_the_csrf_check() {
    let (app, admin) = setup().await;
    for route in route_table()
        .into_iter()
        .filter(|e| e.is_unsafe() && e.path != "/logout")
    {
        let path = sample_path(route.path);
        let mut fields = plausible_fields();
        fields.push(("csrf_token", &admin.csrf));
        let res = app
            .client
            .request(crate::helpers::method(&route.method), app.url(&path))
            .header("Cookie", &admin.cookie)
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_ne!(res.status(), 403, "{route:?} refused a valid token");
    }
}

#[tokio::test]
async fn pages_carry_the_session_token_in_forms_and_htmx_headers() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Admin).await;
    let html = app.get("/users", &s).await.text().await.unwrap();
    let doc = scraper::Html::parse_document(&html);
    let body = doc
        .select(&scraper::Selector::parse("body").unwrap())
        .next()
        .unwrap();
    let hx: serde_json::Value =
        serde_json::from_str(body.value().attr("hx-headers").unwrap()).unwrap();
    assert_eq!(hx["X-CSRF-Token"], s.csrf.as_str());
    let forms = doc
        .select(&scraper::Selector::parse("form[method=post]").unwrap())
        .count();
    let with_token = doc
        .select(&scraper::Selector::parse("form[method=post] input[name=csrf_token]").unwrap())
        .count();
    assert!(forms > 0);
    assert_eq!(forms, with_token, "every POST form carries csrf_token");
}

/// Posts the login form with the given pre-login cookie and field values.
async fn post_login_with(
    app: &TestApp,
    cookie: &str,
    field: &str,
    password: &str,
) -> reqwest::Response {
    app.client
        .post(app.url("/login"))
        .header(
            "Cookie",
            format!("{}={cookie}", headroom::auth::csrf::LOGIN_COOKIE),
        )
        .form(&[
            ("username", "alice"),
            ("password", password),
            ("csrf_token", field),
        ])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_login_form_posted_with_a_cookie_and_field_chosen_by_the_attacker_is_refused() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Admin).await;
    let before = app.snapshot().await;
    // What a sibling subdomain could plant: the old unsigned shape, and the signed shape with
    // a made-up signature, each sent as both the cookie and the field.
    let made_up_mac = headroom::auth::secret_token::generate("");
    let made_up = [
        "0000000000000000000000000000000000000000000000000000000000000000".to_owned(),
        headroom::auth::secret_token::generate(""),
        format!(
            "{}.{}.{made_up_mac}",
            app.clock_start(),
            headroom::auth::secret_token::generate("")
        ),
        "attacker".to_owned(),
    ];
    for forged in &made_up {
        let res = post_login_with(&app, forged, forged, crate::helpers::PASSWORD).await;
        assert_eq!(res.status(), 403, "planted pair {forged:?}");
        assert!(
            crate::helpers::cookie_value(res.headers(), "headroom_session").is_none(),
            "no session for {forged:?}"
        );
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused login changes nothing"
    );

    // The pair this instance signed still signs in.
    let (cookie, token) = app.login_form().await;
    let value = cookie.split_once('=').unwrap().1;
    assert_ne!(value, made_up[0]);
    let res = post_login_with(&app, value, &token, crate::helpers::PASSWORD).await;
    assert_eq!(res.status(), 303);
    assert!(crate::helpers::cookie_value(res.headers(), "headroom_session").is_some());
}

#[tokio::test]
async fn a_login_token_signed_by_another_instance_is_refused() {
    let app = TestApp::spawn().await;
    let other = TestApp::spawn().await;
    app.create_user("alice", Role::Admin).await;
    // A genuine pair, but from another instance (another database, another key).
    let (cookie, token) = other.login_form().await;
    let value = cookie.split_once('=').unwrap().1;
    let res = post_login_with(&app, value, &token, crate::helpers::PASSWORD).await;
    assert_eq!(res.status(), 403);
    // The login page replaces the foreign cookie with one of its own.
    let res = app
        .client
        .get(app.url("/login"))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    let fresh = crate::helpers::cookie_value(res.headers(), "headroom_login_csrf").unwrap();
    assert_ne!(fresh, value);
    assert_eq!(
        crate::helpers::input_value(&res.text().await.unwrap(), "csrf_token").unwrap(),
        fresh
    );
    let res = post_login_with(&app, &fresh, &fresh, crate::helpers::PASSWORD).await;
    assert_eq!(res.status(), 303);
}

#[tokio::test]
async fn a_stale_login_token_is_refused_and_the_login_page_issues_a_new_one() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Admin).await;
    let (cookie, token) = app.login_form().await;
    let value = cookie.split_once('=').unwrap().1.to_owned();
    app.clock.advance(std::time::Duration::from_millis(
        headroom::auth::csrf::LOGIN_TOKEN_TTL_MS as u64 + 60_000,
    ));
    let res = post_login_with(&app, &value, &token, crate::helpers::PASSWORD).await;
    assert_eq!(res.status(), 403);
    let (cookie, token) = app.login_form().await;
    assert_ne!(cookie.split_once('=').unwrap().1, value);
    let res = post_login_with(
        &app,
        cookie.split_once('=').unwrap().1,
        &token,
        crate::helpers::PASSWORD,
    )
    .await;
    assert_eq!(res.status(), 303);
}

#[tokio::test]
async fn the_login_key_is_created_once_and_kept_in_the_database() {
    let app = TestApp::spawn().await;
    let (cookie, _) = app.login_form().await;
    let value = cookie.split_once('=').unwrap().1;
    // What a restart on the same database loads: the same key, so open login forms survive.
    let reloaded = headroom::auth::csrf::LoginKey::load_or_create(&app.pool, app.clock_start())
        .await
        .unwrap();
    assert!(reloaded.verify(value, app.clock_start()));
    assert_eq!(app.count("instance_keys").await, 1);
    let fresh_db = TestApp::spawn().await;
    let foreign = headroom::auth::csrf::LoginKey::load_or_create(&fresh_db.pool, 0)
        .await
        .unwrap();
    assert!(!foreign.verify(value, app.clock_start()));
}
