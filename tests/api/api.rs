//! The JSON API skeleton: /me, /users, problem+json, OpenAPI.

use headroom::domain::Role;

use crate::helpers::TestApp;

async fn admin_token(app: &TestApp) -> String {
    app.create_user("root", Role::Admin).await;
    app.token_for("root").await
}

fn assert_problem(v: &serde_json::Value, status: u16) {
    assert_eq!(v["status"], status, "{v}");
    assert!(
        v["type"].is_string() && v["title"].is_string() && v["detail"].is_string(),
        "{v}"
    );
}

#[tokio::test]
async fn me_answers_for_a_session_too() {
    let app = TestApp::spawn().await;
    let s = app.session_for(Role::Approver).await;
    let v: serde_json::Value = app.get("/api/v1/me", &s).await.json().await.unwrap();
    assert_eq!(
        v,
        serde_json::json!({"username": "approver-user", "role": "approver"})
    );
}

#[tokio::test]
async fn users_can_be_created_and_listed() {
    let app = TestApp::spawn().await;
    let token = admin_token(&app).await;
    let res = app.client.post(app.url("/api/v1/users")).bearer_auth(&token)
        .json(&serde_json::json!({"username": "carol", "role": "approver", "password": "a perfectly fine password"})).send().await.unwrap();
    assert_eq!(res.status(), 201);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["username"], "carol");
    assert_eq!(v["role"], "approver");
    let list: Vec<serde_json::Value> = app
        .client
        .get(app.url("/api/v1/users"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        list.iter()
            .map(|u| u["username"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["carol", "root"]
    );
    assert!(list.iter().all(|u| u.get("password_hash").is_none()));
}

#[tokio::test]
async fn invalid_fields_are_422_problems_naming_each_field() {
    let app = TestApp::spawn().await;
    let token = admin_token(&app).await;
    let res = app
        .client
        .post(app.url("/api/v1/users"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"username": "Bad Name", "role": "root", "password": "short"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let v: serde_json::Value = res.json().await.unwrap();
    assert_problem(&v, 422);
    let fields: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["username", "role", "password"]);
    assert!(v["errors"][1]["message"]
        .as_str()
        .unwrap()
        .contains("viewer, operator, approver, admin"));
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test]
async fn malformed_json_wrong_types_and_unknown_fields_are_400_problems() {
    let app = TestApp::spawn().await;
    let token = admin_token(&app).await;
    for body in [
        "{not json",
        "[]",
        r#"{"username": 5, "role": "viewer", "password": "a perfectly fine password"}"#,
        r#"{"username": "x", "role": "viewer", "password": "a perfectly fine password", "is_admin": true}"#,
        "",
    ] {
        let res = app
            .client
            .post(app.url("/api/v1/users"))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{body}");
        let v: serde_json::Value = res.json().await.unwrap();
        assert_problem(&v, 400);
        assert!(
            v["detail"]
                .as_str()
                .unwrap()
                .starts_with("body: invalid JSON"),
            "{v}"
        );
    }
    let res = app
        .client
        .post(app.url("/api/v1/users"))
        .bearer_auth(&token)
        .body("username=x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let app = TestApp::spawn().await;
    let token = admin_token(&app).await;
    let huge = "x".repeat(300 * 1024);
    let res = app.client.post(app.url("/api/v1/users")).bearer_auth(&token)
        .json(&serde_json::json!({"username": huge, "role": "viewer", "password": "a perfectly fine password"})).send().await.unwrap();
    assert_eq!(res.status(), 413);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_problem(&v, 413);
    // Forms too, including before the CSRF check has read the body.
    let s = app.session_for(Role::Admin).await;
    let res = app.post_form("/users", &s, &[("username", &huge)]).await;
    assert_eq!(res.status(), 413);
    let res = app
        .client
        .post(app.url("/login"))
        .form(&[("username", huge.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(app.count("users").await, 2);
}

#[tokio::test]
async fn openapi_document_describes_the_routes() {
    let app = TestApp::spawn().await;
    let v: serde_json::Value = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["openapi"].as_str().unwrap().starts_with("3."));
    assert!(v["paths"]["/api/v1/me"]["get"].is_object());
    assert!(v["paths"]["/api/v1/users"]["get"].is_object());
    assert!(v["paths"]["/api/v1/users"]["post"].is_object());
    assert!(v["components"]["schemas"]["Problem"].is_object());
    assert!(v["components"]["securitySchemes"]["bearer"].is_object());
    // Every API route in the table is documented (except the document itself).
    for route in headroom::api::endpoints()
        .into_iter()
        .filter(|e| e.path != "/api/openapi.json")
    {
        let method = route.method.as_str().to_lowercase();
        assert!(
            v["paths"][route.path][&method].is_object(),
            "{route:?} is not in the OpenAPI document"
        );
    }
}

#[tokio::test]
async fn a_wrongly_typed_field_is_named_in_the_problem() {
    let app = TestApp::spawn().await;
    app.create_user("root", Role::Admin).await;
    let token = app.token_for("root").await;
    let res = app.client.post(app.url("/api/v1/users")).bearer_auth(&token)
        .json(&serde_json::json!({"username": "x", "role": ["admin"], "password": "a perfectly fine password"})).send().await.unwrap();
    assert_eq!(res.status(), 400);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["errors"][0]["field"], "role", "{v}");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("invalid type"),
        "{v}"
    );
}
