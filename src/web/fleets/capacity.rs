//! The fleet page's headroom sections (now, the chart panel with its range buttons, recent
//! samples, time to restore) and the pieces the dashboard cards share with it (status badge,
//! N+k, relative times). Pure views: the handler passes `now` so output depends only on input.

use maud::{html, Markup};

use super::chart::headroom_chart;
use super::window::{input_value, ChartWindow};
use crate::domain::capacity::{
    n_plus_words, Annotation, DeficitTimeline, FleetNow, Health, Range, SampleRow, Series, Source,
};
use crate::domain::{FieldErrors, UnixMillis};
use crate::web::components::time;
use crate::web::paths;

/// The chart partial's path for a window (the range buttons' `hx-get`).
pub fn chart_path(fleet: &str, window: ChartWindow) -> String {
    format!(
        "{}?{}",
        paths::fill(paths::FLEET_CHART, &[("name", fleet)]),
        window.query()
    )
}

/// The live chart's path for a window (what `#chart-live` polls): the same window, so a
/// window ending now moves forward and a fixed one stays put.
pub fn live_path(fleet: &str, window: ChartWindow) -> String {
    format!(
        "{}?{}",
        paths::fill(paths::FLEET_CHART_LIVE, &[("name", fleet)]),
        window.query()
    )
}

/// The fleet page's own URL for a window (the buttons' `href`, so they work without JS, and
/// the address a chart swap pushes, so a link shows the same window).
pub fn page_path(fleet: &str, window: ChartWindow) -> String {
    format!(
        "{}?{}",
        paths::fill(paths::FLEET, &[("name", fleet)]),
        window.query()
    )
}

/// A fleet's status in words: its name, or while a change is being confirmed, which one and
/// how far along (`deficit pending, 1 of 3 samples`).
pub fn status_words(f: &FleetNow) -> String {
    match f.pending {
        Some(p) if f.status == Health::Pending => p.words(),
        _ => f.status.as_str().to_owned(),
    }
}

/// A fleet's status as a badge whose text says it (colour is a second cue only).
pub fn status_badge(f: &FleetNow) -> Markup {
    let class = match f.status {
        Health::Healthy => "good",
        Health::Deficit => "bad",
        Health::Unknown | Health::Stale | Health::Pending => "warn",
    };
    html! { span class={ "badge status " (class) } data-status=(f.status.as_str()) { (status_words(f)) } }
}

/// yubaba's N+k beside the requirement (`N+1 of N+1 required`: `N+1` is one warm spare), or
/// `—` without numbers.
pub fn n_plus_k(spare: Option<u32>, required: Option<u32>) -> String {
    match (spare, required) {
        (Some(s), Some(r)) => n_plus_words(s, r),
        _ => "—".to_owned(),
    }
}

/// A duration for people: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub fn span_words(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => {
            let (m, r) = (s / 60, s % 60);
            if r == 0 || m >= 10 {
                format!("{m} min")
            } else {
                format!("{m} min {r} s")
            }
        }
        3600..=86_399 => {
            let (h, m) = (s / 3600, s % 3600 / 60);
            if m == 0 {
                format!("{h} h")
            } else {
                format!("{h} h {m} min")
            }
        }
        _ => {
            let (d, h) = (s / 86_400, s % 86_400 / 3600);
            if h == 0 {
                format!("{d} d")
            } else {
                format!("{d} d {h} h")
            }
        }
    }
}

/// `12 s ago` with the absolute time beside it in a `<time>`.
pub fn when(now: UnixMillis, at: Option<UnixMillis>) -> Markup {
    match at {
        // `data-since`: `app.js` counts the age up between refreshes.
        Some(at) if at <= now => {
            html! { span.age data-since=(at) data-rendered=(now) { (span_words(now - at)) " ago" } " " span.muted { "(" (time(at)) ")" } }
        }
        Some(at) => html! { (time(at)) },
        None => html! { span.muted { "never" } },
    }
}

