//! Hostile input to every form and API route: empty, 10 KB, control characters, HTML and
//! script, SQL fragments, invalid JSON. Each gets a 4xx with a message naming the field, and
//! nothing is stored.

use headroom::domain::Role;

use crate::helpers::{texts, TestApp};

fn hostile_values() -> Vec<(&'static str, String)> {
    vec![
        ("empty", String::new()),
        ("10 KB", "a".repeat(10 * 1024)),
        ("control characters", "ab\u{0}c\nd\u{1b}[31m".to_owned()),
        (
            "html and script",
            "<script>alert(1)</script><img src=x onerror=alert(2)>".to_owned(),
        ),
        ("sql fragment", "x'); DROP TABLE users; --".to_owned()),
        ("unicode trickery", "admin\u{202e}nimda".to_owned()),
    ]
}

/// Messages shown next to fields or in the summary, as "field: message".
fn field_messages(html: &str) -> Vec<String> {
    let mut out = texts(html, ".error-summary li");
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse(".field.invalid").unwrap();
    for f in doc.select(&sel) {
        let name = f
            .select(&scraper::Selector::parse("input, select").unwrap())
            .next()
            .and_then(|i| i.value().attr("name"))
            .unwrap_or("");
        let msg: String = f
            .select(&scraper::Selector::parse(".field-error").unwrap())
            .flat_map(|e| e.text())
            .collect();
        out.push(format!("{name}: {msg}"));
    }
    out
}

fn assert_names_field(html: &str, field: &str, context: &str) {
    let messages = field_messages(html);
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with(&format!("{field}:")) && m.len() > field.len() + 3),
        "{context}: no message naming {field}: {messages:?}"
    );
    // Hostile markup never comes back live.
    assert!(
        !html.contains("<script>alert"),
        "{context}: script echoed unescaped"
    );
    assert!(
        !html.contains("<img src=x"),
        "{context}: markup echoed unescaped"
    );
}

#[tokio::test]
async fn the_login_form_rejects_hostile_values_by_field() {
    let app = TestApp::spawn().await;
    for (what, value) in hostile_values() {
        let before = app.snapshot().await;
        let res = app.post_login(&value, "some password here").await;
        assert_eq!(res.status(), 422, "username {what}");
        assert_names_field(
            &res.text().await.unwrap(),
            "username",
            &format!("login username {what}"),
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "login username {what} stored something"
        );
    }
    for (what, value) in hostile_values()
        .into_iter()
        .filter(|(w, _)| matches!(*w, "empty" | "control characters"))
    {
        let res = app.post_login("alice", &value).await;
        assert_eq!(res.status(), 422, "password {what}");
        assert_names_field(
            &res.text().await.unwrap(),
            "password",
            &format!("login password {what}"),
        );
    }
}

#[tokio::test]
async fn the_create_user_form_rejects_hostile_values_by_field_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    for field in ["username", "role", "password"] {
        for (what, value) in hostile_values() {
            let mut fields = [
                ("username", "validname".to_owned()),
                ("role", "viewer".to_owned()),
                ("password", "a perfectly fine password".to_owned()),
            ];
            for f in fields.iter_mut() {
                if f.0 == field {
                    f.1 = value.clone();
                }
            }
            if field == "password"
                && (what == "html and script"
                    || what == "sql fragment"
                    || what == "unicode trickery")
            {
                continue; // Any printable text of 12+ characters is a valid password.
            }
            let before = app.snapshot().await;
            let borrowed: Vec<(&str, &str)> =
                fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let res = app.post_form("/users", &admin, &borrowed).await;
            assert_eq!(res.status(), 422, "{field} {what}");
            assert_names_field(
                &res.text().await.unwrap(),
                field,
                &format!("create user {field} {what}"),
            );
            assert_eq!(
                app.snapshot().await,
                before,
                "create user {field} {what} stored something"
            );
        }
    }
}

