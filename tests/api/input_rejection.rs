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
        let before = app.snapshot().await;
        let res = app.post_login("alice", &value).await;
        assert_eq!(res.status(), 422, "password {what}");
        assert_names_field(
            &res.text().await.unwrap(),
            "password",
            &format!("login password {what}"),
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "login password {what} stored something"
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
    // Hostile path segments: a name no user can have, an id that is no number: 404, never a
    // crash, and nothing stored.
    for (path, status) in [
        ("/users/%3Cscript%3E/role", 404),
        ("/users/x'%20OR%201=1--/disable", 404),
        ("/tokens/abc/revoke", 404),
        ("/tokens/99999999999999999999999/revoke", 404),
    ] {
        let before = app.snapshot().await;
        let res = app.post_form(path, &admin, &[("role", "viewer")]).await;
        assert_eq!(res.status(), status, "{path}");
        assert_eq!(app.snapshot().await, before, "{path} stored something");
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
    // (The overview no longer lists audit entries: the audit page does.)
    for page in ["/tokens", "/audit"] {
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
    let before = app.snapshot().await;
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
    assert_eq!(
        app.snapshot().await,
        before,
        "invalid JSON stored something"
    );
}

#[tokio::test]
async fn non_utf8_and_garbage_form_bodies_are_422_or_415_and_store_nothing() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    // Bytes that are no UTF-8 decode to a key the form does not know, so every field is
    // missing: a 422 naming the first. A body that is not a form at all is a 415.
    for (what, content_type, body, status, names) in [
        (
            "not UTF-8",
            "application/x-www-form-urlencoded",
            vec![0xff, 0xfe, b'=', 0x80],
            422,
            "username:",
        ),
        (
            "not a form",
            "text/plain",
            b"username=x".to_vec(),
            415,
            "form: Content-Type must be application/x-www-form-urlencoded",
        ),
    ] {
        let before = app.snapshot().await;
        let res = app
            .client
            .post(app.url("/users"))
            .header("Cookie", &admin.cookie)
            .header("X-CSRF-Token", &admin.csrf)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), status, "{what}");
        let text = res.text().await.unwrap();
        match names.strip_suffix(':') {
            Some(field) => assert_names_field(&text, field, what),
            None => assert!(text.contains(names), "{what}: no {names:?} in {text:.400}"),
        }
        assert_eq!(app.snapshot().await, before, "{what} stored something");
    }
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

#[tokio::test]
async fn the_user_token_catalogue_and_audit_api_reject_hostile_values_by_field() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("root", Role::Admin).await;
    app.create_user("target", Role::Viewer).await;
    let token = app.token_for("root").await;
    // First use records last_used_at; do it before taking snapshots.
    app.client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let fill = |pattern: &str, key: &str, value: &str| {
        headroom::web::paths::fill(pattern, &[(key, value)])
    };
    // Printable text (markup, SQL, bidi marks) is a valid label and a valid audit filter.
    let printable = |what: &str| {
        matches!(
            what,
            "html and script" | "sql fragment" | "unicode trickery"
        )
    };
    for (what, value) in hostile_values() {
        let mut cases: Vec<(String, reqwest::RequestBuilder, &str)> = vec![
            (
                "PATCH role".into(),
                app.client
                    .patch(app.url("/api/v1/users/target"))
                    .json(&serde_json::json!({ "role": value })),
                "role",
            ),
            (
                "POST tokens username".into(),
                app.client
                    .post(app.url("/api/v1/tokens"))
                    .json(&serde_json::json!({ "username": value, "label": "fine" })),
                "username",
            ),
        ];
        if !value.is_empty() {
            // An empty segment is another route (404), never a crash.
            cases.push((
                "PATCH path username".into(),
                app.client
                    .patch(app.url(&fill(headroom::api::paths::USER, "username", &value)))
                    .json(&serde_json::json!({ "disabled": true })),
                "username",
            ));
            cases.push((
                "revoke id".into(),
                app.client
                    .post(app.url(&fill(headroom::api::paths::TOKEN_REVOKE, "id", &value))),
                "id",
            ));
            cases.push((
                "refresh provider".into(),
                app.client.post(app.url(&fill(
                    headroom::api::paths::CATALOGUE_REFRESH,
                    "provider",
                    &value,
                ))),
                "provider",
            ));
            for param in ["from", "to", "cursor", "limit", "format"] {
                cases.push((
                    format!("audit {param}"),
                    app.client
                        .get(app.url(headroom::api::paths::AUDIT))
                        .query(&[(param, value.as_str())]),
                    param,
                ));
            }
        }
        if !printable(what) {
            cases.push((
                "POST tokens label".into(),
                app.client
                    .post(app.url("/api/v1/tokens"))
                    .json(&serde_json::json!({ "username": "target", "label": value })),
                "label",
            ));
            if !value.is_empty() {
                for param in ["actor", "action", "target"] {
                    cases.push((
                        format!("audit {param}"),
                        app.client
                            .get(app.url(headroom::api::paths::AUDIT))
                            .query(&[(param, value.as_str())]),
                        param,
                    ));
                }
            }
        }
        for (case, req, field) in cases {
            let before = app.snapshot().await;
            let res = req.bearer_auth(&token).send().await.unwrap();
            assert_eq!(res.status(), 422, "{case} {what}");
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(v["errors"][0]["field"], field, "{case} {what}: {v}");
            assert!(
                v["errors"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.len() > 5),
                "{case} {what}: {v}"
            );
            assert_eq!(
                app.snapshot().await,
                before,
                "{case} {what} stored something"
            );
        }
    }
}