/// A fleet's open requests, linked to the approvals inbox where they are decided; none links
/// to the fleet's history instead.
pub fn requests_link(fleet: &str, open: u32) -> Markup {
    if open == 0 {
        let href = format!(
            "{}?fleet={}",
            paths::HISTORY,
            crate::http::guard::urlencode(fleet)
        );
        return html! { a href=(href) { "no open requests" } };
    }
    html! {
        a href=(paths::APPROVALS) { (open) " open request" @if open != 1 { "s" } }
    }
}

/// The "now" section: status, N+k, leader, members, last scrape and error, time in deficit,
/// open requests.
/// It polls itself every scrape interval (paused while the tab is hidden; see `app.js`).
pub fn now_section(now: UnixMillis, f: &FleetNow) -> Markup {
    let poll = paths::fill(paths::FLEET_NOW, &[("name", &f.fleet)]);
    let every = f.scrape_interval_secs.clamp(5, 60);
    html! {
        section.card #now aria-labelledby="now-heading" data-live
            hx-get=(poll) hx-trigger={ "every " (every) "s, live-refresh" } hx-swap="outerHTML" {
            h2 #now-heading { "Now" }
            dl.spec.now {
                dt { "status" } dd { (status_badge(f)) }
                dt { "headroom" } dd {
                    strong.nk { (n_plus_k(f.spare, f.required)) }
                    @if let (Some(s), Some(r)) = (f.spare, f.required) {
                        " by yubaba's count " span.muted { "(" (s) " spare, " (r) " required, " (f.source.as_str()) ")" }
                    }
                }
                dt { "absorption" } dd { (absorption_words(f)) }
                dt { "leader" } dd {
                    @match (&f.leader, f.leader_id) {
                        (Some(url), Some(id)) => { code { (url) } " (id " (id) ")" }
                        (Some(url), None) => code { (url) },
                        _ => span.muted { "unknown" },
                    }
                }
                dt { "members" } dd { (members_table(f)) }
                dt { "last scrape" } dd {
                    (when(now, f.last_scrape_at))
                    @if let Some(ms) = f.latency_ms { " in " (ms) " ms" }
                    " · every " (f.scrape_interval_secs) " s"
                }
                @if let Some(e) = &f.last_error {
                    dt { "last error" } dd.error-text { (e) }
                }
                dt { "last good sample" } dd { (when(now, f.last_ok_at)) }
                dt { "in deficit" } dd {
                    @match f.deficit_since {
                        Some(since) => { strong { "for " (span_words(now - since)) } " " span.muted { "(since " (time(since)) ")" } }
                        None => span.muted { "no" },
                    }
                }
                dt { "requests" } dd { (requests_link(&f.fleet, f.open_requests)) }
            }
        }
    }
}

/// Absorption's answer beside yubaba's count: whether the fleet survives losing its worst
/// node (or region), what is short, and how many restore machines would cover it.
pub fn absorption_words(f: &FleetNow) -> Markup {
    html! {
        @match &f.absorption {
            Some(a) => span.absorption data-absorbed=(a.absorbed()) { (a.words()) },
            None => span.muted { "not judged in the newest sample (no member's load read)" },
        }
    }
}

/// The members with each one's role (spare, carrying N tenants, learner), in a focusable
/// scroll pane; in native mode, why no member is named spare.
fn members_table(f: &FleetNow) -> Markup {
    let unread = f.members.iter().all(|m| m.tenants.is_none());
    html! {
        @if f.members.is_empty() { span.muted { "unknown" } }
        @else {
            div.scroll-pane tabindex="0" role="region" aria-label="Members and their roles" {
                table.data.members {
                    thead { tr { th scope="col" { "Address" } th scope="col" { "Id" } th scope="col" { "Raft" } th scope="col" { "Role" } } }
                    tbody {
                        @for m in &f.members {
                            tr data-role=(m.role().as_str()) {
                                td { code { (m.addr) } }
                                td { (m.id) }
                                td { @if m.voter { "voter" } @else { "learner" } }
                                td.role { (m.role_words()) }
                            }
                        }
                    }
                }
            }
            @if unread && f.source == Source::Native {
                p.muted.members-note { "yubaba counts this fleet's spares itself and does not say which members they are; headroom could not read the load of the members marked “load not read”, so it cannot name them either." }
            }
        }
    }
}

