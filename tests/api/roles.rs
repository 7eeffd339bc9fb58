//! The role matrix: every route × anonymous, viewer, operator, approver, admin.

use headroom::domain::Role;
use headroom::http::Access;
use headroom::startup::route_table;
use reqwest::StatusCode;

use crate::csrf::sample_path;
use crate::helpers::{location, TestApp};

#[tokio::test]
async fn every_route_allows_exactly_the_roles_the_table_declares() {
    let app = TestApp::spawn_with_config().await;
    app.create_user("target", Role::Viewer).await;
    for role in Role::ALL {
        app.create_user(&format!("{role}-user"), role).await;
    }
    app.token_for("target").await;

    let mut checked = 0;
    for route in route_table() {
        let path = sample_path(route.path);
        let is_api = path.starts_with("/api/");
        for who in [
            None,
            Some(Role::Viewer),
            Some(Role::Operator),
            Some(Role::Approver),
            Some(Role::Admin),
        ] {
            let allowed = match (route.access, who) {
                (Access::Public, _) => true,
                (Access::AtLeast(_), None) => false,
                (Access::AtLeast(need), Some(have)) => have.includes(need),
            };
            let mut req = app
                .client
                .request(crate::helpers::method(&route.method), app.url(&path));
            if let Some(role) = who {
                // A fresh session each time: some allowed requests (logout, disable) end it.
                let s = app.quick_session(&format!("{role}-user")).await;
                req = req
                    .header("Cookie", &s.cookie)
                    .header("X-CSRF-Token", &s.csrf);
            } else if route.is_unsafe() {
                let (cookie, token) = app.login_form().await;
                req = req.header("Cookie", cookie).header("X-CSRF-Token", token);
            }
            let res = req.send().await.unwrap();
            let status = res.status();
            // The guard sends people to sign in with ?next=; logout's own redirect to /login is success.
            let to_login =
                status == StatusCode::SEE_OTHER && location(&res).starts_with("/login?next=");
            let denied =
                status == StatusCode::FORBIDDEN || status == StatusCode::UNAUTHORIZED || to_login;
            if allowed {
                // Allowed means handled: neither refused nor failed.
                assert!(
                    !denied && !status.is_server_error(),
                    "{route:?} as {who:?}: expected allowed, got {status}"
                );
            } else if who.is_none() {
                let expected = if is_api {
                    status == StatusCode::UNAUTHORIZED
                } else {
                    to_login
                };
                assert!(
                    expected,
                    "{route:?} anonymous: expected sign-in demand, got {status}"
                );
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{route:?} as {who:?}");
            }
            checked += 1;
            // Undo what an allowed request may have done to the fixtures.
            sqlx::query("UPDATE users SET disabled = 0")
                .execute(&app.pool)
                .await
                .unwrap();
        }
    }
    assert_eq!(checked, route_table().len() * 5);
}

#[tokio::test]
async fn bearer_tokens_carry_their_users_role() {
    let app = TestApp::spawn_with_config().await;
    for role in Role::ALL {
        app.create_user(&format!("{role}-user"), role).await;
    }
    for role in Role::ALL {
        let token = app.token_for(&format!("{role}-user")).await;
        for route in route_table()
            .into_iter()
            .filter(|r| r.path.starts_with("/api/"))
        {
            let res = app
                .client
                .request(
                    crate::helpers::method(&route.method),
                    app.url(&sample_path(route.path)),
                )
                .bearer_auth(&token)
                .json(&serde_json::json!({}))
                .send()
                .await
                .unwrap();
            let allowed = match route.access {
                Access::Public => true,
                Access::AtLeast(need) => role.includes(need),
            };
            let denied =
                res.status() == StatusCode::FORBIDDEN || res.status() == StatusCode::UNAUTHORIZED;
            assert_eq!(
                !denied,
                allowed,
                "{route:?} with a {role} token: {}",
                res.status()
            );
            assert!(
                !res.status().is_server_error(),
                "{route:?} with a {role} token: {}",
                res.status()
            );
        }
    }
}

