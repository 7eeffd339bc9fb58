//! Browser-side hardening headers on every response, walked from the route table, and pages
//! that need nothing the Content-Security-Policy refuses (no inline script, style or handler).

use headroom::domain::Role;
use headroom::startup::route_table;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::Response;
use scraper::{Html, Selector};

use crate::helpers::{Session, TestApp};

/// Page routes that only ever answer an htmx fragment (no page shell around it).
pub(crate) const FRAGMENTS: [&str; 5] = [
    "/approvals/badge",
    "/fleets/{name}/chart",
    "/fleets/{name}/chart/live",
    "/fleets/{name}/now",
    "/dashboard/cards",
];

/// Page routes that answer something other than HTML.
pub(crate) const NOT_HTML: [&str; 6] = [
    "/healthz",
    "/readyz",
    "/metrics",
    "/static/{file}",
    "/audit/export",
    "/provisions/export",
];

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn is_html(headers: &HeaderMap) -> bool {
    header(headers, CONTENT_TYPE.as_str()).starts_with("text/html")
}

/// The four headers of an HTML response; `what` names the request in failures.
fn assert_page_headers(headers: &HeaderMap, what: &str) {
    let csp = header(headers, "content-security-policy");
    let directives: Vec<&str> = csp.split(';').map(str::trim).collect();
    for needed in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ] {
        assert!(
            directives.contains(&needed),
            "{what}: CSP lacks {needed}: {csp:?}"
        );
    }
    assert!(!csp.contains("unsafe-"), "{what}: {csp}");
    assert_eq!(header(headers, "x-frame-options"), "DENY", "{what}");
    assert_eq!(header(headers, "referrer-policy"), "same-origin", "{what}");
    assert_eq!(
        header(headers, "x-content-type-options"),
        "nosniff",
        "{what}"
    );
}

/// Checks a response's headers (and, for HTML, its markup); answers whether it was HTML.
async fn check(res: Response, what: &str) -> bool {
    let headers = res.headers().clone();
    assert_eq!(
        header(&headers, "x-content-type-options"),
        "nosniff",
        "{what}: every response carries nosniff"
    );
    if !is_html(&headers) {
        return false;
    }
    assert_page_headers(&headers, what);
    assert_nothing_inline(&res.text().await.unwrap(), what);
    true
}

/// Markup the policy would block: inline `<script>`, `<style>`, `style=`, `on*=` handlers,
/// htmx's `hx-on` (evaluated as script) and `javascript:` URLs.
fn assert_nothing_inline(html: &str, what: &str) {
    let doc = Html::parse_document(html);
    let all = Selector::parse("*").unwrap();
    for el in doc.select(&all) {
        let name = el.value().name();
        assert_ne!(name, "style", "{what}: a <style> element");
        if name == "script" {
            assert!(
                el.value().attr("src").is_some() && el.text().all(|t| t.trim().is_empty()),
                "{what}: an inline <script>"
            );
        }
        for (attr, value) in el.value().attrs() {
            let attr = attr.to_ascii_lowercase();
            let bare = attr.strip_prefix("data-").unwrap_or(&attr);
            assert!(
                attr != "style" && !attr.starts_with("on") && !bare.starts_with("hx-on"),
                "{what}: <{name} {attr}=…>"
            );
            assert!(
                !value
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("javascript:"),
                "{what}: a javascript: URL in {attr}"
            );
        }
    }
}

/// A concrete path for a GET route of the table, naming things that exist.
pub(crate) fn concrete(pattern: &str) -> String {
    let name = if pattern.starts_with("/templates") || pattern.starts_with("/api/v1/templates") {
        "yubaba-node"
    } else if pattern.starts_with("/fleets") || pattern.starts_with("/api/v1/fleets") {
        // The demo fleet, seeded with request 1 by `TestApp::file_request`.
        "demo"
    } else {
        "spare-fsn1"
    };
    headroom::web::paths::fill(
        pattern,
        &[
            ("username", "admin-user"),
            ("name", name),
            ("id", "1"),
            ("file", "app.css"),
            ("provider", "simulated"),
        ],
    )
}

