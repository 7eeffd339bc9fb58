//! API tokens: created in the UI, shown once, stored hashed, revocable.

use headroom::domain::Role;

use crate::helpers::{texts, TestApp};

async fn create_in_ui(app: &TestApp, admin: &crate::helpers::Session, user: &str) -> String {
    let res = app
        .post_form(
            "/tokens",
            admin,
            &[("username", user), ("label", "ci pipeline")],
        )
        .await;
    assert_eq!(res.status(), 201);
    let html = res.text().await.unwrap();
    texts(&html, "#new-token")
        .pop()
        .expect("the new token is shown")
}

#[tokio::test]
async fn a_token_made_in_the_ui_works_once_shown_and_is_stored_hashed() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    app.create_user("robot", Role::Operator).await;
    let token = create_in_ui(&app, &admin, "robot").await;
    assert!(token.starts_with("hr_") && token.len() == 67);

    let me = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200);
    let body: serde_json::Value = me.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"username": "robot", "role": "operator"})
    );

    // Listed afterwards without the secret.
    let list = app.get("/tokens", &admin).await.text().await.unwrap();
    assert!(!list.contains(&token));
    assert!(texts(&list, "td").iter().any(|t| t == "ci pipeline"));
    let stored: String = sqlx::query_scalar("SELECT token_hash FROM api_tokens")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_ne!(stored, token);
    assert_eq!(
        stored,
        sha256_hex(&token),
        "the sha256 of the whole token, in hex"
    );
}

/// sha256 of `text` in lower-case hex, computed here rather than with the code under test,
/// so a change to how tokens are stored cannot agree with itself.
pub(crate) fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_revoked_token_stops_working() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let token = create_in_ui(&app, &admin, "admin-user").await;
    assert_eq!(
        app.client
            .get(app.url("/api/v1/me"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let id: i64 = sqlx::query_scalar("SELECT id FROM api_tokens")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let res = app
        .post_form(&format!("/tokens/{id}/revoke"), &admin, &[])
        .await;
    assert_eq!(res.status(), 303);
    let after = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);
    let actions = app.audit_actions().await;
    assert!(
        actions.contains(&"token.created".to_owned())
            && actions.contains(&"token.revoked".to_owned())
    );
}

#[tokio::test]
async fn wrong_or_malformed_tokens_are_401_problems_never_anonymous() {
    let app = TestApp::spawn().await;
    for header in [
        "Bearer hr_0000000000000000000000000000000000000000000000000000000000000000",
        "Bearer ",
        "Basic YWxpY2U6cHc=",
        "Bearer <script>",
    ] {
        let res = app
            .client
            .get(app.url("/api/v1/me"))
            .header("Authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{header}");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        assert_eq!(res.headers()["www-authenticate"], "Bearer");
        // Even a public route refuses a bad credential rather than ignoring it.
        let res = app
            .client
            .get(app.url("/api/openapi.json"))
            .header("Authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{header}");
    }
}

#[tokio::test]
async fn a_disabled_users_token_stops_working_and_bearer_requests_need_no_csrf() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let token = create_in_ui(&app, &admin, "admin-user").await;
    // Bearer POST without any CSRF token is fine.
    let res = app.client.post(app.url("/api/v1/users")).bearer_auth(&token)
        .json(&serde_json::json!({"username": "bob", "role": "viewer", "password": "a perfectly fine password"})).send().await.unwrap();
    assert_eq!(res.status(), 201);
    app.create_user("admin2", Role::Admin).await;
    let admin2 = app.login("admin2", crate::helpers::PASSWORD).await.unwrap();
    app.post_form("/users/admin-user/disable", &admin2, &[])
        .await;
    assert_eq!(
        app.client
            .get(app.url("/api/v1/me"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}