#[tokio::test]
async fn navigation_shows_only_what_the_role_may_use() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    let admin = app.session_for(Role::Admin).await;
    let nav = |html: String| crate::helpers::texts(&html, ".topbar nav a");
    let v = nav(app.get("/", &viewer).await.text().await.unwrap());
    let a = nav(app.get("/", &admin).await.text().await.unwrap());
    assert!(
        !v.contains(&"Users".to_owned()) && !v.contains(&"API tokens".to_owned()),
        "{v:?}"
    );
    assert!(
        a.contains(&"Users".to_owned()) && a.contains(&"API tokens".to_owned()),
        "{a:?}"
    );
}

#[tokio::test]
async fn domain_operations_check_the_role_even_without_the_route_guard() {
    // The page is not the only gate: calling the operation directly as an operator fails.
    let app = TestApp::spawn().await;
    app.create_user("op", Role::Operator).await;
    let mut conn = app.pool.acquire().await.unwrap();
    let op = headroom::db::users::by_name(&mut conn, "op")
        .await
        .unwrap()
        .unwrap();
    drop(conn);
    let caller = headroom::auth::Caller {
        actor: headroom::audit::Actor::User("op".into()),
        role: op.role,
        user_id: Some(op.id),
    };
    let input = headroom::auth::accounts::NewUserInput {
        username: "sneaky".into(),
        role: "admin".into(),
        password: "a perfectly fine password".into(),
    };
    let err = headroom::auth::accounts::create_user(&app.pool, &caller, 0, &input)
        .await
        .unwrap_err();
    assert!(
        matches!(err, headroom::auth::accounts::AccountError::Forbidden(_)),
        "{err:?}"
    );
    assert!(
        headroom::auth::accounts::set_role(&app.pool, &caller, 0, "op", "admin")
            .await
            .is_err()
    );
    assert_eq!(app.count("users").await, 1);
}

#[tokio::test]
async fn the_pin_check_api_is_for_operators_and_up() {
    let app = TestApp::spawn_with_config().await;
    // A loopback URL: the outbound policy refuses it, so no check leaves the machine.
    let mut input = headroom::machines::machine_configs::latest(&app.pool, "spare-fsn1")
        .await
        .unwrap()
        .spec
        .to_input();
    input.yubaba_url = "https://127.0.0.1:1/yubaba.tar.gz".into();
    headroom::machines::machine_configs::update(
        &app.state,
        &headroom::auth::Caller::system(),
        "spare-fsn1",
        &input,
    )
    .await
    .unwrap();
    let route = route_table()
        .into_iter()
        .find(|r| r.path == headroom::api::paths::MACHINE_CONFIG_PIN_CHECK)
        .expect("pin-check is in the route table");
    assert_eq!(route.access, Access::AtLeast(Role::Operator));
    let url = app.url("/api/v1/machine-configs/spare-fsn1/pin-check");
    // Anonymous, with a valid pre-login CSRF pair so that only the missing sign-in decides.
    let (cookie, token) = app.login_form().await;
    let anonymous = app
        .client
        .post(&url)
        .header("Cookie", cookie)
        .header("X-CSRF-Token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    for role in Role::ALL {
        app.create_user(&format!("{role}-user"), role).await;
        let token = app.token_for(&format!("{role}-user")).await;
        let checks_before = app.count("pin_checks").await;
        let res = app
            .client
            .post(&url)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        if role.includes(Role::Operator) {
            assert_eq!(res.status(), StatusCode::OK, "{role}");
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(v["message"], "refused: loopback address", "{role}: {v}");
        } else {
            assert_eq!(res.status(), StatusCode::FORBIDDEN, "{role}");
            assert_eq!(app.count("pin_checks").await, checks_before, "{role}");
        }
    }
}
