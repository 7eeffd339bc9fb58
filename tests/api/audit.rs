//! The audit chain: entries for every change, `headroom audit verify` against tampering, the
//! audit page's filters and cursor, and export.

use std::process::Command;

use headroom::domain::Role;

use crate::helpers::{texts, TestApp, PASSWORD};

fn headroom_cli(app: &TestApp, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .arg("--database-url")
        .arg(&app.state.ctx.settings.database_url)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run headroom")
}

async fn busy_app() -> TestApp {
    let app = TestApp::spawn().await;
    let admin = app.session_for(Role::Admin).await;
    // Each step must have happened for the entries below to exist: a step that silently
    // failed would leave a shorter chain that still verifies.
    let res = app.post_login("admin-user", "wrong password!!").await;
    assert_eq!(res.status(), 401, "the failed login");
    let res = app
        .post_form(
            "/users",
            &admin,
            &[
                ("username", "frank"),
                ("role", "viewer"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(res.status(), 303, "creating frank");
    let res = app
        .htmx_post("/users/frank/role", &admin, &[("role", "operator")])
        .await;
    assert_eq!(res.status(), 200, "frank's role change");
    let res = app.post_form("/users/frank/disable", &admin, &[]).await;
    assert_eq!(res.status(), 303, "disabling frank");
    let res = app
        .post_form(
            "/tokens",
            &admin,
            &[("username", "admin-user"), ("label", "t")],
        )
        .await;
    assert_eq!(res.status(), 201, "creating a token");
    let res = app.post_form("/tokens/1/revoke", &admin, &[]).await;
    assert_eq!(res.status(), 303, "revoking it");
    let res = app
        .post_form(
            "/account/password",
            &admin,
            &[
                ("current_password", PASSWORD),
                ("new_password", "a new password!!"),
                ("confirm_password", "a new password!!"),
            ],
        )
        .await;
    assert_eq!(res.status(), 303, "the password change");
    let res = app.post_form("/logout", &admin, &[]).await;
    assert_eq!(res.status(), 303, "logging out");
    app
}

#[tokio::test]
async fn every_state_change_writes_an_audit_entry() {
    let app = busy_app().await;
    let actions = app.audit_actions().await;
    for expected in [
        "user.created",
        "auth.login_succeeded",
        "auth.login_failed",
        "user.role_changed",
        "user.disabled",
        "token.created",
        "token.revoked",
        "user.password_changed",
        "auth.logout",
    ] {
        assert!(
            actions.contains(&expected.to_owned()),
            "{expected} missing from {actions:?}"
        );
    }
}

#[tokio::test]
async fn an_untouched_chain_verifies() {
    let app = busy_app().await;
    let out = headroom_cli(&app, &["audit", "verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("audit chain intact"));
}

async fn tamper(app: &TestApp, sql: &str) {
    // An attacker with the file (or the database owner's rights) can drop the append-only
    // triggers; the chain still tells.
    let on = if crate::helpers::store::on_postgres() {
        " ON audit_log"
    } else {
        ""
    };
    for trigger in ["audit_log_no_update", "audit_log_no_delete"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP TRIGGER IF EXISTS {trigger}{on}"
        )))
        .execute(&app.pool)
        .await
        .unwrap();
    }
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&app.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_table_refuses_updates_and_deletes_outright() {
    let app = busy_app().await;
    for sql in [
        "UPDATE audit_log SET actor = 'x' WHERE id = 1",
        "DELETE FROM audit_log WHERE id = 1",
    ] {
        let err = sqlx::query(sql).execute(&app.pool).await.expect_err(sql);
        // The append-only trigger refused it, not some other failure.
        assert!(
            err.to_string().contains("audit_log is append-only"),
            "{sql}: {err}"
        );
    }
    let actor: String = sqlx::query_scalar("SELECT actor FROM audit_log WHERE id = 1")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_ne!(actor, "x");
}

#[tokio::test]
async fn changing_any_field_of_an_entry_breaks_verification_naming_it() {
    for (column, value) in [
        ("actor", "'mallory'"),
        ("action", "'user.nothing'"),
        ("details", "'{}'"),
        ("at", "at + 1"),
        // Appended to, so the value differs whatever kind entry 3 names.
        ("target_kind", "target_kind || '-tampered'"),
        ("target_id", "'x'"),
    ] {
        let app = busy_app().await;
        tamper(
            &app,
            &format!("UPDATE audit_log SET {column} = {value} WHERE id = 3"),
        )
        .await;
        let out = headroom_cli(&app, &["audit", "verify"]);
        assert!(!out.status.success(), "{column}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("audit entry 3"), "{column}: {err}");
    }
}

#[tokio::test]
async fn rewriting_an_entry_with_a_fresh_hash_still_breaks_the_next_link() {
    let app = busy_app().await;
    let mut row: headroom::db::audit::AuditRow =
        sqlx::query_as("SELECT * FROM audit_log WHERE id = 2")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    row.actor = "mallory".into();
    let forged = headroom::audit::entry_hash(&row);
    tamper(
        &app,
        &format!("UPDATE audit_log SET actor = 'mallory', hash = '{forged}' WHERE id = 2"),
    )
    .await;
    let out = headroom_cli(&app, &["audit", "verify"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("audit entry 3"));
}

#[tokio::test]
async fn deleting_an_entry_in_the_middle_or_at_the_end_is_noticed() {
    let app = busy_app().await;
    tamper(&app, "DELETE FROM audit_log WHERE id = 4").await;
    let out = headroom_cli(&app, &["audit", "verify"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("audit entry 4"));

    let app = busy_app().await;
    tamper(
        &app,
        "DELETE FROM audit_log WHERE id = (SELECT MAX(id) FROM audit_log)",
    )
    .await;
    let out = headroom_cli(&app, &["audit", "verify"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cut off"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn export_writes_every_entry_as_jsonl_or_csv() {
    let app = busy_app().await;
    let total = app.count("audit_log").await as usize;
    let out = headroom_cli(&app, &["audit", "export", "--format", "jsonl"]);
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), total);
    assert_eq!(lines[0]["id"], 1);
    assert_eq!(lines[0]["prev_hash"], headroom::audit::GENESIS);
    let out = headroom_cli(&app, &["audit", "export", "--format", "csv"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("id,time,actor,action,target_kind,target_id,details,prev_hash,hash\n"));
    assert_eq!(text.lines().count(), total + 1);
}

#[tokio::test]
async fn the_audit_page_filters_and_pages_with_a_cursor() {
    let app = TestApp::spawn_with(|s| s.throttle.address_failures = 10_000).await;
    for i in 0..120 {
        app.post_login(&format!("ghost{i}"), "wrong password!!")
            .await;
        app.clock.advance(std::time::Duration::from_secs(20));
    }
    let viewer = app.session_for(Role::Viewer).await;
    let page1 = app.get("/audit?action=auth.login_failed", &viewer).await;
    assert_eq!(page1.status(), 200);
    let html = page1.text().await.unwrap();
    let ids: Vec<i64> = texts(&html, "#audit-results tbody tr td:first-child")
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 50);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first");
    let doc = scraper::Html::parse_document(&html);
    let older = doc
        .select(&scraper::Selector::parse(".pager a").unwrap())
        .find(|a| a.text().collect::<String>().contains("Older"))
        .unwrap();
    let href = older.value().attr("href").unwrap();
    assert!(href.contains(&format!("before={}", ids[49])), "{href}");
    let page2 = app.get(href, &viewer).await.text().await.unwrap();
    let ids2: Vec<i64> = texts(&page2, "#audit-results tbody tr td:first-child")
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(ids2.len(), 50);
    assert!(ids2[0] < ids[49]);

    // Prefix, target and actor filters.
    let by_prefix = app
        .get("/audit?action=auth.", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(texts(&by_prefix, "#audit-results tbody tr").len(), 50);
    let by_target = app
        .get("/audit?target=user:ghost7", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(texts(&by_target, "#audit-results tbody tr").len(), 1);
    let by_actor = app
        .get("/audit?actor=viewer-user", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        texts(&by_actor, "#audit-results tbody tr td:nth-child(4)"),
        ["auth.login_succeeded"]
    );

    // Time range: the first ten failures happened in the first 200 seconds.
    let start = headroom::domain::clock::format_utc(app.clock_start());
    let end = headroom::domain::clock::format_utc(app.clock_start() + 200_000);
    let ranged = app
        .get(
            &format!("/audit?action=auth.login_failed&from={start}&to={end}"),
            &viewer,
        )
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(texts(&ranged, "#audit-results tbody tr").len(), 10);

    // htmx filter requests get only the results section.
    let partial = app
        .client
        .get(app.url("/audit?actor=system"))
        .header("Cookie", &viewer.cookie)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(partial.headers()["vary"], "HX-Request");
    let body = partial.text().await.unwrap();
    assert!(body.starts_with("<section"), "{body}");

    // Page export with the same filters.
    let csv = app
        .get("/audit/export?action=auth.login_failed&format=csv", &viewer)
        .await;
    assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
    assert_eq!(csv.text().await.unwrap().lines().count(), 121);
}

#[tokio::test]
async fn bad_filters_name_the_field() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    for (query, field) in [
        ("from=yesterday", "from"),
        ("before=-3", "before"),
        ("from=2026-12-02T10:00&to=2026-12-02T09:00", "to"),
        ("actor=ev%00il", "actor"),
    ] {
        let res = app.get(&format!("/audit?{query}"), &viewer).await;
        assert_eq!(res.status(), 422, "{query}");
        let html = res.text().await.unwrap();
        assert!(
            texts(&html, ".error-summary li strong").contains(&field.to_owned()),
            "{query}: {html}"
        );
    }
    let res = app.get("/audit/export?format=xml", &viewer).await;
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn the_page_export_streams_every_matching_entry_in_order_across_batches() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    for i in 0..2500 {
        let action = if i % 2 == 0 {
            headroom::audit::Action::TemplateCreated
        } else {
            headroom::audit::Action::TemplateUpdated
        };
        headroom::audit::append(
            &mut tx,
            i,
            headroom::audit::NewEntry {
                actor: &headroom::audit::Actor::System,
                action,
                target_kind: "test",
                target_id: &i.to_string(),
                details: serde_json::json!({ "i": i }),
            },
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let body = app
        .get("/audit/export?format=jsonl", &viewer)
        .await
        .text()
        .await
        .unwrap();
    let ids: Vec<i64> = body
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len() as i64, app.count("audit_log").await);
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "oldest first, none missing"
    );
    let odd = app
        .get("/audit/export?format=csv&action=template.updated", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(odd.lines().count(), 1 + 1250);
    assert!(odd
        .lines()
        .skip(1)
        .all(|l| l.contains(",template.updated,")));
}

#[tokio::test]
async fn at_most_two_exports_run_at_once_and_the_third_is_told_to_retry() {
    let app = TestApp::spawn().await;
    app.create_user("reader", Role::Viewer).await;
    let token = app.token_for("reader").await;
    // Enough history that an export whose reader stops reading stays open.
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    for i in 0..30_000 {
        headroom::audit::append(
            &mut tx,
            i,
            headroom::audit::NewEntry {
                actor: &headroom::audit::Actor::System,
                action: headroom::audit::Action::TemplateUpdated,
                target_kind: "template",
                target_id: &format!("t{i}"),
                details: serde_json::json!({ "padding": "x".repeat(200) }),
            },
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let export = || {
        app.client
            .get(app.url("/api/v1/audit?format=jsonl"))
            .bearer_auth(&token)
            .send()
    };
    // Two exports whose bodies nobody reads yet.
    let first = export().await.unwrap();
    let second = export().await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = export().await.unwrap();
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    // Reading one to its end frees its permit.
    let body = first.text().await.unwrap();
    assert_eq!(body.lines().count() as i64, app.count("audit_log").await);
    let mut again = export().await.unwrap().status();
    for _ in 0..50 {
        if again == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        again = export().await.unwrap().status();
    }
    assert_eq!(again, 200);
    drop(second);
}

/// An export is written in pieces; with Nagle's algorithm on, the last piece waited for the
/// client's delayed ACK, 40 ms per export on a kept-alive connection (found by the soak).
#[tokio::test]
async fn exports_on_a_kept_alive_connection_do_not_wait_for_delayed_acks() {
    let app = TestApp::spawn().await;
    app.create_user("reader", Role::Viewer).await;
    let token = app.token_for("reader").await;
    // One client, so one kept-alive connection; the first export opens it.
    let client = reqwest::Client::new();
    let export = || async {
        let res = client
            .get(app.url("/api/v1/audit?format=jsonl"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    export().await;
    let start = std::time::Instant::now();
    for _ in 0..10 {
        export().await;
    }
    // With the stall, ten take at least 400 ms; without, a few ms.
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_millis(300),
        "ten exports took {took:?}"
    );
}

/// A time bound alone is answered from the time index in time order (id order for a log
/// appended as things happen): paging down from `to` and exporting up from `from`, cursor by
/// cursor, give every matching entry once, ties of the same time by id.
#[tokio::test]
async fn a_time_bound_alone_pages_in_time_order_from_the_cursor() {
    use headroom::db::audit::{batch_after, page, AuditFilter};
    let app = TestApp::spawn().await;
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    for i in 0..600 {
        // Three entries share each second; all of them older than the app's own entries.
        headroom::audit::append(
            &mut tx,
            (i / 3) * 1000,
            headroom::audit::NewEntry {
                actor: &headroom::audit::Actor::System,
                action: headroom::audit::Action::TemplateCreated,
                target_kind: "test",
                target_id: &i.to_string(),
                details: serde_json::json!({ "i": i }),
            },
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let expected = |sql: &'static str, bound: i64| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(bound)
                .fetch_all(&pool)
                .await
                .unwrap()
        }
    };
    let mut conn = app.pool.acquire().await.unwrap();
    let to = AuditFilter {
        to: Some(150_000),
        ..AuditFilter::default()
    };
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let rows = page(&mut conn, &to, before, 7).await.unwrap();
        let Some(last) = rows.last() else { break };
        before = Some(last.id);
        seen.extend(rows.iter().map(|r| r.id));
    }
    let newest_first = expected(
        "SELECT id FROM audit_log WHERE at < $1 ORDER BY at DESC, id DESC",
        150_000,
    )
    .await;
    assert_eq!(newest_first.len(), 450);
    assert_eq!(seen, newest_first, "`to` alone, newest first, page by page");
    let from = AuditFilter {
        from: Some(100_000),
        ..AuditFilter::default()
    };
    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let rows = batch_after(&mut conn, &from, after, 11).await.unwrap();
        let Some(last) = rows.last() else { break };
        after = last.id;
        seen.extend(rows.iter().map(|r| r.id));
    }
    let oldest_first = expected(
        "SELECT id FROM audit_log WHERE at >= $1 ORDER BY at, id",
        100_000,
    )
    .await;
    assert!(oldest_first.len() > 300, "the app's own entries come last");
    assert_eq!(
        seen, oldest_first,
        "`from` alone, oldest first, batch by batch"
    );
}

/// Any filter pages in time order through its `(…, at, id)` index, with or without a time
/// window: an actor, action or target with a window is a range seek (never a walk of that
/// filter's newer history, never a sort), and paging cursor by cursor gives every matching
/// entry once, ties of the same time by id, newest first for the page and oldest first for
/// the export.
#[tokio::test]
async fn a_filter_with_a_time_window_pages_in_time_order_through_its_own_index() {
    use headroom::audit::{Action, Actor};
    use headroom::db::audit::{batch_after, explain_page, page, AuditFilter};
    let app = TestApp::spawn().await;
    let mut tx = headroom::db::begin_write(&app.pool).await.unwrap();
    for i in 0..900_i64 {
        // Three entries share each second, from three actors and two actions in turn.
        let actor = Actor::User(["ann", "ben", "cat"][(i % 3) as usize].into());
        let action = [Action::TemplateCreated, Action::TemplateUpdated][(i % 2) as usize];
        headroom::audit::append(
            &mut tx,
            (i / 3) * 1000,
            headroom::audit::NewEntry {
                actor: &actor,
                action,
                target_kind: "test",
                target_id: &(i % 7).to_string(),
                details: serde_json::json!({ "i": i }),
            },
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let window = |f: AuditFilter| AuditFilter {
        from: Some(40_000),
        to: Some(250_000),
        ..f
    };
    let cases: [(AuditFilter, &str, &str, &str); 3] = [
        (
            window(AuditFilter {
                actor: Some("ben".into()),
                ..AuditFilter::default()
            }),
            "actor = $1",
            "ben",
            "audit_log_actor_at",
        ),
        (
            window(AuditFilter {
                action: Some("template.updated".into()),
                ..AuditFilter::default()
            }),
            "action = $1",
            "template.updated",
            "audit_log_action_at",
        ),
        (
            window(AuditFilter {
                target: Some("test:3".into()),
                ..AuditFilter::default()
            }),
            "target_kind = 'test' AND target_id = $1",
            "3",
            "audit_log_target_at",
        ),
    ];
    let mut conn = app.pool.acquire().await.unwrap();
    for (filter, condition, value, index) in cases {
        let sql = |order: &str| {
            format!(
                "SELECT id FROM audit_log WHERE {condition} AND at >= 40000 AND at < 250000
                 ORDER BY at {order}, id {order}"
            )
        };
        let newest_first: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql("DESC")))
            .bind(value)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert!(newest_first.len() > 60, "{filter:?}");
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let rows = page(&mut conn, &filter, before, 7).await.unwrap();
            let Some(last) = rows.last() else { break };
            before = Some(last.id);
            seen.extend(rows.iter().map(|r| r.id));
        }
        assert_eq!(seen, newest_first, "{filter:?}, newest first, page by page");
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let rows = batch_after(&mut conn, &filter, after, 11).await.unwrap();
            let Some(last) = rows.last() else { break };
            after = last.id;
            seen.extend(rows.iter().map(|r| r.id));
        }
        let oldest_first: Vec<i64> = newest_first.iter().rev().copied().collect();
        assert_eq!(
            seen, oldest_first,
            "{filter:?}, oldest first, batch by batch"
        );
        if crate::helpers::store::planner_is_not_sqlites("audit page") {
            continue;
        }
        for before in [None, Some(newest_first[20])] {
            let plan = explain_page(&mut conn, &filter, before)
                .await
                .unwrap()
                .join(" | ");
            assert!(plan.contains(index), "{filter:?}: {plan}");
            assert!(plan.contains("at>? AND at<?"), "a range seek: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{filter:?} sorts: {plan}");
        }
    }
}
