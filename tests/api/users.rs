//! User administration and last-admin protection.

use headroom::domain::Role;

use crate::helpers::{texts, TestApp, PASSWORD};

#[tokio::test]
async fn an_admin_creates_users_who_can_then_log_in() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let res = app
        .post_form(
            "/users",
            &admin,
            &[
                ("username", "dave"),
                ("role", "approver"),
                ("password", "dave's long password"),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    let page = app.get("/users", &admin).await.text().await.unwrap();
    assert!(
        texts(&page, ".flash").iter().any(|t| t.contains("dave")),
        "the flash message shows once"
    );
    let again = app.get("/users", &admin).await.text().await.unwrap();
    assert!(texts(&again, ".flash").is_empty());
    assert!(app.login("dave", "dave's long password").await.is_ok());
    assert!(app
        .audit_actions()
        .await
        .contains(&"user.created".to_owned()));
}

#[tokio::test]
async fn a_taken_username_is_a_field_error() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let res = app
        .post_form(
            "/users",
            &admin,
            &[
                ("username", "admin-user"),
                ("role", "viewer"),
                ("password", "a perfectly fine password"),
            ],
        )
        .await;
    assert_eq!(res.status(), 422);
    let html = res.text().await.unwrap();
    assert!(texts(&html, ".field-error")
        .iter()
        .any(|t| t == "is already taken"));
}

#[tokio::test]
async fn role_changes_through_htmx_return_the_updated_row() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    app.create_user("erin", Role::Viewer).await;
    let res = app
        .htmx_post("/users/erin/role", &admin, &[("role", "operator")])
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.starts_with("<tr"), "a partial row, not a page: {html}");
    assert!(html.contains(r#"<option value="operator" selected>"#));
    let role: String = sqlx::query_scalar("SELECT role FROM users WHERE username = 'erin'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(role, "operator");
    let details: String =
        sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'user.role_changed'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&details).unwrap(),
        serde_json::json!({"from": "viewer", "to": "operator"})
    );
}

#[tokio::test]
async fn the_last_active_admin_cannot_be_demoted_or_disabled() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let before = app.snapshot().await;
    let res = app
        .htmx_post("/users/admin-user/role", &admin, &[("role", "viewer")])
        .await;
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("last active admin"));
    let res = app
        .post_form("/users/admin-user/disable", &admin, &[])
        .await;
    assert_eq!(res.status(), 422);
    assert_eq!(app.snapshot().await, before);

    // With a second admin, the first may step down.
    app.create_user("admin2", Role::Admin).await;
    let res = app
        .htmx_post("/users/admin-user/role", &admin, &[("role", "viewer")])
        .await;
    assert_eq!(res.status(), 200);
    // Now admin2 is the last one, and a disabled admin does not count.
    let a2 = app.login("admin2", PASSWORD).await.unwrap();
    assert_eq!(
        app.post_form("/users/admin2/disable", &a2, &[])
            .await
            .status(),
        422
    );
}

#[tokio::test]
async fn disabling_a_user_ends_their_sessions() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let viewer = app.session_for(Role::Viewer).await;
    assert_eq!(app.get("/", &viewer).await.status(), 200);
    app.post_form("/users/viewer-user/disable", &admin, &[])
        .await;
    assert_eq!(app.get("/", &viewer).await.status(), 303);
    app.post_form("/users/viewer-user/enable", &admin, &[])
        .await;
    assert!(app.login("viewer-user", PASSWORD).await.is_ok());
    let actions = app.audit_actions().await;
    assert!(
        actions.contains(&"user.disabled".to_owned())
            && actions.contains(&"user.enabled".to_owned())
    );
}
