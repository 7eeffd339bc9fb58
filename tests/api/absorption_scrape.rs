//! Absorption headroom read by the scraper from fake yubaba nodes on loopback: each node
//! answers `/node`, `/node/usage` and `/workloads`, and the sample carries the packing verdict
//! beside yubaba's own count, stored per sample and folded into the rollups.

use headroom::domain::absorption::Basis;
use headroom::domain::capacity::Observation;
use headroom::scraper::scrape_once;
use headroom::scraper::workloads::WORKLOAD_SOURCE;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::TestApp;
use crate::scraper::{addr, serve_status, spec_with, status};

/// A node with `allocatable` (MiB, millicores) carrying `workloads`; `listed` is what its
/// `/workloads` answers (`None`: the runtime is unreachable, 502).
pub(crate) async fn node(
    allocatable: (u64, u64),
    workloads: &[(u64, u64)],
    listed: Option<Value>,
) -> MockServer {
    node_from(allocatable, workloads, listed, None).await
}

/// `node` whose `/workloads` answer names its backend in `x-workload-source`.
async fn node_from(
    allocatable: (u64, u64),
    workloads: &[(u64, u64)],
    listed: Option<Value>,
    source: Option<&str>,
) -> MockServer {
    let s = MockServer::start().await;
    let committed = workloads
        .iter()
        .fold((0, 0), |(m, c), (wm, wc)| (m + wm, c + wc));
    let answer = |path_: &'static str, body: Value| {
        Mock::given(method("GET"))
            .and(path(path_))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
    };
    answer(
        "/node",
        json!({ "yah.allocatable.memory_mb": allocatable.0, "yah.allocatable.cpu_millis": allocatable.1 }),
    )
    .mount(&s)
    .await;
    answer(
        "/node/usage",
        json!({
            "yah.workloads.count": workloads.len(),
            "yah.committed.memory_mb": committed.0,
            "yah.committed.cpu_millis": committed.1,
        }),
    )
    .mount(&s)
    .await;
    match listed {
        Some(body) => {
            let mut listed = ResponseTemplate::new(200).set_body_json(body);
            if let Some(source) = source {
                listed = listed.insert_header(WORKLOAD_SOURCE, source);
            }
            Mock::given(method("GET"))
                .and(path("/workloads"))
                .respond_with(listed)
                .mount(&s)
                .await
        }
        None => {
            Mock::given(method("GET"))
                .and(path("/workloads"))
                .respond_with(
                    ResponseTemplate::new(502).set_body_json(json!({"error": "runtime down"})),
                )
                .mount(&s)
                .await
        }
    }
    s
}

/// `/workloads` listing `sizes`, each with its size.
pub(crate) fn sized(sizes: &[(u64, u64)]) -> Value {
    let list: Vec<Value> = sizes
        .iter()
        .enumerate()
        .map(|(i, (m, c))| json!({ "ident": format!("tenant-{i}"), "memory_mb": m, "cpu_millis": c }))
        .collect();
    json!({ "workloads": list })
}

/// Serves node 1's status naming every node (ids from 1, in order), yubaba counting `spare` of
/// required 1.
pub(crate) async fn lead(nodes: &[&MockServer], spare: u32) {
    let members: Vec<(u64, String)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (i as u64 + 1, addr(n)))
        .collect();
    let headroom = json!({ "spare": spare, "required": 1 });
    serve_status(nodes[0], status(1, Some(1), 3, &members, Some(headroom))).await;
}

/// Scrapes a fleet of `nodes` (node 1 leads and says `spare`/`required` natively).
async fn scrape(app: &TestApp, nodes: &[&MockServer], spare: u32) -> Observation {
    lead(nodes, spare).await;
    let spec = spec_with(&[nodes[0].uri()], json!({ "scrape_timeout_secs": 3 }));
    let sample = scrape_once(&app.state.ctx, &spec).await;
    sample.outcome.expect("an ok sample")
}

#[tokio::test]
async fn every_node_carrying_a_small_tenant_is_zero_spares_by_count_and_absorbed_by_packing() {
    let app = TestApp::spawn().await;
    let small = [(1024, 500)];
    let (a, b, c) = (
        node((8192, 4000), &small, Some(sized(&small))).await,
        node((8192, 4000), &small, Some(sized(&small))).await,
        node((8192, 4000), &small, Some(sized(&small))).await,
    );
    let o = scrape(&app, &[&a, &b, &c], 0).await;
    assert_eq!(o.spare, 0, "yubaba's count: every node carries a tenant");
    let abs = o.absorption.expect("assessed");
    assert!(abs.absorbed(), "{abs:?}");
    assert_eq!(abs.basis, Basis::Workloads);
    assert_eq!(
        (
            abs.node_loss.short_memory_mb,
            abs.node_loss.short_cpu_millis
        ),
        (0, 0)
    );
}

