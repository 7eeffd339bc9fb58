//! Provision history: the page, `GET /api/v1/provisions`, the CSV and the JSONL export list the
//! same requests in the same order for every filter; bad filters are refused by field; CSV
//! defuses formulas; the audit chain still verifies afterwards.

use headroom::domain::{ProvisionState, Role};
use serde_json::Value;

use crate::helpers::{texts, TestApp};
use crate::webhooks::{add_approval, approve_and_start, file, move_to, Filing};

/// Ids in the page's table, top to bottom.
fn page_ids(html: &str) -> Vec<i64> {
    let doc = scraper::Html::parse_document(html);
    let sel = scraper::Selector::parse("#history-results tbody tr[data-id]").unwrap();
    doc.select(&sel)
        .map(|tr| tr.value().attr("data-id").unwrap().parse().unwrap())
        .collect()
}

fn csv_ids(text: &str) -> Vec<i64> {
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("id,created_at,state,"));
    lines
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

fn jsonl_ids(text: &str) -> Vec<i64> {
    text.lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn page_api_csv_and_jsonl_list_the_same_requests_in_the_same_order_for_each_filter() {
    let app = TestApp::spawn().await;
    let f = |fleet, requester, reason| Filing {
        fleet,
        machine_config: "spare-fsn1",
        requester,
        reason,
        count: 1,
    };
    use ProvisionState::*;
    let a = file(&app, f("prod-eu", "alice", "restore")).await;
    add_approval(&app, a, "bob").await;
    app.clock.advance(std::time::Duration::from_secs(3600));
    let b = file(&app, f("prod-us", "carol", "=HYPERLINK(\"http://evil\")")).await;
    move_to(&app, b, PendingApproval, Rejected, "bob").await;
    let c = file(&app, f("prod-eu", "carol", "more")).await;
    let d = file(&app, f("prod-us", "alice", "+1,@SUM(A1)")).await;
    approve_and_start(&app, d, "dave").await;
    move_to(&app, d, Executing, Succeeded, "system").await;
    let viewer = app.session_for(Role::Viewer).await;
    let token = app.token_for("viewer-user").await;

    let later = headroom::domain::clock::format_utc(app.clock_start() + 1_800_000);
    let later = &later[..16];
    let cases: Vec<(String, Vec<i64>, bool)> = vec![
        (String::new(), vec![d, c, b, a], true),
        ("fleet=prod-eu".into(), vec![c, a], true),
        ("state=rejected".into(), vec![b], true),
        ("state=pending_approval".into(), vec![c, a], true),
        ("requester=carol".into(), vec![c, b], true),
        ("fleet=prod-us&requester=alice".into(), vec![d], true),
        ("approver=bob".into(), vec![a], false),
        ("approver=dave".into(), vec![d], false),
        (format!("from={later}"), vec![d, c, b], false),
        (
            format!("to={later}&machine_config=spare-fsn1"),
            vec![a],
            false,
        ),
    ];
    for (q, expected, api_has_it) in cases {
        let page = app.get(&format!("/provisions?{q}"), &viewer).await;
        assert_eq!(page.status(), 200, "{q}");
        assert_eq!(page_ids(&page.text().await.unwrap()), expected, "page {q}");
        let csv = app
            .get(&format!("/provisions/export?format=csv&{q}"), &viewer)
            .await;
        assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
        assert_eq!(csv_ids(&csv.text().await.unwrap()), expected, "csv {q}");
        let jsonl = app
            .client
            .get(app.url(&format!("/api/v1/provisions/export?format=jsonl&{q}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(jsonl.status(), 200, "{q}");
        assert_eq!(
            jsonl_ids(&jsonl.text().await.unwrap()),
            expected,
            "jsonl {q}"
        );
        if api_has_it {
            let res = app
                .client
                .get(app.url(&format!("/api/v1/provisions?{q}")))
                .bearer_auth(&token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "api {q}");
            let body: Value = res.json().await.unwrap();
            let ids: Vec<i64> = body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].as_i64().unwrap())
                .collect();
            assert_eq!(ids, expected, "api {q}");
        }
    }

    // Paging: one page of the page's size is not the whole history.
    let html = app.get("/provisions", &viewer).await.text().await.unwrap();
    assert!(
        texts(&html, "a[rel=next]").is_empty(),
        "four requests fit one page"
    );
    assert_eq!(
        texts(&html, "a.export").len(),
        2,
        "CSV and JSONL export links"
    );

    // Formula injection in a reason is neutralised in CSV and kept verbatim in JSONL.
    let csv = app
        .get("/provisions/export?format=csv&fleet=prod-us", &viewer)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        csv.contains(",\"'=HYPERLINK(\"\"http://evil\"\")\","),
        "{csv}"
    );
    assert!(csv.contains(",\"'+1,@SUM(A1)\","), "{csv}");
    let jsonl = app
        .get("/provisions/export?format=jsonl&fleet=prod-us", &viewer)
        .await
        .text()
        .await
        .unwrap();
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["reason"], "+1,@SUM(A1)");
    assert_eq!(first["approvers"], serde_json::json!(["dave"]));
    assert_eq!(first["monthly_cost"], "4.5100");

    let verified = headroom::audit::verify(&app.state.ctx, &headroom::domain::Caller::system())
        .await
        .unwrap();
    assert!(verified.is_ok(), "{verified:?}");
}

