//! The headroom pages: the dashboard's fleet cards and their polled partial, the fleet page
//! (now, chart with range buttons, recent samples, time to restore) and its chart partial.
//! Samples are recorded through `record` (the one writer) on the app's manual clock, one
//! scrape interval apart, as the scraper would.

use std::time::Duration;

use headroom::capacity::record::record;
use headroom::context::Ctx;
use headroom::domain::capacity::{DeficitPolicy, Member, Observation, Sample, Source};
use headroom::domain::Role;
use reqwest::StatusCode;
use scraper::{Html, Selector};
use serde_json::json;

use crate::helpers::{texts, Session, TestApp};
use crate::runner::{console, fleet};

const INTERVAL: Duration = Duration::from_secs(15);

async fn setup() -> (TestApp, Ctx, Session) {
    let app = console(|s| {
        s.deficit = DeficitPolicy {
            enter_after: 3,
            leave_after: 3,
        };
    })
    .await;
    let ctx = app.state.ctx.clone();
    fleet(&ctx, "prod", &[]).await;
    let viewer = app.session_for(Role::Viewer).await;
    (app, ctx, viewer)
}

fn observation(spare: u32, required: u32, leader: &str, addr: &str) -> Observation {
    Observation {
        source: Source::Native,
        spare,
        required,
        leader_id: Some(1),
        leader_url: Some(leader.into()),
        term: Some(7),
        members: vec![
            Member {
                id: 1,
                addr: addr.into(),
                voter: true,
            },
            Member {
                id: 4,
                addr: "127.0.0.4:7443".into(),
                voter: false,
            },
        ],
        evidence: json!({ "headroom": { "spare": spare, "required": required } }),
    }
}

/// Records one sample per letter, one interval apart: `G` good (3 of 2), `B` below (1 of 2),
/// `F` failed with `error`.
async fn feed(app: &TestApp, ctx: &Ctx, fleet: &str, seq: &str, error: &str) {
    for kind in seq.chars() {
        app.clock.advance(INTERVAL);
        let outcome = match kind {
            'G' => Ok(observation(3, 2, "http://127.0.0.1:7443", "127.0.0.1:7443")),
            'B' => Ok(observation(1, 2, "http://127.0.0.1:7443", "127.0.0.1:7443")),
            'F' => Err(error.to_owned()),
            other => panic!("unknown sample kind {other}"),
        };
        let sample = Sample {
            at: ctx.now(),
            latency_ms: 12,
            outcome,
        };
        record(ctx, fleet, &sample).await.expect("record");
    }
}

async fn page(app: &TestApp, path: &str, s: &Session) -> (StatusCode, String) {
    let res = app.get(path, s).await;
    (res.status(), res.text().await.unwrap())
}

async fn htmx_get(app: &TestApp, path: &str, s: &Session) -> (StatusCode, String) {
    let res = app
        .client
        .get(app.url(path))
        .header("Cookie", &s.cookie)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    (res.status(), res.text().await.unwrap())
}

/// Heading levels in document order.
fn heading_levels(html: &str) -> Vec<u8> {
    let doc = Html::parse_document(html);
    let sel = Selector::parse("main h1, main h2, main h3, main h4").unwrap();
    doc.select(&sel)
        .map(|e| e.value().name()[1..].parse().unwrap())
        .collect()
}

fn assert_heading_order(html: &str, what: &str) {
    let levels = heading_levels(html);
    assert_eq!(
        levels.first(),
        Some(&1),
        "{what}: starts with h1: {levels:?}"
    );
    for w in levels.windows(2) {
        assert!(w[1] <= w[0] + 1, "{what}: no level skipped: {levels:?}");
    }
}