#[tokio::test]
async fn a_spare_smaller_than_the_largest_nodes_workloads_is_short_though_counted() {
    let app = TestApp::spawn().await;
    let big = [(6144, 3000)];
    let mid = [(4096, 1000)];
    let (a, b, spare) = (
        node((8192, 4000), &big, Some(sized(&big))).await,
        node((8192, 4000), &mid, Some(sized(&mid))).await,
        node((2048, 1000), &[], Some(sized(&[]))).await,
    );
    let o = scrape(&app, &[&a, &b, &spare], 1).await;
    assert_eq!(o.spare, 1, "yubaba's count: one empty spare");
    let abs = o.absorption.expect("assessed");
    assert!(!abs.absorbed(), "{abs:?}");
    assert_eq!(abs.node_loss.worst, "node 1");
    assert_eq!(
        (
            abs.node_loss.short_memory_mb,
            abs.node_loss.short_cpu_millis
        ),
        (6144, 3000)
    );
}

#[tokio::test]
async fn a_stub_or_unreachable_runtime_falls_back_to_committed_totals_and_the_sample_stays_ok() {
    let app = TestApp::spawn().await;
    let load = [(1024, 500)];
    let (a, b) = (
        // yubaba's stub runtime: an empty list beside committed load.
        node((8192, 4000), &load, Some(json!({ "workloads": [] }))).await,
        // An unreachable runtime: 502.
        node((8192, 4000), &load, None).await,
    );
    let o = scrape(&app, &[&a, &b], 0).await;
    let abs = o.absorption.expect("assessed");
    assert_eq!(abs.basis, Basis::Committed);
    assert!(
        abs.absorbed(),
        "each node's 1 GiB fits on the other: {abs:?}"
    );
    assert_eq!(o.members.len(), 2);
}

#[tokio::test]
async fn an_idle_fleet_on_the_stub_runtime_is_judged_on_committed_totals_not_on_its_empty_lists() {
    let app = TestApp::spawn().await;
    let empty = || Some(json!({ "workloads": [] }));
    // yubaba built without a workload runtime, as the open-source build runs: nothing
    // committed, and a list that would be empty whatever ran.
    let (a, b, c) = (
        node_from((24151, 2000), &[], empty(), Some("stub")).await,
        node_from((24151, 2000), &[], empty(), Some("stub")).await,
        node_from((24151, 2000), &[], empty(), Some("stub")).await,
    );
    let o = scrape(&app, &[&a, &b, &c], 2).await;
    let abs = o.absorption.expect("assessed");
    assert_eq!(abs.basis, Basis::Committed, "{abs:?}");
    assert!(abs.absorbed(), "nothing is committed anywhere: {abs:?}");

    // The same empty lists from a runtime are the node's truth: sizes known, none running.
    let (a, b, c) = (
        node_from((24151, 2000), &[], empty(), Some("runtime")).await,
        node_from((24151, 2000), &[], empty(), Some("runtime")).await,
        node_from((24151, 2000), &[], empty(), Some("runtime")).await,
    );
    let o = scrape(&app, &[&a, &b, &c], 2).await;
    assert_eq!(o.absorption.expect("assessed").basis, Basis::Workloads);
}