#[tokio::test]
async fn hostile_filter_values_are_refused_by_field_on_the_page_and_the_exports() {
    let app = TestApp::spawn().await;
    let viewer = app.session_for(Role::Viewer).await;
    let token = app.token_for("viewer-user").await;
    let long = "x".repeat(201);
    for (q, field) in [
        ("state=done".to_owned(), "state"),
        ("fleet=a%00b".to_owned(), "fleet"),
        (format!("requester={long}"), "requester"),
        ("approver=b%0Aob".to_owned(), "approver"),
        ("from=yesterday".to_owned(), "from"),
        ("from=2026-12-02T10:00&to=2026-12-02T09:00".to_owned(), "to"),
        ("machine_config=%1B%5B31m".to_owned(), "machine_config"),
    ] {
        let page = app.get(&format!("/provisions?{q}"), &viewer).await;
        assert_eq!(page.status(), 422, "{q}");
        let html = page.text().await.unwrap();
        let named = texts(&html, ".error-summary li strong");
        assert_eq!(named, [field], "{q}");
        let export = app
            .get(&format!("/provisions/export?format=csv&{q}"), &viewer)
            .await;
        assert_eq!(export.status(), 422, "{q}");
        let api = app
            .client
            .get(app.url(&format!("/api/v1/provisions/export?format=jsonl&{q}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(api.status(), 422, "{q}");
        let problem = api.text().await.unwrap();
        assert!(problem.contains(&format!("\"{field}\"")), "{q}: {problem}");
    }
    let api = app
        .client
        .get(app.url("/api/v1/provisions/export?format=xlsx"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 422);
    assert!(api.text().await.unwrap().contains("\"format\""));
}

/// CSV export defuses a formula in the reason.
#[tokio::test]
async fn the_csv_export_defuses_a_formula_written_in_a_reason_by_api() {
    let app = TestApp::spawn_with_config().await;
    headroom::sim::demo::seed_fleet(&app.state).await.unwrap();
    app.create_user("op", Role::Operator).await;
    let token = app.token_for("op").await;
    let (status, b) = app
        .post_json(
            "/api/v1/provisions",
            &token,
            &serde_json::json!({"fleet": "demo", "machine_config": "spare-fsn1", "count": 1,
               "reason": "=HYPERLINK(\"http://127.0.0.1/x\",\"click\")"}),
        )
        .await;
    assert_eq!(status, 201, "{b}");
    let res = app
        .client
        .get(app.url("/api/v1/provisions/export?format=csv"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let csv = res.text().await.unwrap();
    assert!(csv.contains("'=HYPERLINK"), "{csv}");
    assert!(
        !csv.contains(",=HYPERLINK") && !csv.contains(",\"=HYPERLINK"),
        "{csv}"
    );
}
