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
        absorption: None,
        source: Source::Native,
        spare,
        required,
        leader_id: Some(1),
        leader_url: Some(leader.into()),
        term: Some(7),
        members: vec![
            Member::listed(1, addr, true),
            Member::listed(4, "127.0.0.4:7443", false),
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
    // Native mode: yubaba does not say which members are its spares, and the page says so.
    assert_eq!(
        texts(&html, "#now table.members td.role"),
        ["voter (load not read)", "learner"]
    );
    assert_eq!(texts(&html, "#now .members-note").len(), 1);
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
    assert_eq!(hrefs.len(), 7);
    assert_eq!(
        hrefs[3],
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
    for range in ["15m", "1h", "6h", "24h", "7d", "30d", "90d"] {
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
            html.contains("15m, 1h, 6h, 24h, 7d, 30d, 90d"),
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
        ["The range range=1w is not one of 15m, 1h, 6h, 24h, 7d, 30d, 90d; showing the last hour."]
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
        "/fleets/prod/chart/live?range=30d",
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

/// The `hx-get` of the live chart figure in `html`, and its trigger.
fn live_chart_poll(html: &str) -> (String, String) {
    let doc = Html::parse_document(html);
    let sel = Selector::parse("#chart #chart-live[data-live][hx-swap=outerHTML]").unwrap();
    let live = doc.select(&sel).next().expect("a live chart");
    let attr = |name| live.value().attr(name).unwrap().to_owned();
    (attr("hx-get"), attr("hx-trigger"))
}

#[tokio::test]
async fn the_chart_polls_its_own_window_and_shows_a_sample_recorded_after_the_page_loaded() {
    let (app, ctx, viewer) = setup().await;
    let fmt = headroom::domain::clock::format_utc;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    let (_, html) = page(&app, "/fleets/prod?range=15m", &viewer).await;
    // Only the figure polls, every scrape interval, for the window shown; the range buttons
    // and the window form stay outside it (a refresh never takes their focus or a typed time).
    let (poll, trigger) = live_chart_poll(&html);
    assert_eq!(poll, "/fleets/prod/chart/live?range=15m");
    assert_eq!(trigger, "every 15s, live-refresh");
    let doc = Html::parse_document(&html);
    let inside = Selector::parse("#chart-live .range-buttons, #chart-live form").unwrap();
    assert_eq!(doc.select(&inside).count(), 0);
    let before = texts(&html, "#chart-prod-summary")[0].clone();
    assert!(before.starts_with("Spare min 3, max 3"), "{before}");
    assert!(
        before.ends_with(&format!(
            "Updated {} UTC.",
            fmt(ctx.now()).replace('T', " ").trim_end_matches('Z')
        )),
        "{before}"
    );

    // A dip recorded after the page loaded: the poll shows it, its window moved forward, and
    // the answer is the same live element, without pushing an address.
    feed(&app, &ctx, "prod", "B", "").await;
    app.clock.advance(Duration::from_secs(1));
    let res = app
        .client
        .get(app.url(&poll))
        .header("Cookie", &viewer.cookie)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers().get("hx-push-url").is_none(),
        "a poll is no navigation"
    );
    let part = res.text().await.unwrap();
    assert!(part.starts_with("<div id=\"chart-live\""), "{part}");
    assert!(!part.contains("<html"), "a fragment");
    assert_eq!(
        live_chart_poll(&format!("<div id=chart>{part}</div>")).0,
        poll
    );
    let after = texts(&part, "#chart-prod-summary")[0].clone();
    assert!(after.starts_with("Spare min 1, max 3"), "{after}");
    assert_eq!(drawn_window(&part).1, fmt(ctx.now()), "ends at now again");
    assert_ne!(after, before);

    // A custom window polls the same window; one given without `to` keeps ending at now.
    let from = ctx.now() - 10 * 60_000;
    let fixed = format!("from={}&to={}", fmt(from), fmt(ctx.now() - 60_000));
    let (_, html) = page(&app, &format!("/fleets/prod?{fixed}"), &viewer).await;
    let (poll, _) = live_chart_poll(&html);
    let (_, part) = htmx_get(&app, &poll, &viewer).await;
    assert_eq!(drawn_window(&part), drawn_window(&html));
    let (_, html) = page(&app, &format!("/fleets/prod?from={}", fmt(from)), &viewer).await;
    assert_eq!(
        input_value(&html, "chart-to"),
        "",
        "ending now: `to` left empty"
    );
    let (poll, _) = live_chart_poll(&html);
    assert!(!poll.contains("to="), "{poll}");
    app.clock.advance(INTERVAL);
    let (_, part) = htmx_get(&app, &poll, &viewer).await;
    assert_eq!(drawn_window(&part).1, fmt(ctx.now()), "moved forward");

    // Values only the page's own markup sends: a bad one is 400 naming the field.
    for (query, said) in [
        ("range=2h", "range:"),
        ("from=yesterday", "from: must be a time like"),
        ("from=2099-01-01T00:00", "from: must be earlier than now"),
    ] {
        let (status, html) =
            htmx_get(&app, &format!("/fleets/prod/chart/live?{query}"), &viewer).await;
        assert_eq!(status, 400, "{query}");
        assert!(html.contains(said), "{query}: {html}");
    }
    let (status, _) = htmx_get(&app, "/fleets/nope/chart/live?range=1h", &viewer).await;
    assert_eq!(status, 404);
}

// ---- The chart for incidents: windows ending now, custom windows, the fleet's start, requests.

/// The `data-from`/`data-to` edges of the chart drawn in `html`.
fn drawn_window(html: &str) -> (String, String) {
    let doc = Html::parse_document(html);
    let sel = Selector::parse("figure.headroom-chart").unwrap();
    let fig = doc.select(&sel).next().expect("a chart");
    let attr = |name| fig.value().attr(name).unwrap().to_owned();
    (attr("data-from"), attr("data-to"))
}

/// The value of input `#id`.
fn input_value(html: &str, id: &str) -> String {
    let doc = Html::parse_document(html);
    let sel = Selector::parse(&format!("input#{id}")).unwrap();
    let input = doc.select(&sel).next().expect("the input");
    input.value().attr("value").unwrap_or("").to_owned()
}

#[tokio::test]
async fn every_range_ends_at_the_request_time_on_the_manual_clock_never_later() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    // Off every grid line: the last bucket is partial, and still the edge is now.
    app.clock.advance(Duration::from_millis(7_777));
    let now = headroom::domain::clock::format_utc(ctx.now());
    for range in ["15m", "1h", "6h", "24h", "7d", "30d", "90d"] {
        let (status, html) =
            htmx_get(&app, &format!("/fleets/prod/chart?range={range}"), &viewer).await;
        assert_eq!(status, 200, "{range}");
        assert_eq!(drawn_window(&html).1, now, "{range}: the right edge is now");
        let (_, page_html) = page(&app, &format!("/fleets/prod?range={range}"), &viewer).await;
        assert_eq!(drawn_window(&page_html).1, now, "{range} on the page");
    }
    // The shortest range is offered first, as "15 min", and draws fifteen minutes.
    let (_, html) = page(&app, "/fleets/prod?range=15m", &viewer).await;
    assert_eq!(texts(&html, ".range-buttons a")[0], "15 min");
    assert_eq!(
        texts(&html, ".range-buttons a[aria-current=true]"),
        ["15 min"]
    );
    assert!(texts(&html, "figcaption")[0].contains("last 15 minutes"));
}

#[tokio::test]
async fn a_custom_window_in_the_address_shows_the_same_window_and_the_form_holds_it() {
    let (app, ctx, viewer) = setup().await;
    let start = ctx.now();
    feed(&app, &ctx, "prod", &"G".repeat(12), "").await;
    feed(&app, &ctx, "prod", "BBBBBB", "").await;
    feed(&app, &ctx, "prod", &"G".repeat(12), "").await;
    let fmt = headroom::domain::clock::format_utc;
    // The two minutes of the deficit and a little around them, in the history filters'
    // `datetime-local` form and in RFC 3339.
    let (from, to) = (start + 3 * 60_000 - 15_000, start + 5 * 60_000);
    let local = |t: i64| fmt(t).trim_end_matches('Z').to_owned();
    let query = format!("from={}&to={}", local(from), fmt(to));
    let (status, html) = page(&app, &format!("/fleets/prod?{query}"), &viewer).await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(texts(&html, "#chart[data-range='custom']").len(), 1);
    assert!(texts(&html, ".range-buttons a[aria-current=true]").is_empty());
    let (drawn_from, drawn_to) = drawn_window(&html);
    assert_eq!(drawn_to, fmt(to));
    assert!(
        drawn_from >= fmt(from) && drawn_from < fmt(from + 30_000),
        "{drawn_from}"
    );
    assert!(texts(&html, "figcaption")[0].contains("custom window of"));
    let summary = texts(&html, "#chart-prod-summary");
    assert!(summary[0].contains("below required"), "{summary:?}");
    // The form: labelled, GET to the page, swapped into the chart by htmx, holding the window.
    let doc = Html::parse_document(&html);
    let form = Selector::parse("form.chart-window[method=get][action='/fleets/prod'][hx-get='/fleets/prod/chart'][hx-target='#chart']").unwrap();
    assert_eq!(doc.select(&form).count(), 1, "{html}");
    for id in ["chart-from", "chart-to"] {
        let label = Selector::parse(&format!("label[for={id}]")).unwrap();
        assert_eq!(doc.select(&label).count(), 1, "{id} labelled");
    }
    assert_eq!(
        input_value(&html, "chart-to"),
        local(to).trim_end_matches(":00")
    );
    assert!(texts(&html, ".error-summary").is_empty());

    // The partial answers the same window and pushes the page's address for it.
    let res = app
        .client
        .get(app.url(&format!("/fleets/prod/chart?{query}")))
        .header("Cookie", &viewer.cookie)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let pushed = res.headers()["hx-push-url"].to_str().unwrap().to_owned();
    let html = res.text().await.unwrap();
    assert_eq!(drawn_window(&html).1, fmt(to));
    assert!(pushed.starts_with("/fleets/prod?from="), "{pushed}");
    let (_, again) = page(&app, &pushed, &viewer).await;
    assert_eq!(
        drawn_window(&again),
        drawn_window(&html),
        "the pushed address shows it"
    );
    // A range button pushes its range.
    let res = app
        .client
        .get(app.url("/fleets/prod/chart?range=6h"))
        .header("Cookie", &viewer.cookie)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["hx-push-url"], "/fleets/prod?range=6h");
}

