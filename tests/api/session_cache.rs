//! The session-row cache: a page view mostly queries nothing, yet every change made through
//! this process is seen by the very next request, and one made by another process (the CLI,
//! straight in the database) within `ROW_TTL_MS` of the clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::auth::sessions::{self, PurgeDeps, ROW_TTL_MS};
use headroom::auth::{users, Caller, Principal, Via};
use headroom::domain::Role;

use crate::helpers::{location, Session, TestApp, PASSWORD};

/// A GET of the dashboard: 200 while signed in, 303 to the login page once not.
async fn dashboard(app: &TestApp, s: &Session) -> u16 {
    let res = app.get("/", s).await;
    let status = res.status().as_u16();
    if status == 303 {
        assert!(location(&res).starts_with("/login"), "{}", location(&res));
    }
    status
}

/// A viewer with a session whose row is cached (two page views at the same instant).
async fn cached_viewer(app: &TestApp, name: &str) -> Session {
    app.create_user(name, Role::Viewer).await;
    let s = app.quick_session(name).await;
    assert_eq!(dashboard(app, &s).await, 200);
    assert_eq!(dashboard(app, &s).await, 200);
    assert!(!app.state.sessions.rows().is_empty(), "the row is cached");
    s
}

async fn session_id(app: &TestApp, name: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT s.id FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.username = $1",
    )
    .bind(name)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_cached_row_serves_and_a_database_change_is_seen_after_its_validity() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "carol").await;
    // As `headroom user disable` in another process would: no epoch bump reaches us.
    sqlx::query("UPDATE users SET disabled = TRUE WHERE username = 'carol'")
        .execute(&app.pool)
        .await
        .unwrap();
    app.clock
        .advance(Duration::from_millis(ROW_TTL_MS as u64 - 1));
    assert_eq!(
        dashboard(&app, &s).await,
        200,
        "within the validity the cached row answers (the documented window)"
    );
    app.clock.advance(Duration::from_millis(1));
    assert_eq!(
        dashboard(&app, &s).await,
        303,
        "seen once the row is 1 s old"
    );
    assert_eq!(
        app.count("sessions").await,
        0,
        "the disabled session's row is deleted"
    );
}

#[tokio::test]
async fn logout_over_http_ends_the_session_at_once_after_a_cached_get() {
    let app = TestApp::spawn().await;
    app.create_user("dave", Role::Viewer).await;
    let s = app.login("dave", PASSWORD).await.expect("login");
    assert_eq!(dashboard(&app, &s).await, 200);
    assert_eq!(app.post_form("/logout", &s, &[]).await.status(), 303);
    assert_eq!(dashboard(&app, &s).await, 303);
}

#[tokio::test]
async fn the_logout_operation_ends_the_session_at_once() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "dora").await;
    let id = session_id(&app, "dora").await;
    headroom::auth::login::logout(&app.state.ctx, id, "dora")
        .await
        .unwrap();
    assert_eq!(dashboard(&app, &s).await, 303, "no request bumped anything");
}

#[tokio::test]
async fn disabling_through_the_operation_ends_the_session_at_once() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "erin").await;
    users::set_disabled(&app.state.ctx, &Caller::system(), "erin", true)
        .await
        .unwrap();
    assert_eq!(dashboard(&app, &s).await, 303);
}

#[tokio::test]
async fn disabling_through_the_users_page_ends_the_session_at_once() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let s = cached_viewer(&app, "frank").await;
    let res = app.post_form("/users/frank/disable", &admin, &[]).await;
    assert!(res.status().is_redirection() || res.status().is_success());
    assert_eq!(dashboard(&app, &s).await, 303);
}

#[tokio::test]
async fn a_role_change_through_the_operation_or_the_page_is_seen_at_once() {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    let s = cached_viewer(&app, "gina").await;
    assert_eq!(app.get("/users", &s).await.status(), 403);
    users::set_role(&app.state.ctx, &Caller::system(), "gina", "admin")
        .await
        .unwrap();
    assert_eq!(app.get("/users", &s).await.status(), 200, "promotion seen");
    assert_eq!(app.get("/users", &s).await.status(), 200, "and cached");
    let res = app
        .htmx_post("/users/gina/role", &admin, &[("role", "viewer")])
        .await;
    assert_eq!(res.status(), 200, "demoted through the page");
    assert_eq!(app.get("/users", &s).await.status(), 403, "demotion seen");
}

#[tokio::test]
async fn a_password_reset_ends_the_sessions_at_once() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "hank").await;
    users::reset_password(
        &app.state.ctx,
        &Caller::system(),
        "hank",
        "an entirely new passphrase",
    )
    .await
    .unwrap();
    assert_eq!(dashboard(&app, &s).await, 303);
}

#[tokio::test]
async fn a_flash_set_after_the_row_was_cached_shows_on_the_next_page() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "ivy").await;
    let principal = Principal {
        user_id: 0,
        username: "ivy".into(),
        role: Role::Viewer,
        via: Via::Session {
            session_id: session_id(&app, "ivy").await,
            csrf_token: s.csrf.clone(),
            has_flash: false,
        },
    };
    sessions::set_flash(&app.state.ctx, &principal, "cache-flash-marker").await;
    let page = app.get("/", &s).await.text().await.unwrap();
    assert!(
        page.contains("cache-flash-marker"),
        "the flash shows at once"
    );
    // The message was taken; a row cached before that only costs a query finding none.
    let page = app.get("/", &s).await.text().await.unwrap();
    assert!(!page.contains("cache-flash-marker"), "shown once");
}

