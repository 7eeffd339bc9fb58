//! CSRF on every unsafe route, enumerated from the route table so a new route cannot skip it:
//! the token, and where the browser says the request came from (`Sec-Fetch-Site`, `Origin`).

use headroom::domain::Role;
use headroom::startup::route_table;

use crate::helpers::TestApp;

/// The number of unsafe (non-GET) routes, counted by hand from `web/mod.rs` and `api/mod.rs`:
/// 25 pages (login, logout, password, 4 user, 2 token, 6 provision, 3 config, 2 template,
/// preview, catalogue refresh, 3 fleet) and 19 API (users, user patch, 2 token, 3 config,
/// 2 template, render, catalogue refresh, 3 fleet, 5 provision). A new unsafe route must
/// change this number, so it cannot arrive without this test walking it.
const UNSAFE_ROUTES: usize = 44;

/// A config whose tarball host is loopback, for the pin-check routes: the outbound policy
/// refuses it before connecting (`spare-fsn1`'s host would be looked up in DNS).
const PIN_CONFIG: &str = "pin-local";

/// A concrete path for a route pattern, naming seeded fixtures so a request that passes the
/// CSRF check reaches a real resource.
pub fn sample_path(pattern: &str) -> String {
    let name = if pattern.ends_with("/pin-check") {
        PIN_CONFIG
    } else if pattern.contains("/templates/") {
        "yubaba-node"
    } else if pattern.contains("/fleets/") {
        "demo"
    } else {
        "spare-fsn1"
    };
    headroom::web::paths::fill(
        pattern,
        &[
            ("username", "target"),
            ("id", "1"),
            ("file", "app.css"),
            ("name", name),
            ("provider", "simulated"),
        ],
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
    // A request with id 1 exists so the provision pages have something to show.
    assert_eq!(app.file_request().await, 1);
    let op = app.session_for(Role::Operator).await;
    let res = app
        .post_form(
            "/machine-configs",
            &op,
            &[
                ("name", PIN_CONFIG),
                ("provider", "simulated"),
                ("location", "fsn1"),
                ("server_type", "cx22"),
                ("image", "debian-12"),
                ("region", "eu-central"),
                ("zone", "fsn1-dc14"),
                ("mesh_tags", "tag:spare"),
                ("allocatable.memory_mb", "3584"),
                ("allocatable.cpu_millis", "2000"),
                ("template", "yubaba-node"),
                ("yubaba_channel", "stable"),
                ("yubaba_url", "https://127.0.0.1:1/x"),
                (
                    "yubaba_sha256",
                    "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10",
                ),
            ],
        )
        .await;
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    (app, admin)
}

#[tokio::test]
async fn every_unsafe_route_refuses_a_missing_or_wrong_token_or_another_site_and_changes_nothing() {
    let (app, admin) = setup().await;
    let unsafe_routes: Vec<_> = route_table()
        .into_iter()
        .filter(|e| e.is_unsafe())
        .collect();
    assert_eq!(
        unsafe_routes.len(),
        UNSAFE_ROUTES,
        "the route table's unsafe routes changed; walk them and update the count: \
         {unsafe_routes:?}"
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
        // The right token, but the browser says another site sent it: a harvested token must
        // not work from a sibling subdomain or a foreign page.
        let mut with_token = fields.clone();
        with_token.push(("csrf_token", &admin.csrf));
        for (headers, named) in another_site() {
            let mut req = app
                .client
                .request(crate::helpers::method(&route.method), app.url(&path))
                .header("Cookie", &admin.cookie);
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            let res = req.form(&with_token).send().await.unwrap();
            assert_eq!(res.status(), 403, "{route:?} with {headers:?}");
            let body = res.text().await.unwrap();
            assert!(body.contains(named), "{route:?} with {headers:?}: {body}");
        }
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

/// Headers a browser sends on a request another site started, each with the words the
/// refusal must contain.
fn another_site() -> [(&'static [(&'static str, &'static str)], &'static str); 5] {
    [
        (
            &[("Sec-Fetch-Site", "cross-site")],
            "Sec-Fetch-Site: cross-site",
        ),
        (
            &[
                ("Sec-Fetch-Site", "same-site"),
                ("Origin", "https://evil.example.com"),
            ],
            "Sec-Fetch-Site: same-site",
        ),
        // Browsers without fetch metadata still send Origin on a cross-origin POST.
        (
            &[("Origin", "https://evil.example.com")],
            "Origin: https://evil.example.com is not this console",
        ),
        (&[("Origin", "null")], "Origin: null"),
        // A page on another port of the same host is another origin.
        (
            &[
                ("Sec-Fetch-Site", "same-origin"),
                ("Origin", "http://127.0.0.1:1"),
            ],
            "Origin: http://127.0.0.1:1",
        ),
    ]
}

#[tokio::test]
async fn the_same_requests_with_the_right_token_pass_the_csrf_check() {
    let (app, admin) = setup().await;
    // Without fetch metadata (curl, old browsers), and as a browser posting from our own page.
    let own_page = [
        ("Sec-Fetch-Site", "same-origin"),
        ("Origin", app.address.as_str()),
    ];
    for headers in [&[][..], &own_page[..]] {
        for route in route_table()
            .into_iter()
            .filter(|e| e.is_unsafe() && e.path != "/logout")
        {
            let path = sample_path(route.path);
            let mut fields = plausible_fields();
            fields.push(("csrf_token", &admin.csrf));
            let mut req = app
                .client
                .request(crate::helpers::method(&route.method), app.url(&path))
                .header("Cookie", &admin.cookie);
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            let res = req.form(&fields).send().await.unwrap();
            assert_ne!(
                res.status(),
                403,
                "{route:?} with {headers:?} refused a valid token"
            );
        }
    }
}

/// Every `<form>` posting in `html`: (its action, whether it carries a non-empty
/// `csrf_token` equal to `token`).
fn post_forms(html: &str, token: &str) -> Vec<(String, bool)> {
    let doc = scraper::Html::parse_document(html);
    let form = scraper::Selector::parse("form").unwrap();
    let field = scraper::Selector::parse("input[name=csrf_token]").unwrap();
    doc.select(&form)
        .filter(|f| {
            f.value()
                .attr("method")
                .is_some_and(|m| m.eq_ignore_ascii_case("post"))
        })
        .map(|f| {
            let carries = f
                .select(&field)
                .any(|i| i.value().attr("value") == Some(token));
            (f.value().attr("action").unwrap_or("").to_owned(), carries)
        })
        .collect()
}

#[tokio::test]
async fn every_page_carries_the_session_token_in_each_post_form_and_its_htmx_headers() {
    let (app, admin) = setup().await;
    let pages: Vec<String> = headroom::web::endpoints()
        .into_iter()
        .filter(|e| e.method == actix_web::http::Method::GET)
        .filter(|e| !crate::headers::NOT_HTML.contains(&e.path) && e.path != "/login")
        .filter(|e| !crate::headers::FRAGMENTS.contains(&e.path))
        .map(|e| sample_path(e.path))
        .collect();
    let mut forms = 0;
    for path in &pages {
        let res = app.get(path, &admin).await;
        assert_eq!(res.status(), 200, "GET {path} as admin");
        let html = res.text().await.unwrap();
        let doc = scraper::Html::parse_document(&html);
        let body = doc
            .select(&scraper::Selector::parse("body").unwrap())
            .next()
            .unwrap();
        let hx: serde_json::Value = serde_json::from_str(
            body.value()
                .attr("hx-headers")
                .unwrap_or_else(|| panic!("{path}: <body> has no hx-headers")),
        )
        .unwrap();
        assert_eq!(
            hx["X-CSRF-Token"],
            admin.csrf.as_str(),
            "{path}: hx-headers"
        );
        for (action, carries) in post_forms(&html, &admin.csrf) {
            assert!(
                carries,
                "{path}: the form posting to {action:?} lacks the session's csrf_token"
            );
            forms += 1;
        }
    }
    // Logout on every page, plus the create, edit, role, token and refresh forms.
    assert!(
        forms > pages.len(),
        "{forms} forms on {} pages",
        pages.len()
    );
    // The login page, signed out, carries the pre-login token instead.
    let (cookie, token) = app.login_form().await;
    let html = app
        .client
        .get(app.url("/login"))
        .header("Cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let login = post_forms(&html, &token);
    assert_eq!(login.len(), 1, "the login page has its form: {login:?}");
    assert!(login[0].1, "the login form carries the pre-login token");
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
    let login_keys: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM instance_keys WHERE purpose = 'login_csrf'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(login_keys, 1);
    let fresh_db = TestApp::spawn().await;
    let foreign = headroom::auth::csrf::LoginKey::load_or_create(&fresh_db.pool, 0)
        .await
        .unwrap();
    assert!(!foreign.verify(value, app.clock_start()));
}

/// Posts the login form with a harvested pre-login pair and extra request headers.
async fn post_login_from(
    app: &TestApp,
    cookie: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    // A fresh client each time: nothing of an earlier answer rides along.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut req = client.post(app.url("/login")).header("Cookie", cookie);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.form(&[
        ("csrf_token", token),
        ("username", "alice"),
        ("password", crate::helpers::PASSWORD),
    ])
    .send()
    .await
    .unwrap()
}

#[tokio::test]
async fn a_harvested_login_pair_planted_from_a_sibling_subdomain_is_refused() {
    let app = TestApp::spawn().await;
    app.create_user("alice", Role::Admin).await;
    // The attacker fetches the login page themselves: a genuine, signed pair.
    let (cookie, token) = app.login_form().await;
    let before = app.snapshot().await;
    let sibling: &[&[(&str, &str)]] = &[
        // The tester's repro: what the victim's browser sends for the sibling's form.
        &[
            ("Origin", "https://evil.example.com"),
            ("Sec-Fetch-Site", "same-site"),
        ],
        &[("Sec-Fetch-Site", "same-site")],
        &[("Sec-Fetch-Site", "cross-site")],
        &[("Origin", "https://evil.example.com")],
        &[("Origin", "null")],
        // Our host and port, but not the scheme this request reached us with.
        &[("Origin", &app.address.replace("http://", "https://"))],
    ];
    for headers in sibling {
        let res = post_login_from(&app, &cookie, &token, headers).await;
        assert_eq!(res.status(), 403, "{headers:?}");
        assert!(
            crate::helpers::cookie_value(res.headers(), "headroom_session").is_none(),
            "no session for {headers:?}"
        );
    }
    assert_eq!(
        app.snapshot().await,
        before,
        "refused logins change nothing (no throttle count, no audit entry)"
    );

    // The same pair from our own login page signs in.
    let res = post_login_from(
        &app,
        &cookie,
        &token,
        &[
            ("Sec-Fetch-Site", "same-origin"),
            ("Origin", app.address.as_str()),
        ],
    )
    .await;
    assert_eq!(res.status(), 303);
    assert!(crate::helpers::cookie_value(res.headers(), "headroom_session").is_some());
}

#[tokio::test]
async fn a_bearer_token_api_call_is_not_judged_by_origin() {
    let app = TestApp::spawn().await;
    app.create_user("root", Role::Admin).await;
    let token = app.token_for("root").await;
    // A script on another origin holding a token is not a browser riding on cookies: the
    // token is the whole proof, so Origin and Sec-Fetch-Site do not matter.
    let res = app
        .client
        .post(app.url("/api/v1/users"))
        .bearer_auth(&token)
        .header("Origin", "https://evil.example.com")
        .header("Sec-Fetch-Site", "cross-site")
        .json(&serde_json::json!({"username": "carol", "role": "viewer", "password": "a perfectly fine password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(app.count("users").await, 2);
}

/// No CSRF token, no plan, approve or fleet change through a cookie.
#[tokio::test]
async fn approve_reject_cancel_file_and_fleet_changes_without_a_csrf_token_change_nothing() {
    let app = TestApp::spawn_with_config().await;
    let id = app.file_request().await;
    let appr = app.session_for(Role::Approver).await;
    let before = app.snapshot().await;
    for path in [
        format!("/provisions/{id}/approve"),
        format!("/provisions/{id}/reject"),
        format!("/provisions/{id}/cancel"),
        "/provisions".to_owned(),
        "/fleets".to_owned(),
        "/fleets/demo/delete".to_owned(),
    ] {
        let res = app
            .client
            .post(app.url(&path))
            .header("Cookie", &appr.cookie)
            .form(&[("reason", "x"), ("fleet", "demo"), ("count", "1")])
            .send()
            .await
            .unwrap();
        assert!(
            res.status() == reqwest::StatusCode::FORBIDDEN
                || res.status() == reqwest::StatusCode::NOT_FOUND,
            "{path}: {}",
            res.status()
        );
    }
    assert_eq!(app.snapshot().await, before);
}
