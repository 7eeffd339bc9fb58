//! Pages answer through the layout's helpers: htmx requests get a partial, boosted navigations
//! and history restores the whole document, and every HTML answer that differs by
//! `HX-Request` says so in `Vary`.

use headroom::domain::Role;
use reqwest::Response;
use scraper::{Html, Selector};

use crate::helpers::{Session, TestApp};

/// GET `path` as `s` with extra request headers.
async fn get_with(app: &TestApp, path: &str, s: &Session, headers: &[(&str, &str)]) -> Response {
    let mut req = app.client.get(app.url(path)).header("Cookie", &s.cookie);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

/// True when the body is the whole document (it has the page title and main navigation).
fn is_whole_page(html: &str) -> bool {
    let doc = Html::parse_document(html);
    let title = Selector::parse("head > title").unwrap();
    let nav = Selector::parse("nav[aria-label=Main]").unwrap();
    doc.select(&title).next().is_some() && doc.select(&nav).next().is_some()
}

/// The response's `Vary` names `HX-Request`.
fn varies_by_hx_request(res: &Response) -> bool {
    res.headers()
        .get_all("vary")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case("HX-Request"))
}

#[tokio::test]
async fn boosted_and_history_restore_requests_get_the_whole_page_and_plain_htmx_the_partial() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    for path in ["/provisions", "/audit"] {
        let partial = get_with(&app, path, &viewer, &[("HX-Request", "true")]).await;
        assert_eq!(partial.status(), 200, "htmx GET {path}");
        assert!(varies_by_hx_request(&partial), "htmx GET {path}: Vary");
        assert!(
            !is_whole_page(&partial.text().await.unwrap()),
            "htmx GET {path} should be the partial"
        );
        for extra in ["HX-Boosted", "HX-History-Restore-Request"] {
            let res = get_with(
                &app,
                path,
                &viewer,
                &[("HX-Request", "true"), (extra, "true")],
            )
            .await;
            assert_eq!(res.status(), 200, "{extra} GET {path}");
            assert!(varies_by_hx_request(&res), "{extra} GET {path}: Vary");
            assert!(
                is_whole_page(&res.text().await.unwrap()),
                "{extra} GET {path} should be the whole page"
            );
        }
    }
}

#[tokio::test]
async fn a_boosted_poll_of_the_progress_partial_gets_the_whole_request_page() {
    let app = TestApp::spawn_with_config().await;
    let viewer = app.session_for(Role::Viewer).await;
    let id = app.file_request().await;
    let path = format!("/provisions/{id}/progress");
    let polled = get_with(&app, &path, &viewer, &[("HX-Request", "true")]).await;
    assert_eq!(polled.status(), 200);
    assert!(varies_by_hx_request(&polled));
    assert!(!is_whole_page(&polled.text().await.unwrap()));
    let boosted = get_with(
        &app,
        &path,
        &viewer,
        &[("HX-Request", "true"), ("HX-Boosted", "true")],
    )
    .await;
    assert_eq!(boosted.status(), 200);
    assert!(is_whole_page(&boosted.text().await.unwrap()));
}

#[tokio::test]
async fn fragments_carry_vary_hx_request() {
    let app = TestApp::spawn().await;
    let approver = app.session_for(Role::Approver).await;
    for path in ["/approvals/badge", "/dashboard/cards"] {
        let res = get_with(&app, path, &approver, &[("HX-Request", "true")]).await;
        assert_eq!(res.status(), 200, "GET {path}");
        assert!(varies_by_hx_request(&res), "GET {path}: Vary");
        assert_eq!(
            res.headers().get("cache-control").unwrap(),
            "no-store",
            "GET {path}"
        );
    }
    let admin = app.session_for(Role::Admin).await;
    app.post_form(
        "/users",
        &admin,
        &[
            ("username", "frank"),
            ("role", "viewer"),
            ("password", "frank's long password"),
        ],
    )
    .await;
    let row = app
        .htmx_post("/users/frank/role", &admin, &[("role", "operator")])
        .await;
    assert_eq!(row.status(), 200);
    assert!(varies_by_hx_request(&row), "the updated row: Vary");
    assert!(!is_whole_page(&row.text().await.unwrap()));
}

#[tokio::test]
async fn a_write_from_htmx_answers_hx_redirect_and_a_plain_form_see_other() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let fields = |name: &'static str| {
        [
            ("username", name),
            ("role", "viewer"),
            ("password", "a perfectly fine password"),
        ]
    };
    let htmx = app.htmx_post("/users", &admin, &fields("gina")).await;
    assert_eq!(htmx.status(), 200);
    assert_eq!(htmx.headers().get("hx-redirect").unwrap(), "/users");
    assert!(varies_by_hx_request(&htmx));
    let plain = app.post_form("/users", &admin, &fields("hank")).await;
    assert_eq!(plain.status(), 303);
    assert_eq!(plain.headers().get("location").unwrap(), "/users");
    assert!(varies_by_hx_request(&plain));
}