#[tokio::test]
async fn idle_expiry_is_exact_to_the_millisecond_with_cached_rows() {
    // An idle limit shorter than the row validity, so expiry falls while rows are cached.
    let app = TestApp::spawn_with(|s| s.session_idle = Duration::from_millis(500)).await;
    app.create_user("jack", Role::Viewer).await;
    let (a, b) = (
        app.quick_session("jack").await,
        app.quick_session("jack").await,
    );
    assert_eq!(dashboard(&app, &a).await, 200);
    assert_eq!(dashboard(&app, &b).await, 200);
    app.clock.advance(Duration::from_millis(500));
    assert_eq!(dashboard(&app, &a).await, 200, "idle for exactly the limit");
    app.clock.advance(Duration::from_millis(1));
    assert_eq!(dashboard(&app, &b).await, 303, "idle 1 ms past the limit");
    assert_eq!(dashboard(&app, &a).await, 200, "idle 1 ms");
}

#[tokio::test]
async fn activity_written_back_by_the_purge_never_makes_a_cached_row_look_idle() {
    let app = TestApp::spawn().await;
    let s = cached_viewer(&app, "kate").await;
    let idle = app.state.ctx.settings.session_idle;
    // Past the idle limit since the row's time, never since a page view (memory only).
    for _ in 0..2 {
        app.clock.advance(idle - Duration::from_secs(60));
        assert_eq!(dashboard(&app, &s).await, 200);
    }
    let deps = PurgeDeps {
        pool: app.pool.clone(),
        clock: app.state.ctx.clock.clone(),
        life: sessions::Lifetimes {
            idle,
            absolute: app.state.ctx.settings.session_absolute,
        },
        every: sessions::PURGE_EVERY,
        activity: app.state.sessions.clone(),
    };
    assert_eq!(sessions::purge_expired_once(&deps).await.unwrap(), 0);
    assert!(
        app.state.sessions.is_empty(),
        "memory let go of the activity"
    );
    app.clock.advance(Duration::from_millis(100));
    assert_eq!(
        dashboard(&app, &s).await,
        200,
        "the cached row's older time is not used once memory let go"
    );
}

#[tokio::test]
async fn no_get_succeeds_after_a_concurrent_logout_has_answered() {
    let app = Arc::new(TestApp::spawn().await);
    app.create_user("liam", Role::Viewer).await;
    let s = app.login("liam", PASSWORD).await.expect("login");
    assert_eq!(dashboard(&app, &s).await, 200);

    let origin = Instant::now();
    let gets: Vec<_> = (0..50u64)
        .map(|i| {
            let (app, s) = (app.clone(), s.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(i * 4)).await;
                let sent = Instant::now();
                (sent, app.get("/", &s).await.status().as_u16())
            })
        })
        .collect();
    let logout = {
        let (app, s) = (app.clone(), s.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let status = app.post_form("/logout", &s, &[]).await.status();
            (Instant::now(), status)
        })
    };
    let (answered, status) = logout.await.unwrap();
    assert_eq!(status, 303);
    let mut after = 0;
    for get in gets {
        let (sent, status) = get.await.unwrap();
        if sent > answered {
            after += 1;
            assert_eq!(
                status,
                303,
                "a GET sent {:?} after the logout answered still got in",
                sent - answered
            );
        }
    }
    // Whether the timing above put any GET after the logout depends on the machine: these
    // always come after it.
    let late: Vec<_> = (0..10)
        .map(|_| {
            let (app, s) = (app.clone(), s.clone());
            tokio::spawn(async move { dashboard(&app, &s).await })
        })
        .collect();
    for get in late {
        assert_eq!(get.await.unwrap(), 303);
    }
    eprintln!(
        "{after} of 50 GETs were sent after the logout answered ({:?} in)",
        answered - origin
    );
    assert_eq!(app.count("sessions").await, 0);
}

#[tokio::test]
async fn the_row_cache_never_holds_more_than_its_capacity_or_unknown_tokens() {
    let app = TestApp::spawn().await;
    app.create_user("mona", Role::Viewer).await;
    for _ in 0..20 {
        let s = app.quick_session("mona").await;
        assert_eq!(dashboard(&app, &s).await, 200);
    }
    assert_eq!(app.state.sessions.rows().len(), 20);
    for i in 0..20 {
        let forged = Session {
            cookie: format!("headroom_session=hs_forged{i}"),
            csrf: String::new(),
        };
        assert_eq!(dashboard(&app, &forged).await, 303);
    }
    assert_eq!(
        app.state.sessions.rows().len(),
        20,
        "a token with no session is never cached"
    );
    // The bound itself (10,000 rows) is shown by the unit test
    // `auth::sessions::row_cache_tests::a_full_cache_drops_what_is_out_of_date_then_everything`.
    assert!(app.state.sessions.rows().len() <= sessions::ROW_CAPACITY);
}

/// Anonymous requests cannot keep the cache cold: only a signed-in caller's unsafe request
/// bumps the auth epoch in the guard (anonymous ones change no session or user).
#[tokio::test]
async fn anonymous_unsafe_requests_leave_the_cached_rows_alone() {
    let app = TestApp::spawn().await;
    let viewer = cached_viewer(&app, "vera").await;
    let before = app.state.ctx.auth_epoch.current();
    for _ in 0..5 {
        assert_eq!(
            app.post_login("nobody", "wrong password 123")
                .await
                .status(),
            401
        );
    }
    assert_eq!(app.state.ctx.auth_epoch.current(), before);
    assert_eq!(dashboard(&app, &viewer).await, 200);
    // A signed-in caller's unsafe request does bump it (the guard's safety net).
    let res = app.post_form("/account/password", &viewer, &[]).await;
    assert!(res.status().is_client_error(), "{}", res.status());
    assert!(app.state.ctx.auth_epoch.current() > before);
}