#[tokio::test]
async fn the_role_token_and_password_forms_reject_hostile_values() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    app.create_user("target", Role::Viewer).await;
    for (what, value) in hostile_values() {
        let before = app.snapshot().await;
        // Role change (htmx row): 422 with the rule in the row.
        let res = app
            .htmx_post("/users/target/role", &admin, &[("role", &value)])
            .await;
        assert_eq!(res.status(), 422, "role {what}");
        let body = res.text().await.unwrap();
        assert!(body.contains("role: must be one of"), "role {what}: {body}");
        // Token label.
        if what != "html and script" && what != "sql fragment" && what != "unicode trickery" {
            let res = app
                .post_form(
                    "/tokens",
                    &admin,
                    &[("username", "target"), ("label", &value)],
                )
                .await;
            assert_eq!(res.status(), 422, "label {what}");
            assert_names_field(
                &res.text().await.unwrap(),
                "label",
                &format!("token label {what}"),
            );
        }
        // Token user.
        let res = app
            .post_form(
                "/tokens",
                &admin,
                &[("username", &value), ("label", "fine")],
            )
            .await;
        assert_eq!(res.status(), 422, "token username {what}");
        assert_names_field(
            &res.text().await.unwrap(),
            "username",
            &format!("token username {what}"),
        );
        // New password.
        if what == "empty" || what == "10 KB" || what == "control characters" {
            let res = app
                .post_form(
                    "/account/password",
                    &admin,
                    &[
                        ("current_password", crate::helpers::PASSWORD),
                        ("new_password", &value),
                        ("confirm_password", &value),
                    ],
                )
                .await;
            assert_eq!(res.status(), 422, "new_password {what}");
            assert_names_field(
                &res.text().await.unwrap(),
                "new_password",
                &format!("new password {what}"),
            );
        }
        assert_eq!(app.snapshot().await, before, "{what} stored something");
    }
    // Hostile path segments: unknown users are 404, never a crash.
    for path in [
        "/users/%3Cscript%3E/role",
        "/users/x'%20OR%201=1--/disable",
        "/tokens/abc/revoke",
        "/tokens/99999999999999999999999/revoke",
    ] {
        let res = app.post_form(path, &admin, &[("role", "viewer")]).await;
        assert!(
            res.status() == 404 || res.status() == 422,
            "{path}: {}",
            res.status()
        );
    }
}

#[tokio::test]
async fn markup_in_stored_values_is_escaped_on_every_page() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    // Labels may hold any printable text; they must come back inert.
    let res = app
        .post_form(
            "/tokens",
            &admin,
            &[
                ("username", "admin-user"),
                ("label", "<script>alert(1)</script>"),
            ],
        )
        .await;
    assert_eq!(res.status(), 201);
    for page in ["/tokens", "/audit", "/"] {
        let html = app.get(page, &admin).await.text().await.unwrap();
        assert!(!html.contains("<script>alert(1)</script>"), "{page}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
    }
}

#[tokio::test]
async fn the_api_rejects_hostile_values_by_field() {
    let app = TestApp::spawn().await;
    app.create_user("root", Role::Admin).await;
    let token = app.token_for("root").await;
    // First use records last_used_at; do it before taking snapshots.
    app.client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    for field in ["username", "role"] {
        for (what, value) in hostile_values() {
            let mut body = serde_json::json!({"username": "validname", "role": "viewer", "password": "a perfectly fine password"});
            body[field] = serde_json::Value::String(value);
            let before = app.snapshot().await;
            let res = app
                .client
                .post(app.url("/api/v1/users"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 422, "{field} {what}");
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(v["errors"][0]["field"], field, "{field} {what}: {v}");
            assert_eq!(app.snapshot().await, before);
        }
    }
    let res = app
        .client
        .post(app.url("/api/v1/users"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"username\": \"a\", ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}

#[tokio::test]
async fn non_utf8_and_garbage_form_bodies_are_4xx() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let res = app
        .client
        .post(app.url("/users"))
        .header("Cookie", &admin.cookie)
        .header("X-CSRF-Token", &admin.csrf)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(vec![0xff, 0xfe, b'=', 0x80])
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    let res = app
        .client
        .post(app.url("/users"))
        .header("Cookie", &admin.cookie)
        .header("X-CSRF-Token", &admin.csrf)
        .header("content-type", "text/plain")
        .body("username=x")
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test]
async fn the_pin_check_api_rejects_hostile_names_and_checks_nothing() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("op", Role::Operator).await;
    let token = app.token_for("op").await;
    // First use records last_used_at; do it before taking snapshots.
    app.client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    for (what, value) in hostile_values() {
        let before = app.snapshot().await;
        let path = headroom::web::paths::fill(
            headroom::api::paths::MACHINE_CONFIG_PIN_CHECK,
            &[("name", &value)],
        );
        let res = app
            .client
            .post(app.url(&path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        if value.is_empty() {
            // An empty segment matches no route at all.
            assert_eq!(res.status(), 404, "name {what}");
        } else {
            assert_eq!(res.status(), 422, "name {what}");
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(v["errors"][0]["field"], "name", "name {what}: {v}");
            assert!(
                v["errors"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("RFC 1123")),
                "name {what}: {v}"
            );
        }
        assert_eq!(
            app.snapshot().await,
            before,
            "name {what} changed something"
        );
        assert_eq!(app.count("pin_checks").await, 0, "name {what} was checked");
    }
}
