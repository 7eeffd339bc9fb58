//! Probes and metrics.

use crate::helpers::TestApp;

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let app = TestApp::spawn().await;
    let h = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap().trim(), "ready");
}

#[tokio::test]
async fn readyz_fails_when_the_database_is_gone() {
    let app = TestApp::spawn().await;
    app.pool.close().await;
    let r = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
}

#[tokio::test]
async fn metrics_count_requests_per_route_with_a_latency_histogram() {
    let app = TestApp::spawn().await;
    for _ in 0..3 {
        app.client.get(app.url("/login")).send().await.unwrap();
    }
    app.client
        .get(app.url("/no/such/page"))
        .send()
        .await
        .unwrap();
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains(
            "headroom_http_requests_total{method=\"GET\",route=\"/login\",status=\"200\"} 3"
        ),
        "{text}"
    );
    assert!(text.contains("# TYPE headroom_http_request_duration_seconds histogram"));
    assert!(text.contains(
        "headroom_http_request_duration_seconds_count{method=\"GET\",route=\"/login\"} 3"
    ));
    // Unmatched paths share one label, so label cardinality cannot be blown up from outside.
    assert!(
        text.contains("route=\"unmatched\",status=\"404\"} 1"),
        "{text}"
    );
    assert!(!text.contains("/no/such/page"));
}

#[tokio::test]
async fn static_files_are_embedded_and_htmx_is_vendored() {
    let app = TestApp::spawn().await;
    let res = app
        .client
        .get(app.url("/static/htmx-2.0.11.min.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body = res.text().await.unwrap();
    assert!(body.contains("version:\"2.0.11\""));
    assert_eq!(
        app.client
            .get(app.url("/static/nope.js"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        app.client
            .get(app.url("/static/..%2Fsrc%2Fmain.rs"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn unknown_paths_are_404_html_or_problem_json() {
    let app = TestApp::spawn().await;
    let page = app.client.get(app.url("/nope")).send().await.unwrap();
    assert_eq!(page.status(), 404);
    let api = app
        .client
        .get(app.url("/api/v1/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404);
    assert_eq!(api.headers()["content-type"], "application/problem+json");
}