async fn setup() -> (TestApp, Session) {
    let app = TestApp::spawn_with_config().await;
    let admin = app.session_for(Role::Admin).await;
    app.token_for("admin-user").await;
    // A request with id 1 exists so the provision pages have something to show.
    assert_eq!(app.file_request().await, 1);
    (app, admin)
}

#[tokio::test]
async fn every_page_route_answers_a_signed_in_admin_with_the_four_headers() {
    let (app, admin) = setup().await;
    let mut pages = 0;
    for route in route_table()
        .into_iter()
        .filter(|e| e.method == actix_web::http::Method::GET)
    {
        let path = concrete(route.path);
        let res = app.get(&path, &admin).await;
        let status = res.status();
        let html = check(res, &format!("GET {path}")).await;
        // /login redirects a signed-in admin home; it is checked signed out in the next test.
        if !route.path.starts_with("/api/")
            && !NOT_HTML.contains(&route.path)
            && route.path != "/login"
        {
            assert_eq!(status, 200, "GET {path} as admin");
            assert!(html, "GET {path} is a page");
            pages += 1;
            // The htmx partial of the same page.
            let res = app
                .client
                .get(app.url(&path))
                .header("Cookie", &admin.cookie)
                .header("HX-Request", "true")
                .send()
                .await
                .unwrap();
            check(res, &format!("htmx GET {path}")).await;
        }
    }
    assert!(pages >= 12, "walked {pages} pages");
}

#[tokio::test]
async fn error_pages_and_the_login_page_carry_the_four_headers() {
    let (app, admin) = setup().await;
    app.create_user("vera", Role::Viewer).await;
    let viewer = app.quick_session("vera").await;
    let anonymous = Session {
        cookie: String::new(),
        csrf: String::new(),
    };

    let login = app.client.get(app.url("/login")).send().await.unwrap();
    assert_eq!(login.status(), 200);
    assert!(check(login, "GET /login").await);

    let mut cases: Vec<(u16, &str, Response)> = Vec::new();
    cases.push((404, "unknown page", app.get("/no/such/page", &admin).await));
    cases.push((
        404,
        "unknown machine config",
        app.get("/machine-configs/nope", &admin).await,
    ));
    cases.push((403, "role refused", app.get("/users", &viewer).await));
    cases.push((
        403,
        "CSRF refused",
        app.client
            .post(app.url("/users"))
            .header("Cookie", &admin.cookie)
            .form(&[("username", "x")])
            .send()
            .await
            .unwrap(),
    ));
    cases.push((
        403,
        "login CSRF refused",
        app.client
            .post(app.url("/login"))
            .form(&[("username", "x"), ("password", "y"), ("csrf_token", "z")])
            .send()
            .await
            .unwrap(),
    ));
    cases.push((
        401,
        "wrong password",
        app.post_login("vera", "not the password").await,
    ));
    cases.push((422, "empty login form", app.post_login("", "").await));
    cases.push((
        422,
        "invalid form",
        app.post_form(
            "/users",
            &admin,
            &[("username", "Bad Name"), ("role", "root")],
        )
        .await,
    ));
    cases.push((
        400,
        "malformed query",
        // A field given twice does not parse.
        app.get("/login?next=/a&next=/b", &anonymous).await,
    ));
    for (status, what, res) in cases {
        assert_eq!(res.status(), status, "{what}");
        assert!(check(res, what).await, "{what} is an HTML page");
    }

    // Responses that are not pages still carry nosniff.
    for (what, res) in [
        ("redirect to login", app.get("/users", &anonymous).await),
        ("API problem", app.get("/api/v1/nope", &admin).await),
        ("stylesheet", app.get("/static/app.css", &admin).await),
        ("probe", app.get("/healthz", &anonymous).await),
    ] {
        assert!(!check(res, what).await, "{what} is not HTML");
    }
}