/// A custom window that was refused: the values as given (shown again to be fixed) and the
/// rule each broke.
pub struct Refused<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub errors: &'a FieldErrors,
}

/// What the chart panel shows.
pub struct ChartPanel<'a> {
    pub fleet: &'a str,
    /// The window drawn (the default range when a custom one was refused).
    pub window: ChartWindow,
    pub refused: Option<Refused<'a>>,
    pub series: &'a Series,
    pub annotations: &'a [Annotation],
    /// When the chart was read (its summary says so).
    pub updated: UnixMillis,
    /// The fleet's scrape interval, in seconds: new points come no faster.
    pub scrape_interval_secs: u32,
}

/// How often a live chart asks for itself again, in seconds: every scrape interval (5 s to
/// 1 min, like the "now" section: the last point, partial, changes with every sample), and
/// once a minute at most for a chart whose points are 10 minutes or wider (7 d and longer),
/// which a sample barely moves.
pub fn chart_poll_secs(scrape_interval_secs: u32, step_ms: i64) -> u32 {
    let every = scrape_interval_secs.clamp(5, 60);
    if step_ms >= 10 * 60_000 {
        every.max(60)
    } else {
        every
    }
}

/// The chart figure, refreshing itself: `GET /fleets/{name}/chart/live` answers this same
/// element for the same window (swapped in place, paused while the tab is hidden and while
/// focus is inside it; see `app.js`). Range buttons and the window form stay outside it, so a
/// refresh never takes focus from them or a half-typed time.
pub fn chart_live(p: &ChartPanel<'_>) -> Markup {
    let every = chart_poll_secs(p.scrape_interval_secs, p.series.step);
    html! {
        div #chart-live data-live hx-get=(live_path(p.fleet, p.window))
            hx-trigger={ "every " (every) "s, live-refresh" } hx-swap="outerHTML" {
            (headroom_chart(p.series, p.window.range(), p.annotations, p.updated))
        }
    }
}

/// The chart panel: range buttons, the from/to form, and the chart. This is what `GET
/// /fleets/{name}/chart` answers and what `#chart` holds; the buttons and the form live inside
/// it so their state swaps with the chart.
pub fn chart_panel(p: &ChartPanel<'_>) -> Markup {
    let fleet = p.fleet;
    let range = p.window.range();
    html! {
        div #chart.chart-panel data-range=(range.map_or("custom", Range::as_str)) {
            nav.range-buttons aria-label="Chart range" {
                @for r in Range::ALL {
                    @let w = ChartWindow::Last(r);
                    a.button href=(page_path(fleet, w))
                        hx-get=(chart_path(fleet, w)) hx-target="#chart" hx-swap="outerHTML"
                        hx-push-url=(page_path(fleet, w))
                        aria-current=[(Some(r) == range).then_some("true")]
                        id={ "range-" (r.as_str()) } {
                        (range_button_text(r))
                    }
                }
            }
            (window_form(p))
            (chart_live(p))
        }
    }
}