#[tokio::test]
async fn a_refused_custom_window_names_the_field_and_rule_and_shows_the_last_hour() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    let huge = "2".repeat(5_000);
    for (query, field, rule) in [
        ("from=yesterday", "from", "must be a time like"),
        (
            "from=2026-11-30T00:30&to=2026-11-30T00:10",
            "to",
            "must be later than from",
        ),
        ("to=2099-01-01T00:00", "to", "must not be later than now"),
        ("from=2099-01-01T00:00", "from", "must be earlier than now"),
        (
            "from=1970-01-01T00:00",
            "from",
            "must be within the last 400 days",
        ),
        (
            "from=0001-01-01T00:00&to=0001-01-02T00:00",
            "from",
            "must be within the last 400 days",
        ),
        ("from=2026-11-30T00:30%00", "from", "must be a time like"),
        ("to=2026-11-30T00:30%1B%5B31m", "to", "must be a time like"),
        (
            "from=2026-11-30T00:40:00Z&to=2026-11-30T00:40:30Z",
            "to",
            "must be at least 1 minute after from",
        ),
        (
            &format!("from={huge}") as &str,
            "from",
            "must be a time like",
        ),
    ] {
        for path in ["/fleets/prod", "/fleets/prod/chart"] {
            let url = format!("{path}?{query}");
            let (status, html) = if path.ends_with("/chart") {
                htmx_get(&app, &url, &viewer).await
            } else {
                page(&app, &url, &viewer).await
            };
            assert_eq!(status, 200, "{path}?{query:.60}: never an error page");
            let said = texts(&html, "#chart .error-summary li").join(" | ");
            assert!(
                said.contains(&format!("{field}: {rule}")),
                "{path}?{query:.60}: {said}"
            );
            assert_eq!(
                texts(&html, &format!("#chart-{field}-error")).len(),
                1,
                "{query:.60}: beside its input"
            );
            assert_eq!(
                texts(&html, "#chart[data-range='1h']").len(),
                1,
                "{query:.60}"
            );
            assert!(
                !html.contains("\u{1b}"),
                "{query:.60}: control characters not echoed"
            );
        }
    }
}