/// The machine-config form of `spare-fsn1` as the demo seeds it.
fn spare_form() -> Vec<(&'static str, String)> {
    [
        ("name", "spare-fsn1"),
        ("provider", "simulated"),
        ("location", "fsn1"),
        ("server_type", "cx22"),
        ("image", "debian-12"),
        ("region", "eu-central"),
        ("zone", "fsn1-dc14"),
        ("arch", ""),
        ("mesh_tags", "tag:spare"),
        ("ssh_keys", "4711"),
        ("labels", "team=infra"),
        ("allocatable.memory_mb", "3584"),
        ("allocatable.cpu_millis", "2000"),
        ("taints", "dedicated=ops:NoSchedule"),
        ("template", "yubaba-node"),
        ("yubaba_channel", "stable"),
        ("yubaba_url", "https://releases.example.com/yubaba.tar.gz"),
        (
            "yubaba_sha256",
            "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect()
}

/// An operator's session and a used token (first use records last_used_at before any
/// snapshot is taken).
async fn operator(app: &TestApp) -> (crate::helpers::Session, String) {
    let op = app.session_for(Role::Operator).await;
    let token = app.token_for("operator-user").await;
    let res = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    (op, token)
}

/// The fields a 422 problem names.
async fn problem_fields(res: reqwest::Response) -> Vec<String> {
    let v: serde_json::Value = res.json().await.unwrap();
    v["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("a problem with errors: {v}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn the_config_update_form_and_put_reject_hostile_values_by_field_and_store_nothing() {
    let app = TestApp::spawn_with_config().await;
    let (op, token) = operator(&app).await;
    // Fields where empty means "use the default" or "none".
    let may_be_empty = [
        "image",
        "arch",
        "mesh_tags",
        "ssh_keys",
        "labels",
        "allocatable.memory_mb",
        "allocatable.cpu_millis",
        "taints",
        "template",
        "yubaba_channel",
    ];
    let fields: Vec<&str> = spare_form().iter().map(|(k, _)| *k).collect();
    for (index, field) in fields.iter().enumerate() {
        // An update names its config in the path; the form's name field is not read.
        if *field == "name" {
            continue;
        }
        for (what, value) in hostile_values() {
            if value.is_empty() && may_be_empty.contains(field) {
                continue;
            }
            let mut form = spare_form();
            form[index].1 = value.clone();
            let borrowed: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let before = app.snapshot().await;
            let res = app
                .post_form("/machine-configs/spare-fsn1", &op, &borrowed)
                .await;
            assert_eq!(res.status(), 422, "update {field} {what}");
            let html = res.text().await.unwrap();
            let messages = texts(&html, ".error-summary li");
            assert!(
                messages.iter().any(|m| m.starts_with(&format!("{field}:"))),
                "update {field} {what}: {messages:?}"
            );
            assert!(
                !html.contains("<script>alert"),
                "update {field} {what}: markup echoed unescaped"
            );
            assert_eq!(
                app.snapshot().await,
                before,
                "update {field} {what} stored something"
            );
        }
    }
    let base = serde_json::json!({
        "name": "spare-fsn1", "provider": "simulated", "location": "fsn1", "server_type": "cx22",
        "region": "eu-central", "zone": "fsn1-dc14", "mesh_tags": ["tag:spare"],
        "labels": {"team": "infra"}, "yubaba_channel": "stable",
        "yubaba_url": "https://releases.example.com/yubaba.tar.gz",
        "yubaba_sha256": "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10"
    });
    // As with the form, the path names the config; the body's name is not read.
    for field in [
        "provider",
        "location",
        "server_type",
        "region",
        "zone",
        "arch",
        "template",
        "yubaba_channel",
        "yubaba_url",
        "yubaba_sha256",
    ] {
        for (what, value) in hostile_values() {
            if value.is_empty() && ["arch", "template", "yubaba_channel"].contains(&field) {
                continue;
            }
            let mut body = base.clone();
            body[field] = value.into();
            let before = app.snapshot().await;
            let res = app
                .client
                .put(app.url("/api/v1/machine-configs/spare-fsn1"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 422, "PUT {field} {what}");
            let named = problem_fields(res).await;
            assert!(
                named.iter().any(|f| f == field),
                "PUT {field} {what}: {named:?}"
            );
            assert_eq!(
                app.snapshot().await,
                before,
                "PUT {field} {what} stored something"
            );
        }
    }
}

#[tokio::test]
async fn the_template_update_form_and_put_reject_hostile_bodies_and_store_nothing() {
    let app = TestApp::spawn_with_config().await;
    let (op, token) = operator(&app).await;
    // A template is text: markup, SQL or bidi marks in it are valid template text (their
    // output is judged when rendered), so only the values that break a body rule are here.
    let mut bodies: Vec<(String, String)> = hostile_values()
        .into_iter()
        .filter(|(what, _)| matches!(*what, "empty" | "control characters"))
        .map(|(what, v)| (what.to_owned(), v))
        .collect();
    bodies.extend(
        [
            ("blank", "   "),
            ("a NUL after the header", "#cloud-config\n\u{0}"),
            ("a broken tag", "#cloud-config\n{% if %}\n"),
            ("an unclosed expression", "#cloud-config\n{{ unclosed\n"),
        ]
        .map(|(w, v)| (w.to_owned(), v.to_owned())),
    );
    bodies.push((
        "130 KB".into(),
        format!("#cloud-config\n# {}\n", "x".repeat(130 * 1024)),
    ));
    for (what, body) in &bodies {
        let before = app.snapshot().await;
        let res = app
            .post_form(
                "/templates/yubaba-node",
                &op,
                &[("body", body), ("config", "spare-fsn1")],
            )
            .await;
        assert_eq!(res.status(), 422, "save body {what}");
        let html = res.text().await.unwrap();
        assert!(
            texts(&html, ".error-summary li")
                .iter()
                .any(|m| m.starts_with("body:")),
            "save body {what}"
        );
        assert!(!html.contains("<script>alert"), "save body {what}: echoed");
        assert_eq!(
            app.snapshot().await,
            before,
            "save body {what} stored something"
        );
        let res = app
            .client
            .put(app.url("/api/v1/templates/yubaba-node"))
            .bearer_auth(&token)
            .json(&serde_json::json!({ "body": body }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "PUT body {what}");
        assert_eq!(problem_fields(res).await, ["body"], "PUT body {what}");
        assert_eq!(
            app.snapshot().await,
            before,
            "PUT body {what} stored something"
        );
    }
    // Over the body limit: refused before parsing; wrong encodings: 400 and 415.
    let before = app.snapshot().await;
    let huge = format!("#cloud-config\n# {}\n", "x".repeat(300 * 1024));
    let res = app
        .post_form(
            "/templates/yubaba-node",
            &op,
            &[("body", &huge), ("config", "spare-fsn1")],
        )
        .await;
    assert_eq!(res.status(), 413, "save 300 KB");
    let put = |content_type: &'static str, body: String| {
        app.client
            .put(app.url("/api/v1/templates/yubaba-node"))
            .bearer_auth(&token)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let huge_json = serde_json::json!({ "body": huge }).to_string();
    for (what, content_type, body, status) in [
        ("300 KB", "application/json", huge_json, 413),
        (
            "invalid JSON",
            "application/json",
            "{\"body\": ".to_owned(),
            400,
        ),
        (
            "a form",
            "application/x-www-form-urlencoded",
            "body=x".to_owned(),
            415,
        ),
    ] {
        let res = put(content_type, body).await.unwrap();
        assert_eq!(res.status(), status, "PUT {what}");
        assert_eq!(app.snapshot().await, before, "PUT {what} stored something");
    }
}

#[tokio::test]
async fn the_password_form_names_current_and_confirm_password_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Viewer).await;
    let good = "a brand new passphrase";
    let post = |current: String, new: String, confirm: String| {
        let s = s.clone();
        let app = &app;
        async move {
            app.post_form(
                "/account/password",
                &s,
                &[
                    ("current_password", &current),
                    ("new_password", &new),
                    ("confirm_password", &confirm),
                ],
            )
            .await
        }
    };
    for (what, value) in hostile_values() {
        // A confirmation that differs from the new password.
        let before = app.snapshot().await;
        let res = post(crate::helpers::PASSWORD.into(), good.into(), value.clone()).await;
        assert_eq!(res.status(), 422, "confirm_password {what}");
        assert_names_field(
            &res.text().await.unwrap(),
            "confirm_password",
            &format!("confirm_password {what}"),
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "confirm_password {what} stored something"
        );

        // A current password that is not the user's. Empty is refused before any check;
        // anything else is checked and, by design, audited as a failed change.
        let res = post(value.clone(), good.into(), good.into()).await;
        assert_eq!(res.status(), 422, "current_password {what}");
        let html = res.text().await.unwrap();
        assert_names_field(
            &html,
            "current_password",
            &format!("current_password {what}"),
        );
        let after = app.snapshot().await;
        let except_audit = |snap: &[(String, i64, String)]| -> Vec<(String, i64, String)> {
            snap.iter()
                // audit_head (PostgreSQL only) follows the audit log's newest id.
                .filter(|(t, _, _)| {
                    !["audit_log", "audit_head", "login_throttle"].contains(&t.as_str())
                })
                .cloned()
                .collect()
        };
        assert_eq!(
            except_audit(&after),
            except_audit(&before),
            "current_password {what} changed the account"
        );
        let audit_before = before.iter().find(|(t, _, _)| t == "audit_log").unwrap().1;
        let audit_after = after.iter().find(|(t, _, _)| t == "audit_log").unwrap().1;
        if value.is_empty() {
            assert_eq!(after, before, "current_password {what} stored something");
        } else {
            assert_eq!(audit_after, audit_before + 1, "current_password {what}");
            assert_eq!(
                app.audit_actions().await.last().map(String::as_str),
                Some("auth.password_change_failed"),
                "current_password {what}"
            );
        }
        // Each wrong guess counts towards the per-account lock; start every case afresh.
        sqlx::query("DELETE FROM login_throttle")
            .execute(&app.pool)
            .await
            .unwrap();
    }
    // The password is unchanged: the old one still signs in.
    assert!(app
        .login("viewer-user", crate::helpers::PASSWORD)
        .await
        .is_ok());
}

#[tokio::test]
async fn the_preview_and_render_api_reject_a_hostile_tunnel_token_and_store_nothing() {
    let app = TestApp::spawn_with_config().await;
    let (op, token) = operator(&app).await;
    for (what, value) in hostile_values() {
        // Empty means "no tunnel"; a bidi mark is a printable character by the secret rule
        // (the yaml filter escapes it, as cloud_init.rs shows).
        if value.is_empty() || what == "unicode trickery" {
            continue;
        }
        let before = app.snapshot().await;
        let res = app
            .htmx_post(
                "/preview",
                &op,
                &[
                    ("config", "spare-fsn1"),
                    ("template", "yubaba-node"),
                    ("body", ""),
                    ("tunnel_token", &value),
                ],
            )
            .await;
        assert_eq!(res.status(), 422, "preview tunnel_token {what}");
        let html = res.text().await.unwrap();
        assert!(
            html.contains("tunnel_token: must be"),
            "preview tunnel_token {what}: {html:.300}"
        );
        assert!(
            !html.contains(&value),
            "preview tunnel_token {what}: echoed"
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "preview tunnel_token {what} stored something"
        );
        let res = app
            .client
            .post(app.url("/api/v1/render"))
            .bearer_auth(&token)
            .json(&serde_json::json!({
                "machine_config": "spare-fsn1",
                "secrets": {"tunnel_token": value}
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "render tunnel_token {what}");
        assert_eq!(
            problem_fields(res).await,
            ["secrets.tunnel_token"],
            "render tunnel_token {what}"
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "render tunnel_token {what} stored something"
        );
    }
}