/// The custom window form: labelled UTC inputs holding the window shown (or the refused
/// values with their rules), sent by GET to the page, or by htmx to the chart partial, whose
/// answer pushes the page's address.
fn window_form(p: &ChartPanel<'_>) -> Markup {
    let page = paths::fill(paths::FLEET, &[("name", p.fleet)]);
    let chart = paths::fill(paths::FLEET_CHART, &[("name", p.fleet)]);
    let (from, to) = match &p.refused {
        Some(r) => (r.from.to_owned(), r.to.to_owned()),
        // A window ending now leaves `to` empty, so sending the form again keeps it live.
        None if matches!(p.window, ChartWindow::Since { .. }) => {
            (input_value(p.series.from), String::new())
        }
        None => {
            let (from, to) = (p.series.from, p.series.to);
            (input_value(from), input_value(to))
        }
    };
    let error = |field: &str| p.refused.as_ref().and_then(|r| r.errors.for_field(field));
    html! {
        @if let Some(r) = &p.refused {
            div.notice.error-summary role="alert" {
                p { "The custom window was not shown; showing the last hour." }
                ul { @for e in &r.errors.0 { li { strong { (e.field) } ": " (e.message) } } }
            }
        }
        form.chart-window method="get" action=(page) hx-get=(chart) hx-target="#chart"
            hx-swap="outerHTML" hx-push-url="true" aria-label="Custom chart window" {
            @for (field, label, value) in [("from", "From (UTC)", &from), ("to", "To (UTC; empty: now)", &to)] {
                @let id = format!("chart-{field}");
                @let err = error(field);
                div.field.invalid[err.is_some()] {
                    label for=(id) { (label) }
                    input id=(id) name=(field) type="datetime-local" step="1" value=(value)
                        aria-invalid=[err.map(|_| "true")]
                        aria-describedby=[err.map(|_| format!("{id}-error"))];
                    @if let Some(e) = err { p.field-error id={ (id) "-error" } { (field) ": " (e) } }
                }
            }
            div.field.actions { button type="submit" { "Show window" } }
        }
    }
}

fn range_button_text(r: Range) -> &'static str {
    match r {
        Range::M15 => "15 min",
        Range::H1 => "1 h",
        Range::H6 => "6 h",
        Range::H24 => "24 h",
        Range::D7 => "7 d",
        Range::D30 => "30 d",
        Range::D90 => "90 d",
    }
}

/// The notice shown when `?range=` named no range: the page falls back to 1 h.
pub fn range_notice(given: &str) -> Markup {
    html! {
        p.notice role="status" {
            "The range " code { "range=" (given) } " is not one of "
            @for (i, r) in Range::ALL.iter().enumerate() {
                @if i > 0 { ", " } code { (r.as_str()) }
            }
            "; showing the last hour."
        }
    }
}

/// What a card of table rows says around its rows.
struct TableCard {
    /// The section's id; its heading's is `{id}-heading`.
    id: &'static str,
    heading: &'static str,
    /// Said instead of the table when there are no rows.
    empty: &'static str,
    /// The scroll pane's accessible name.
    pane_label: &'static str,
    columns: &'static [&'static str],
}

/// A card with a heading and its rows in a focusable scroll pane, or the card's `empty` text
/// when `rows` is `None`.
fn table_card(card: &TableCard, rows: Option<Markup>) -> Markup {
    let heading_id = format!("{}-heading", card.id);
    html! {
        section.card id=(card.id) aria-labelledby=(heading_id) {
            h2 id=(heading_id) { (card.heading) }
            @match rows {
                None => p.muted { (card.empty) },
                Some(rows) => div.scroll-pane tabindex="0" role="region" aria-label=(card.pane_label) {
                    table.data {
                        thead { tr { @for c in card.columns { th scope="col" { (c) } } } }
                        tbody { (rows) }
                    }
                },
            }
        }
    }
}

const SAMPLES_CARD: TableCard = TableCard {
    id: "samples",
    heading: "Recent samples",
    empty: "No samples yet: the scraper has not reached this fleet.",
    pane_label: "Recent samples, newest first",
    columns: &[
        "Time",
        "Result",
        "Spare",
        "Required",
        "Voters / learners",
        "Leader / term",
        "Latency",
    ],
};