/// The `action` of every POST form inside `<main>` (the header's sign-out is not the page's).
fn post_actions(html: &str) -> Vec<String> {
    let doc = Html::parse_document(html);
    let sel = Selector::parse("main form[method=post]").unwrap();
    doc.select(&sel)
        .map(|e| e.value().attr("action").unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_viewer_sees_now_the_chart_samples_and_time_to_restore_without_any_action() {
    let (app, ctx, viewer) = setup().await;
    // Healthy, three failed scrapes (at least one whole 30 s bucket without numbers: a gap),
    // three below (enter: a proposal), three good (leave).
    feed(&app, &ctx, "prod", "GGGFFFBBBGGG", "could not connect").await;
    let (status, html) = page(&app, "/fleets/prod", &viewer).await;
    assert_eq!(status, 200, "{html}");

    // Now: status in words, N+k, leader, members with their role.
    assert_eq!(texts(&html, "#now .badge.status"), ["healthy"]);
    assert_eq!(texts(&html, "#now .nk"), ["N+3 of N+2 required"]);
    assert!(
        html.contains("<code>http://127.0.0.1:7443</code> (id 1)"),
        "{html}"
    );
    let members = texts(&html, "#now ul.members li");
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(
        members[0].ends_with("voter") && members[1].ends_with("learner"),
        "{members:?}"
    );
    assert_eq!(
        texts(&html, "#now a[href='/provisions?fleet=prod']").len(),
        1
    );

    // The chart: 1 h by default, its range buttons, a text alternative and the data table.
    assert_eq!(texts(&html, "#chart[data-range='1h']").len(), 1);
    let doc = Html::parse_document(&html);
    let buttons = Selector::parse(".range-buttons a").unwrap();
    let hrefs: Vec<(String, String)> = doc
        .select(&buttons)
        .map(|a| {
            (
                a.value().attr("href").unwrap().to_owned(),
                a.value().attr("hx-get").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(hrefs.len(), 6);
    assert_eq!(
        hrefs[2],
        (
            "/fleets/prod?range=24h".to_owned(),
            "/fleets/prod/chart?range=24h".to_owned()
        )
    );
    assert_eq!(texts(&html, ".range-buttons a[aria-current=true]"), ["1 h"]);
    assert!(html.contains("role=\"img\" aria-labelledby=\"chart-prod-caption chart-prod-summary\""));
    let summary = texts(&html, "#chart-prod-summary");
    assert!(
        summary[0].starts_with("Spare min 1, max 3, required 2"),
        "{summary:?}"
    );
    assert!(summary[0].contains("1 gap"), "{summary:?}");
    assert_eq!(texts(&html, "svg.chart path.spare").len(), 1);
    assert_eq!(
        texts(&html, "svg.chart path.deficit").len(),
        1,
        "the dip is shaded"
    );

    // Recent samples, newest first, in a focusable pane; the failed one says why.
    let pane = Selector::parse("#samples .scroll-pane[tabindex='0'][aria-label]").unwrap();
    assert_eq!(doc.select(&pane).count(), 1);
    let rows = texts(&html, "#samples tbody tr");
    assert_eq!(rows.len(), 12, "{rows:?}");
    assert!(rows[6].contains("failed: could not connect"), "{rows:?}");

    // Time to restore: the deficit, its proposal linked, restored after leaving.
    let deficit_rows = texts(&html, "#deficits tbody tr");
    assert_eq!(deficit_rows.len(), 1, "{deficit_rows:?}");
    let link = Selector::parse("#deficits tbody a[href^='/provisions/']").unwrap();
    assert_eq!(doc.select(&link).count(), 1, "the proposal is linked");
    assert!(
        !deficit_rows[0].contains("open"),
        "restored: {deficit_rows:?}"
    );

    // Settings are kept; a viewer gets no action on this page.
    assert!(html.contains("scrape_interval_secs"));
    assert_eq!(post_actions(&html), Vec::<String>::new());
    assert_heading_order(&html, "the fleet page");
}

#[tokio::test]
async fn the_chart_partial_swaps_ranges_and_refuses_an_unknown_one_by_name() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    for range in ["1h", "6h", "24h", "7d", "30d", "90d"] {
        let (status, html) =
            htmx_get(&app, &format!("/fleets/prod/chart?range={range}"), &viewer).await;
        assert_eq!(status, 200, "{range}: {html}");
        assert!(!html.contains("<html"), "{range}: a fragment");
        assert!(
            html.starts_with("<div class=\"chart-panel\" id=\"chart\""),
            "{range}: {html}"
        );
        assert!(html.contains(&format!("data-range=\"{range}\"")), "{range}");
        assert_eq!(
            texts(&html, ".range-buttons a[aria-current=true]").len(),
            1,
            "{range}"
        );
        assert!(html.contains("<svg"), "{range}: four samples drawn");
    }
    // Without a range: the last hour, like the page.
    let (status, html) = htmx_get(&app, "/fleets/prod/chart", &viewer).await;
    assert_eq!(status, 200);
    assert!(html.contains("data-range=\"1h\""));
    for (query, shown) in [
        ("?range=2h", "&quot;2h&quot;"),
        ("?range=", "&quot;&quot;"),
        ("?range=%3Cb%3E", "&lt;b&gt;"),
    ] {
        let (status, html) = htmx_get(&app, &format!("/fleets/prod/chart{query}"), &viewer).await;
        assert_eq!(status, 400, "{query}");
        assert!(
            html.contains("range:"),
            "{query}: names the parameter: {html}"
        );
        assert!(html.contains(shown), "{query}: {html}");
        assert!(
            html.contains("1h, 6h, 24h, 7d, 30d, 90d"),
            "{query}: lists the allowed: {html}"
        );
    }
}

#[tokio::test]
async fn an_unknown_range_on_the_page_shows_an_hour_and_says_which_are_allowed() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GG", "").await;
    let (status, html) = page(&app, "/fleets/prod?range=1w", &viewer).await;
    assert_eq!(status, 200);
    let notice = texts(&html, "#headroom .notice");
    assert_eq!(
        notice,
        ["The range range=1w is not one of 1h, 6h, 24h, 7d, 30d, 90d; showing the last hour."]
    );
    assert_eq!(texts(&html, "#chart[data-range='1h']").len(), 1);
    // A known range shows no notice and its own chart.
    let (_, html) = page(&app, "/fleets/prod?range=7d", &viewer).await;
    assert!(texts(&html, "#headroom .notice").is_empty());
    assert_eq!(texts(&html, "figure[data-range='7d']").len(), 1);
}

#[tokio::test]
async fn an_unknown_fleet_is_404_on_the_page_and_the_chart() {
    let (app, _ctx, viewer) = setup().await;
    let (status, _) = page(&app, "/fleets/nope", &viewer).await;
    assert_eq!(status, 404);
    let (status, _) = htmx_get(&app, "/fleets/nope/chart?range=1h", &viewer).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_fleet_never_scraped_says_so_everywhere() {
    let (app, _ctx, viewer) = setup().await;
    let (status, html) = page(&app, "/fleets/prod", &viewer).await;
    assert_eq!(status, 200);
    assert_eq!(texts(&html, "#now .badge.status"), ["unknown"]);
    assert_eq!(texts(&html, "#now .nk"), ["—"]);
    assert!(texts(&html, ".chart-empty")[0].contains("No samples in this range."));
    assert!(html.contains("No samples yet"));
    assert!(html.contains("No deficit recorded."));
    let (_, dash) = page(&app, "/", &viewer).await;
    assert_eq!(
        texts(&dash, "article.fleet-card[data-status='unknown'] h3"),
        ["prod"]
    );
}

#[tokio::test]
async fn hostile_scraped_text_is_escaped_on_the_page_the_dashboard_and_the_cards() {
    let (app, ctx, viewer) = setup().await;
    let hostile = "<script>alert(1)</script>";
    app.clock.advance(INTERVAL);
    let sample = Sample {
        at: ctx.now(),
        latency_ms: 3,
        outcome: Ok(observation(
            1,
            1,
            "http://x\"><script>alert(2)</script>",
            "<img src=x onerror=alert(3)>",
        )),
    };
    record(&ctx, "prod", &sample).await.unwrap();
    feed(&app, &ctx, "prod", "F", hostile).await;
    for path in [
        "/fleets/prod",
        "/",
        "/dashboard/cards",
        "/fleets/prod/chart?range=1h",
    ] {
        let (status, html) = page(&app, path, &viewer).await;
        assert_eq!(status, 200, "{path}");
        assert!(!html.contains("<script>alert"), "{path}: {html}");
        assert!(!html.contains("<img src=x"), "{path}: {html}");
        if path != "/fleets/prod/chart?range=1h" {
            assert!(
                html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "{path}: shown, escaped"
            );
        }
    }
}

#[tokio::test]
async fn the_dashboard_shows_a_card_per_fleet_and_polls_only_the_cards() {
    let (app, ctx, viewer) = setup().await;
    fleet(&ctx, "edge", &[]).await;
    feed(&app, &ctx, "prod", "GGG", "").await;
    feed(&app, &ctx, "edge", "BBB", "").await;
    let (status, html) = page(&app, "/", &viewer).await;
    assert_eq!(status, 200);
    assert_heading_order(&html, "the dashboard");
    let cards = texts(&html, "#fleet-cards article.fleet-card h3");
    assert_eq!(cards, ["edge", "prod"], "by name");
    assert_eq!(
        texts(&html, "article[data-fleet='edge'] .badge.status"),
        ["deficit"]
    );
    assert_eq!(
        texts(&html, "article[data-fleet='edge'] .nk"),
        ["N+1 of N+2 required"]
    );
    assert_eq!(
        texts(&html, "article[data-fleet='prod'] .nk"),
        ["N+3 of N+2 required"]
    );
    let edge = texts(&html, "article[data-fleet='edge'] dl")[0].clone();
    assert!(edge.contains("2 (1 voter, 1 learner)"), "{edge}");
    assert!(edge.contains("ago"), "relative last scrape: {edge}");
    assert!(edge.contains("UTC"), "absolute last scrape: {edge}");
    assert!(
        edge.contains("for 30 s"),
        "time in deficit since the first sample below: {edge}"
    );
    assert!(edge.contains("open request"), "{edge}");
    // The live region sits outside the polled container, empty at first.
    assert_eq!(texts(&html, "#fleet-announcer[aria-live=polite]"), [""]);
    let doc = Html::parse_document(&html);
    let poll = Selector::parse("#fleet-cards[hx-trigger='every 10s'][hx-swap=outerHTML]").unwrap();
    let hx_get = doc
        .select(&poll)
        .next()
        .expect("the cards poll")
        .value()
        .attr("hx-get")
        .unwrap()
        .to_owned();
    assert!(hx_get.starts_with("/dashboard/cards?seen="), "{hx_get}");
    // The dashboard reads the board alone; the activity is the audit page's.
    assert!(!html.contains("Latest activity"));
    assert!(html.contains("href=\"/audit\""));

    // Nothing changed: the partial is the cards alone, with nothing to announce.
    let (status, quiet) = htmx_get(&app, &hx_get, &viewer).await;
    assert_eq!(status, 200);
    assert!(quiet.starts_with("<div id=\"fleet-cards\""), "{quiet}");
    assert!(
        !quiet.contains("<h1") && !quiet.contains("hx-swap-oob"),
        "{quiet}"
    );
    // prod falls short: the next poll announces that change, and only that.
    feed(&app, &ctx, "prod", "BBB", "").await;
    let (_, loud) = htmx_get(&app, &hx_get, &viewer).await;
    let said = texts(&loud, "#fleet-announcer[hx-swap-oob] p");
    assert_eq!(
        said,
        ["prod is now deficit (was healthy), N+1 of N+2 required."]
    );
}

#[tokio::test]
async fn reading_the_pages_and_partials_writes_nothing() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GGBBBF", "timed out").await;
    // The first page view consumes the login's flash; what follows must change nothing.
    page(&app, "/", &viewer).await;
    let before = app.snapshot().await;
    for path in [
        "/",
        "/dashboard/cards?seen=00000000.h",
        "/fleets/prod",
        "/fleets/prod?range=90d",
        "/fleets/prod/chart?range=30d",
    ] {
        let (status, _) = page(&app, path, &viewer).await;
        assert_eq!(status, 200, "{path}");
    }
    assert_eq!(app.snapshot().await, before);
}

#[tokio::test]
async fn the_fleet_pages_now_section_polls_itself_and_shows_the_next_sample_without_a_reload() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GG", "").await;
    let (_, html) = page(&app, "/fleets/prod", &viewer).await;
    // The section is live: it polls its own partial every scrape interval, and the partial
    // shows the next sample without a reload.
    assert!(
        html.contains(r#"hx-get="/fleets/prod/now" hx-trigger="every 15s, live-refresh""#),
        "{html}"
    );
    feed(&app, &ctx, "prod", "B", "").await;
    let (status, part) = htmx_get(&app, "/fleets/prod/now", &viewer).await;
    assert_eq!(status, 200, "{part}");
    assert!(!part.contains("<html"), "only the section: {part}");
    assert_eq!(
        texts(&part, "#now .badge.status"),
        ["deficit pending, 1 of 3 samples"]
    );
    assert_eq!(texts(&part, "#now .nk"), ["N+1 of N+2 required"]);
    // Last scrape and last ok sample, each counted up between polls by app.js.
    assert_eq!(
        texts(&part, "#now .age[data-since][data-rendered]"),
        ["0 s ago", "0 s ago"]
    );
}