#[tokio::test]
async fn the_verdict_is_stored_per_sample_and_its_worst_kept_in_the_rollups() {
    let app = crate::runner::console(|_| {}).await;
    headroom::sim::demo::seed_fleet(&app.state).await.unwrap();
    let big = [(6144, 3000)];
    let (a, b) = (
        node((8192, 4000), &big, Some(sized(&big))).await,
        node((4096, 4000), &[], Some(sized(&[]))).await,
    );
    let members = [(1, addr(&a)), (2, addr(&b))];
    serve_status(
        &a,
        status(
            1,
            Some(1),
            3,
            &members,
            Some(json!({"spare": 1, "required": 1})),
        ),
    )
    .await;
    let spec = spec_with(&[a.uri()], json!({ "scrape_timeout_secs": 3 }));
    let sample = scrape_once(&app.state.ctx, &spec).await;
    headroom::capacity::record::record(&app.state.ctx, "demo", &sample)
        .await
        .unwrap();
    let (absorbed, stored): (Option<i64>, Option<String>) =
        sqlx::query_as("SELECT absorbed, absorption FROM fleet_samples ORDER BY id DESC LIMIT 1")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(absorbed, Some(0));
    let stored: Value = serde_json::from_str(&stored.expect("the answer is kept")).unwrap();
    assert_eq!(stored["node_loss"]["worst"], "node 1");
    assert_eq!(stored["node_loss"]["short_memory_mb"], 6144);
    assert_eq!(stored["basis"], "workloads");
    let rollups: Vec<(Option<i64>,)> = sqlx::query_as("SELECT absorbed_min FROM fleet_rollups")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        rollups.len(),
        5,
        "minute, five minutes, hour, two hours and six hours"
    );
    assert!(rollups.iter().all(|(m,)| *m == Some(0)), "{rollups:?}");
    let status: Option<String> = sqlx::query_scalar("SELECT absorption FROM fleet_status")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(status.is_some_and(|s| s.contains("\"absorbed\":false")));

    // Shown where people look: the fleet API, the fleet page and the dashboard card, beside
    // yubaba's own count.
    app.create_user("vera", headroom::domain::Role::Viewer)
        .await;
    let token = app.token_for("vera").await;
    let detail = app.api_json("/api/v1/fleets/demo", &token).await;
    let abs = &detail["absorption"];
    assert_eq!(abs["node_loss"]["absorbed"], false, "{detail}");
    assert_eq!(abs["node_loss"]["worst"], "node 1");
    assert_eq!(abs["node_loss"]["short_memory_mb"], 6144);
    assert_eq!(abs["node_loss"]["short_cpu_millis"], 3000);
    assert_eq!(abs["region_loss"], Value::Null, "one region");
    assert_eq!(abs["basis"], "workloads");
    assert_eq!(detail["n_plus"], 1);
    let viewer = app.quick_session("vera").await;
    let words = "short 6 GiB, 3000 millicores if node 1 goes";
    for page in ["/fleets/demo", "/"] {
        let html = app.get(page, &viewer).await.text().await.unwrap();
        let shown = crate::helpers::texts(&html, ".absorption");
        assert_eq!(shown.len(), 1, "{page}: {shown:?}");
        assert!(shown[0].starts_with(words), "{page}: {shown:?}");
    }
    let fleet_page = app.get("/fleets/demo", &viewer).await.text().await.unwrap();
    let headroom = crate::helpers::texts(&fleet_page, "#now dd");
    assert!(
        headroom
            .iter()
            .any(|t| t.starts_with("N+1 of N+1 required by yubaba's count")),
        "{headroom:?}"
    );
}

#[tokio::test]
async fn a_member_that_does_not_answer_is_judged_as_already_lost_and_its_region_still_counts() {
    let app = TestApp::spawn().await;
    let big = [(6144, 3000)];
    let a = node((8192, 4000), &big, Some(sized(&big))).await;
    let b = node((8192, 4000), &[], Some(sized(&[]))).await;
    // Node 3, alone in nbg1, is listed by raft but answers nothing. It is already lost: it
    // takes nothing, yet nbg1 still counts as a region, so losing fsn1 leaves node 1's 6 GiB
    // nowhere to go (dropping node 3 would have made the fleet one region, and absorbed).
    let down = crate::helpers::DeadPort::bind();
    let members = [
        (1, addr(&a)),
        (2, addr(&b)),
        (3, format!("127.0.0.1:{}", down.port())),
    ];
    let mut body = status(
        1,
        Some(1),
        3,
        &members,
        Some(json!({"spare": 1, "required": 1})),
    );
    let nodes = &mut body["membership_config"]["membership"]["nodes"];
    for (id, region) in [("1", "fsn1"), ("2", "fsn1"), ("3", "nbg1")] {
        nodes[id]["region"] = json!(region);
    }
    serve_status(&a, body).await;
    let spec = spec_with(&[a.uri()], json!({ "scrape_timeout_secs": 3 }));
    let o = scrape_once(&app.state.ctx, &spec)
        .await
        .outcome
        .expect("a member down keeps the sample ok");
    let abs = o.absorption.expect("judged on the members that answered");
    assert!(
        abs.node_loss.absorbed,
        "node 1's 6 GiB fits on node 2: {abs:?}"
    );
    let region = abs
        .region_loss
        .clone()
        .expect("nbg1 still counts as a region");
    assert!(!region.absorbed, "{abs:?}");
    assert_eq!(region.worst, "region fsn1");
    assert_eq!(abs.unanswered, 1);
    assert_eq!(abs.basis, Basis::Workloads);
    assert!(!abs.absorbed());
    assert_eq!(o.members.len(), 3, "the member list still names it");
}