/// The recent samples, newest first, in a focusable scroll pane.
pub fn samples_section(rows: &[SampleRow]) -> Markup {
    let body = (!rows.is_empty()).then(|| {
        html! {
            @for s in rows {
                tr {
                    td { (time(s.at)) }
                    td {
                        @match &s.error {
                            Some(e) => span.error-text { "failed: " (e) },
                            None => { "ok (" (s.source.as_str()) ")" },
                        }
                    }
                    td { (opt(s.spare)) }
                    td { (opt(s.required)) }
                    td { (opt(s.voters)) " / " (opt(s.learners)) }
                    td { (opt(s.leader_id)) " / " (opt(s.term)) }
                    td { (s.latency_ms) " ms" }
                }
            }
        }
    });
    table_card(&SAMPLES_CARD, body)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

/// One milestone cell: the time and how long it took since the previous milestone reached.
fn milestone(at: Option<UnixMillis>, prev: Option<UnixMillis>) -> Markup {
    html! {
        @match at {
            Some(at) => {
                (time(at))
                @if let Some(p) = prev { br; span.muted { "+" (span_words(at - p)) } }
            }
            None => span.muted { "—" },
        }
    }
}

const DEFICITS_CARD: TableCard = TableCard {
    id: "deficits",
    heading: "Deficits and time to restore",
    empty: "No deficit recorded.",
    pane_label: "Deficits, newest first",
    columns: &[
        "Detected",
        "Spare / required",
        "Proposed",
        "Approved",
        "Provisioned",
        "Restored",
        "Time to restore",
        "Request",
    ],
};

/// Each deficit and its restore: detected → proposed → approved → provisioned → restored,
/// with the time each step took and the total, linking the proposal.
pub fn deficits_section(deficits: &[DeficitTimeline]) -> Markup {
    let body = (!deficits.is_empty()).then(|| {
        html! {
            @for d in deficits {
                tr {
                    td { (time(d.detected_at)) br; span.muted { "below since " (time(d.started_at)) } }
                    td { (d.spare) " / " (d.required) }
                    td { (milestone(d.proposed_at, Some(d.detected_at))) }
                    td { (milestone(d.approved_at, d.proposed_at)) }
                    td { (milestone(d.provisioned_at, d.approved_at.or(d.proposed_at))) }
                    td { (milestone(d.restored_at, d.provisioned_at.or(d.approved_at).or(d.proposed_at).or(Some(d.detected_at)))) }
                    td {
                        @match d.restored_at {
                            Some(r) => strong { (span_words(r - d.detected_at)) },
                            None => span.muted { "open" },
                        }
                    }
                    td {
                        @if let Some(id) = d.provision_id {
                            a href=(paths::fill(paths::PROVISION, &[("id", &id.to_string())])) { "#" (id) }
                            @if let Some(s) = &d.provision_state { " " span.badge { (s) } }
                        }
                        @if !d.note.is_empty() { div.muted { (d.note) } }
                    }
                }
            }
        }
    });
    table_card(&DEFICITS_CARD, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_plus_k_is_the_spare_count_beside_the_requirement() {
        assert_eq!(n_plus_k(Some(3), Some(1)), "N+3 of N+1 required");
        assert_eq!(n_plus_k(Some(1), Some(1)), "N+1 of N+1 required");
        assert_eq!(n_plus_k(Some(0), Some(2)), "N+0 of N+2 required");
        assert_eq!(n_plus_k(None, Some(2)), "—");
    }

    #[test]
    fn a_live_chart_polls_every_scrape_and_wide_charts_once_a_minute() {
        assert_eq!(chart_poll_secs(15, 30_000), 15);
        assert_eq!(chart_poll_secs(1, 10_000), 5);
        assert_eq!(chart_poll_secs(3600, 10_000), 60);
        assert_eq!(chart_poll_secs(15, 6 * 3_600_000), 60);
    }

    #[test]
    fn spans_read_in_the_largest_units() {
        assert_eq!(span_words(45_000), "45 s");
        assert_eq!(span_words(150_000), "2 min 30 s");
        assert_eq!(span_words(3_900_000), "1 h 5 min");
        assert_eq!(span_words(2 * 86_400_000 + 4 * 3_600_000), "2 d 4 h");
        assert_eq!(span_words(-5), "0 s");
    }

    #[test]
    fn the_range_notice_names_the_parameter_and_every_allowed_value() {
        let html = range_notice("<b>2h").into_string();
        assert!(html.contains("range=&lt;b&gt;2h"), "{html}");
        for r in Range::ALL {
            assert!(
                html.contains(&format!("<code>{}</code>", r.as_str())),
                "{html}"
            );
        }
    }
}
