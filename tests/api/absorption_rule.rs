//! A fleet's `headroom_rule`: under `absorption` the deficit rule follows the packing verdict
//! (can the fleet lose its worst node and re-place every workload) instead of yubaba's count,
//! and a proposal asks for the machines-needed answer. Fake yubaba nodes on loopback publish
//! `/node`, `/node/usage` and `/workloads`; each tick is scraped by `scrape_once` and recorded,
//! one scrape interval apart on the app's manual clock.

use std::time::Duration;

use headroom::auth::Caller;
use headroom::capacity::record::record;
use headroom::context::Ctx;
use headroom::domain::capacity::{DeficitPolicy, Health};
use headroom::scraper::scrape_once;
use serde_json::json;
use wiremock::MockServer;

use crate::absorption_scrape::{lead, node, sized};
use crate::helpers::TestApp;
use crate::runner::{console, fleet};
use crate::scraper::spec_with;

const INTERVAL: Duration = Duration::from_secs(15);

/// A console whose restore config declares what a new machine adds (3.5 GiB, 1800
/// millicores), fleet `prod` restoring it under `rule`; a deficit is entered and left after
/// two samples.
async fn setup(rule: &str) -> (TestApp, Ctx) {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 2,
            leave_after: 2,
        };
    })
    .await;
    let ctx = app.state.ctx.clone();
    let system = Caller::system();
    let mut config = headroom::machine_setup::configs::latest(&ctx, &system, "spare-fsn1")
        .await
        .unwrap()
        .spec
        .to_input();
    config.allocatable.memory_mb = Some(json!(3584));
    config.allocatable.cpu_millis = Some(json!(1800));
    headroom::machine_setup::configs::update(&ctx, &system, "spare-fsn1", &config)
        .await
        .expect("the restore config declares its allocatable");
    fleet(&ctx, "prod", &[]).await;
    set_rule(&ctx, rule).await;
    (app, ctx)
}

/// Sets fleet `prod`'s headroom rule through the fleet operation, as an operator's edit does.
async fn set_rule(ctx: &Ctx, rule: &str) {
    let system = Caller::system();
    let f = headroom::fleets::get(ctx, &system, "prod").await.unwrap();
    let mut input = f.spec.to_input();
    input.headroom_rule = Some(json!(rule));
    headroom::fleets::update(ctx, &system, "prod", &input)
        .await
        .expect("rule set");
}

/// Scrapes the fleet behind `nodes` (node 1 leads and counts `spare` of required 1) once per
/// tick and records each sample as fleet `prod`'s.
async fn tick(app: &TestApp, ctx: &Ctx, nodes: &[&MockServer], ticks: usize) {
    let spec = spec_with(&[nodes[0].uri()], json!({ "scrape_timeout_secs": 3 }));
    for _ in 0..ticks {
        app.clock.advance(INTERVAL);
        let sample = scrape_once(ctx, &spec).await;
        assert!(sample.outcome.is_ok(), "{:?}", sample.outcome);
        record(ctx, "prod", &sample).await.expect("record");
    }
}