#[tokio::test]
async fn time_before_the_fleet_existed_is_no_gap_on_the_chart() {
    let (app, ctx, viewer) = setup().await;
    let created = ctx.now();
    // Failed samples stamped before the fleet's creation (an earlier fleet's, say), then a
    // healthy fleet.
    for back in [40, 30, 20] {
        let sample = Sample {
            at: created - back * 60_000,
            latency_ms: 5,
            outcome: Err("could not connect".into()),
        };
        record(&ctx, "prod", &sample).await.expect("record");
    }
    feed(&app, &ctx, "prod", "GGGGGG", "").await;
    let (_, html) = page(&app, "/fleets/prod", &viewer).await;
    let summary = texts(&html, "#chart-prod-summary")[0].clone();
    assert!(summary.contains(", 0 gaps."), "{summary}");
    assert!(summary.contains("The fleet was created at"), "{summary}");
    assert!(texts(&html, "svg.chart rect.gap").is_empty());
    assert_eq!(texts(&html, "svg.chart rect.before-fleet").len(), 1);
    let rows = texts(&html, ".chart-data tbody tr");
    assert!(
        rows.iter().all(|r| !r.contains("gap")),
        "no bucket before the fleet is listed as a gap: {rows:?}"
    );
    // The API returns no bucket before the fleet either, and says when it was created.
    let token = {
        app.create_user("vic", Role::Viewer).await;
        app.token_for("vic").await
    };
    let res = app
        .client
        .get(app.url("/api/v1/fleets/prod/headroom"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = res.json().await.unwrap();
    let fmt = headroom::domain::clock::format_utc;
    assert_eq!(body["fleet_created_at"], fmt(created));
    assert!(
        body["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["ok"] == true),
        "{body}"
    );
    assert_eq!(body["to"], fmt(ctx.now()), "the series ends at now");
}

#[tokio::test]
async fn each_request_is_one_bar_worded_by_its_outcome_however_many_events_it_had() {
    let (app, ctx, viewer) = setup().await;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    let cancelled = crate::runner::file(&ctx, "prod", 1).await;
    app.clock.advance(Duration::from_secs(90));
    headroom::provisioning::requests::cancel(
        &ctx,
        &crate::runner::caller("olga", Role::Operator),
        cancelled,
    )
    .await
    .expect("cancel");
    let open = crate::runner::file(&ctx, "prod", 1).await;
    feed(&app, &ctx, "prod", "GGGG", "").await;
    let (_, html) = page(&app, "/fleets/prod?range=15m", &viewer).await;
    let bars = |class: &str| texts(&html, &format!("svg.chart g.request.outcome-{class}"));
    assert_eq!(bars("cancelled").len(), 1, "{html}");
    assert_eq!(bars("open").len(), 1, "{html}");
    assert_eq!(texts(&html, "svg.chart g.request").len(), 2);
    let summary = texts(&html, "#chart-prod-summary")[0].clone();
    assert!(
        summary.contains("2 provision requests: 1 cancelled, 1 open. Updated "),
        "{summary}"
    );
    let list = texts(&html, "ul.chart-requests li");
    assert!(
        list[0].starts_with(&format!("#{cancelled} cancelled: requested"))
            && list[0].ends_with("(1 min 30 s)"),
        "{list:?}"
    );
    assert!(
        list[1].starts_with(&format!("#{open} open (pending approval): requested"))
            && list[1].contains("still open"),
        "{list:?}"
    );
}

/// Issue 16 item 8: each member's role, on the fleet page's member table and in the API's
/// fleet detail, from a derived-mode sample whose members carry their readings (and one
/// that did not answer).
#[tokio::test]
async fn members_say_their_role_on_the_page_and_in_the_api() {
    let (app, ctx, viewer) = setup().await;
    let read = |id: u64, voter: bool, tenants: Option<u64>, capacity: Option<bool>| Member {
        tenants,
        capacity_published: capacity,
        ..Member::listed(id, format!("127.0.0.{id}:7443"), voter)
    };
    let mut o = observation(1, 2, "http://127.0.0.1:7443", "127.0.0.1:7443");
    o.source = Source::Derived;
    o.members = vec![
        read(1, true, Some(1), Some(true)),
        read(2, true, Some(3), Some(true)),
        read(3, true, None, None),
        read(4, false, Some(0), Some(true)),
        read(5, false, Some(0), Some(false)),
    ];
    app.clock.advance(INTERVAL);
    let sample = Sample {
        at: ctx.now(),
        latency_ms: 12,
        outcome: Ok(o),
    };
    record(&ctx, "prod", &sample).await.expect("record");

    let (_, html) = page(&app, "/fleets/prod", &viewer).await;
    let doc = Html::parse_document(&html);
    let heads = Selector::parse("#now table.members th[scope=col]").unwrap();
    let heads: Vec<String> = doc.select(&heads).map(|h| h.text().collect()).collect();
    assert_eq!(heads, ["Address", "Id", "Raft", "Role"]);
    assert_eq!(
        texts(&html, "#now table.members td.role"),
        [
            "carrying 1 tenant",
            "carrying 3 tenants",
            "voter (load not read)",
            "spare",
            "learner"
        ]
    );
    assert!(
        texts(&html, "#now .members-note").is_empty(),
        "derived: read"
    );
    // The polled section says the same.
    let (_, part) = htmx_get(&app, "/fleets/prod/now", &viewer).await;
    assert_eq!(texts(&part, "#now table.members td.role").len(), 5);

    app.create_user("vic", Role::Viewer).await;
    let token = app.token_for("vic").await;
    let detail = app.api_json("/api/v1/fleets/prod", &token).await;
    let roles: Vec<(u64, &str, Option<u64>)> = detail["members"]
        .as_array()
        .expect("members listed")
        .iter()
        .map(|m| {
            (
                m["id"].as_u64().unwrap(),
                m["role"].as_str().unwrap(),
                m["tenants"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            (1, "carrying", Some(1)),
            (2, "carrying", Some(3)),
            (3, "voter", None),
            (4, "spare", Some(0)),
            (5, "learner", Some(0)),
        ]
    );
    assert_eq!(detail["members"][0]["addr"], "127.0.0.1:7443");
    assert_eq!(detail["members"][0]["voter"], true);
}

/// The cards are rendered once a second and shared (`board_html`): under fifty requests at
/// once from a viewer and an operator, each still gets the cards for their role (only the
/// operator is offered "Add a fleet" on an empty board), and a fleet created in the same
/// second is on the very next dashboard, not hidden behind the shared copy.
#[tokio::test]
async fn shared_cards_keep_each_role_its_own_and_show_a_new_fleet_at_once() {
    let app = console(|_| {}).await;
    app.create_user("vic", Role::Viewer).await;
    let viewer = app.quick_session("vic").await;
    let operator = app.quick_session("olga").await;
    let mut loads = tokio::task::JoinSet::new();
    for i in 0..50 {
        let (s, path) = (
            if i % 2 == 0 { &viewer } else { &operator },
            if i % 3 == 0 { "/dashboard/cards" } else { "/" },
        );
        let get = app
            .client
            .get(app.url(path))
            .header("Cookie", &s.cookie)
            .header("HX-Request", "true");
        let operator_asks = i % 2 == 1;
        loads.spawn(async move {
            let res = get.send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            (operator_asks, res.text().await.unwrap())
        });
    }
    while let Some(done) = loads.join_next().await {
        let (operator_asks, html) = done.unwrap();
        assert!(html.contains("No fleets yet."), "{html}");
        assert_eq!(html.contains("Add a fleet"), operator_asks, "{html}");
    }
    // Within the same second (the app's clock stands still): a write replaces the board.
    fleet(&app.state.ctx, "fresh", &[]).await;
    for s in [&viewer, &operator] {
        let html = app.get("/", s).await.text().await.unwrap();
        assert_eq!(texts(&html, "article.fleet-card h3"), ["fresh"], "{html}");
    }
}