async fn provisions(app: &TestApp) -> Vec<(String, i64, String)> {
    sqlx::query_as(
        "SELECT requester, count, reason FROM provisions WHERE fleet = 'prod' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

async fn status_now(ctx: &Ctx) -> headroom::domain::capacity::FleetNow {
    headroom::capacity::board::now(
        ctx,
        &crate::runner::caller("vera", headroom::domain::Role::Viewer),
        "prod",
    )
    .await
    .unwrap()
}

/// yubaba's seed case: every node carries one small tenant, so its count says 0 spares of 1
/// required; each node's 1 GiB fits on the others' room.
async fn small_tenants_everywhere() -> Vec<MockServer> {
    let small = [(1024, 500)];
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(node((8192, 4000), &small, Some(sized(&small))).await);
    }
    let refs: Vec<&MockServer> = nodes.iter().collect();
    lead(&refs, 0).await;
    nodes
}

/// One empty spare too small for node 1's workloads: yubaba counts 1 spare of 1 required, but
/// losing node 1 leaves a 3 GiB workload with nowhere to go; one restore machine (3.5 GiB)
/// takes it.
async fn a_spare_too_small() -> Vec<MockServer> {
    let heavy = [(3072, 1000), (3072, 1000)];
    let light = [(2048, 500), (2048, 500)];
    let nodes = vec![
        node((8192, 4000), &heavy, Some(sized(&heavy))).await,
        node((8192, 4000), &light, Some(sized(&light))).await,
        node((2048, 1000), &[], Some(sized(&[]))).await,
    ];
    let refs: Vec<&MockServer> = nodes.iter().collect();
    lead(&refs, 1).await;
    nodes
}

#[tokio::test]
async fn under_absorption_a_fleet_whose_nodes_all_carry_small_tenants_is_healthy_and_files_nothing()
{
    let (app, ctx) = setup("absorption").await;
    let nodes = small_tenants_everywhere().await;
    let refs: Vec<&MockServer> = nodes.iter().collect();
    tick(&app, &ctx, &refs, 4).await;
    let now = status_now(&ctx).await;
    assert_eq!(now.status, Health::Healthy, "{now:?}");
    assert_eq!(now.n_plus, Some(0), "yubaba's own count is still shown");
    assert!(now.absorption.as_ref().is_some_and(|a| a.absorbed()));
    assert!(provisions(&app).await.is_empty());

    // Switching the rule changes the verdict at the very next sample: yubaba's count is short.
    set_rule(&ctx, "spare_count").await;
    tick(&app, &ctx, &refs, 1).await;
    let now = status_now(&ctx).await;
    assert_eq!(now.status, Health::Pending, "{now:?}");
    assert_eq!(now.pending.map(|p| (p.samples, p.of)), Some((1, 2)));
    tick(&app, &ctx, &refs, 1).await;
    assert_eq!(status_now(&ctx).await.status, Health::Deficit);
    let filed = provisions(&app).await;
    assert_eq!(filed.len(), 1, "{filed:?}");
    assert_eq!(filed[0].1, 1, "one spare missing by the count");
    assert!(
        filed[0].2.contains("spare 0 of required 1"),
        "{}",
        filed[0].2
    );
}

#[tokio::test]
async fn under_absorption_a_spare_too_small_is_a_deficit_with_one_proposal_for_the_machines_needed()
{
    let (app, ctx) = setup("spare_count").await;
    let nodes = a_spare_too_small().await;
    let refs: Vec<&MockServer> = nodes.iter().collect();
    // yubaba's count is satisfied: healthy, nothing filed.
    tick(&app, &ctx, &refs, 3).await;
    let now = status_now(&ctx).await;
    assert_eq!(now.status, Health::Healthy, "{now:?}");
    let a = now.absorption.clone().expect("judged");
    assert!(!a.absorbed(), "{a:?}");
    assert_eq!(a.machines_needed, Some(1), "{a:?}");
    assert!(provisions(&app).await.is_empty());

    // Under absorption the next sample is short, the one after enters the deficit.
    set_rule(&ctx, "absorption").await;
    tick(&app, &ctx, &refs, 1).await;
    assert_eq!(status_now(&ctx).await.status, Health::Pending);
    tick(&app, &ctx, &refs, 3).await;
    let now = status_now(&ctx).await;
    assert_eq!(now.status, Health::Deficit, "{now:?}");
    let filed = provisions(&app).await;
    assert_eq!(
        filed.len(),
        1,
        "one proposal however long it lasts: {filed:?}"
    );
    let (requester, count, reason) = &filed[0];
    assert_eq!(requester, "system");
    assert_eq!(*count, 1, "the machines-needed answer");
    assert!(
        reason.contains("absorption short: short 3 GiB, 1000 millicores if node 1 goes"),
        "{reason}"
    );
    // The deficit's evidence names the rule and the worst failure.
    let evidence: String = sqlx::query_scalar("SELECT evidence FROM fleet_deficits")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let evidence: serde_json::Value = serde_json::from_str(&evidence).unwrap();
    assert_eq!(evidence["rule"], "absorption");
    assert_eq!(evidence["absorption"]["node_loss"]["worst"], "node 1");
    assert_eq!(evidence["absorption"]["node_loss"]["short_memory_mb"], 3072);
    // And the audit entry says which rule judged, in words.
    let details: String =
        sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'fleet.deficit_entered'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let details: serde_json::Value = serde_json::from_str(&details).unwrap();
    assert_eq!(details["rule"], "absorption");
    assert!(details["absorption"]
        .as_str()
        .unwrap()
        .contains("if node 1 goes"));

    // Each headroom point carries the bucket's verdict, and the chart draws it as a band.
    app.create_user("vera", headroom::domain::Role::Viewer)
        .await;
    let token = app.token_for("vera").await;
    let series = app.api_json("/api/v1/fleets/prod/headroom", &token).await;
    let points = series["points"].as_array().expect("points");
    assert!(!points.is_empty(), "{series}");
    for p in points {
        assert_eq!(
            (&p["absorbed"], &p["machines_needed"]),
            (&json!(false), &json!(1)),
            "{p}"
        );
    }
    let viewer = app.quick_session("vera").await;
    let page = app.get("/fleets/prod", &viewer).await.text().await.unwrap();
    let band = crate::helpers::texts(&page, "g.absorption-band rect.absorption-short title");
    assert_eq!(band.len(), 1, "one short run drawn: {band:?}");
    assert!(band[0].ends_with("UTC: absorption short"), "{band:?}");
    let summary = crate::helpers::texts(&page, ".chart-summary").join(" ");
    assert!(
        summary.contains("Absorption short in intervals totalling "),
        "{summary}"
    );
}

#[tokio::test]
async fn a_cap_below_the_machines_needed_asks_for_the_cap_and_says_so() {
    let (app, ctx) = setup("absorption").await;
    // Node 1 carries four 3 GiB workloads; nothing else has room for one: four 3.5 GiB
    // restore machines are needed, the fleet lets a proposal ask for 2.
    let heavy = [(3072, 500); 4];
    let nodes = [
        node((16384, 4000), &heavy, Some(sized(&heavy))).await,
        node((2048, 1000), &[], Some(sized(&[]))).await,
    ];
    let refs: Vec<&MockServer> = nodes.iter().collect();
    lead(&refs, 1).await;
    let system = Caller::system();
    let f = headroom::fleets::get(&ctx, &system, "prod").await.unwrap();
    let mut input = f.spec.to_input();
    input.max_restore_machines = Some(json!(2));
    headroom::fleets::update(&ctx, &system, "prod", &input)
        .await
        .unwrap();
    tick(&app, &ctx, &refs, 2).await;
    let filed = provisions(&app).await;
    assert_eq!(filed.len(), 1, "{filed:?}");
    assert_eq!(filed[0].1, 2);
    assert!(
        filed[0]
            .2
            .contains("capped at 2 by the fleet's max_restore_machines (4 needed"),
        "{}",
        filed[0].2
    );
}
