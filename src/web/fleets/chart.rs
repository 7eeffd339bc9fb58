//! The headroom chart: a pure view from a [`Series`] and its provision [`Annotation`]s to an
//! inline SVG figure with a text alternative. No JavaScript, no I/O, deterministic output (the
//! same input renders the same bytes), and its size is bounded by [`CHART_POINTS`] whatever the
//! series holds: a series with more points is re-bucketed (`domain::rebucket`) before drawing.
//!
//! What it draws: spare as a step line (each bucket's minimum: a dip is what matters), required
//! as a dashed threshold, deficit buckets (spare < required) hatched, gaps (failed scrapes and
//! buckets without any sample) as breaks in both lines and a grey band, provision events as
//! vertical markers. Every point has one hover `<title>`; a `<details>` table lists the points
//! and the events for screen readers and for copying.

use maud::{html, Markup};

use crate::domain::capacity::{Annotation, Point, Range, Resolution, Series, CHART_POINTS};
use crate::domain::rebucket::rebucket;
use crate::domain::UnixMillis;
use crate::web::paths;

/// Drawing width in SVG user units (the SVG scales to its container).
const W: f64 = 720.0;
/// Drawing height.
const H: f64 = 240.0;
/// Plot area: left edge (room for y labels).
const PL: f64 = 44.0;
/// Plot area: right edge.
const PR: f64 = 712.0;
/// Plot area: top edge.
const PT: f64 = 12.0;
/// Plot area: bottom edge (room for time labels below).
const PB: f64 = 212.0;
/// Most provision markers drawn; the newest are kept (a chart with more would be unreadable,
/// and the markup must stay bounded).
pub const MAX_ANNOTATIONS: usize = 60;
/// Most x-axis labels.
const MAX_X_TICKS: i64 = 8;
/// Most y-axis ticks (besides zero).
const MAX_Y_TICKS: u32 = 5;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// The chart of `series` with `annotations` (provision events; those outside the range are
/// left out). Pure: no clock, no I/O.
pub fn headroom_chart(series: &Series, annotations: &[Annotation]) -> Markup {
    let model = Model::new(series, annotations);
    let ids = Ids::new(&series.fleet);
    let range = range_name(series.to - series.from, series.step);
    html! {
        figure.headroom-chart data-range=(range) data-fleet=(series.fleet) {
            figcaption id=(ids.caption) {
                strong { "Headroom of " (series.fleet) ", " (range_words(series.to - series.from, series.step)) }
                " "
                span.muted {
                    "(" (utc(series.from)) " – " (utc(series.to)) " UTC, one point per "
                    (duration(model.step)) ", " (resolution_words(series.resolution)) ")"
                }
            }
            p.chart-summary id=(ids.summary) { (model.summary()) }
            @if model.points.is_empty() {
                p.chart-empty { "No samples in this range." }
            } @else {
                (svg(&model, &ids))
                (legend())
                (data_table(&model))
            }
        }
    }
}

/// Element ids derived from the fleet name (an RFC 1123 label, so safe in an id), so two
/// charts of different fleets on one page do not collide.
struct Ids {
    caption: String,
    summary: String,
}

impl Ids {
    fn new(fleet: &str) -> Self {
        let slug: String = fleet
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        Ids {
            caption: format!("chart-{slug}-caption"),
            summary: format!("chart-{slug}-summary"),
        }
    }
}

/// A stretch without numbers: `[from, to)`, and whether it had failed scrapes (otherwise no
/// sample was taken at all).
#[derive(Debug, Clone, PartialEq)]
struct Gap {
    from: UnixMillis,
    to: UnixMillis,
    failed: bool,
}

/// What is drawn, computed once: the points (sorted, inside the range, at most
/// `CHART_POINTS`), the step, the gaps, the annotations kept, and the y scale.
struct Model {
    from: UnixMillis,
    to: UnixMillis,
    step: i64,
    points: Vec<Point>,
    gaps: Vec<Gap>,
    annotations: Vec<Annotation>,
    y_top: u32,
    y_tick: u32,
}

impl Model {
    fn new(series: &Series, annotations: &[Annotation]) -> Self {
        let (from, to) = (series.from, series.to.max(series.from + 1));
        let mut step = series.step.max(1);
        let mut points: Vec<Point> = series
            .points
            .iter()
            .filter(|p| p.t >= from && p.t < to)
            .cloned()
            .collect();
        points.sort_by_key(|p| p.t);
        if points.len() > CHART_POINTS as usize {
            (points, step) = rebucket(&points, from, to, step, CHART_POINTS);
        }
        let gaps = gaps(&points, step);
        let mut annotations: Vec<Annotation> = annotations
            .iter()
            .filter(|a| a.at >= from && a.at < to)
            .cloned()
            .collect();
        annotations.sort_by_key(|a| (a.at, a.provision_id));
        if annotations.len() > MAX_ANNOTATIONS {
            annotations.drain(..annotations.len() - MAX_ANNOTATIONS);
        }
        let highest = points
            .iter()
            .flat_map(|p| [p.spare_max.or(p.spare), p.required])
            .flatten()
            .max()
            .unwrap_or(0);
        // One unit above the highest value so neither line sits on the frame; integer ticks.
        // Worked in u64: a fleet may report anything up to u32::MAX, and the top of the axis
        // rounds up past it.
        let wanted = u64::from(highest) + 1;
        let y_tick = wanted.div_ceil(u64::from(MAX_Y_TICKS)).max(1);
        let y_top = wanted.div_ceil(y_tick) * y_tick;
        let (y_top, y_tick) = (
            u32::try_from(y_top).unwrap_or(u32::MAX),
            u32::try_from(y_tick).unwrap_or(u32::MAX),
        );
        Model {
            from,
            to,
            step,
            points,
            gaps,
            annotations,
            y_top,
            y_tick,
        }
    }

    fn x(&self, t: UnixMillis) -> f64 {
        let t = t.clamp(self.from, self.to);
        PL + (t - self.from) as f64 / (self.to - self.from) as f64 * (PR - PL)
    }

    fn y(&self, v: u32) -> f64 {
        PB - f64::from(v.min(self.y_top)) / f64::from(self.y_top) * (PB - PT)
    }

    /// Points with numbers: ok and carrying spare and required.
    fn numbers(p: &Point) -> Option<(u32, u32)> {
        match (p.ok, p.spare, p.required) {
            (true, Some(s), Some(r)) => Some((s, r)),
            _ => None,
        }
    }

    /// The one-sentence text alternative.
    fn summary(&self) -> String {
        let nums: Vec<(u32, u32)> = self.points.iter().filter_map(Self::numbers).collect();
        if nums.is_empty() {
            return if self.points.is_empty() {
                "No samples in this range.".to_owned()
            } else {
                format!(
                    "No successful scrape in this range; {} gap{}.",
                    self.gaps.len(),
                    plural(self.gaps.len())
                )
            };
        }
        let spare_min = nums.iter().map(|n| n.0).min().unwrap_or(0);
        let spare_max = self
            .points
            .iter()
            .filter(|p| Self::numbers(p).is_some())
            .filter_map(|p| p.spare_max.or(p.spare))
            .max()
            .unwrap_or(spare_min);
        let req_min = nums.iter().map(|n| n.1).min().unwrap_or(0);
        let req_max = nums.iter().map(|n| n.1).max().unwrap_or(0);
        let below = nums.iter().filter(|(s, r)| s < r).count() as i64 * self.step;
        let required = if req_min == req_max {
            req_max.to_string()
        } else {
            format!("{req_min}–{req_max}")
        };
        // Whole minutes, rounded down, so a chart never claims more time short than it saw.
        let below = match below / MINUTE {
            0 if below > 0 => "less than 1 minute".to_owned(),
            m => format!("{m} minute{}", plural(m as usize)),
        };
        format!(
            "Spare min {spare_min}, max {spare_max}, required {required}, {below} below required, {} gap{}{}.",
            self.gaps.len(),
            plural(self.gaps.len()),
            match self.annotations.len() {
                0 => String::new(),
                n => format!(", {n} provision event{}", plural(n)),
            }
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The gaps between and at failed points: a bucket with `ok = false`, or a jump in `t` larger
/// than the step (buckets without any sample). Adjacent stretches merge into one gap. Time
/// before the first point and after the last is not a gap (the fleet may be new, and the
/// current bucket may not be scraped yet).
fn gaps(points: &[Point], step: i64) -> Vec<Gap> {
    let mut out: Vec<Gap> = Vec::new();
    let mut push = |g: Gap| match out.last_mut() {
        Some(last) if last.to >= g.from => {
            last.to = last.to.max(g.to);
            last.failed |= g.failed;
        }
        _ => out.push(g),
    };
    for (i, p) in points.iter().enumerate() {
        if i > 0 {
            let prev_end = points[i - 1].t + step;
            if p.t > prev_end {
                push(Gap {
                    from: prev_end,
                    to: p.t,
                    failed: false,
                });
            }
        }
        if Model::numbers(p).is_none() {
            push(Gap {
                from: p.t,
                to: p.t + step,
                failed: true,
            });
        }
    }
    out
}

/// A number for an SVG attribute: one decimal, fixed, so output is deterministic.
fn n(v: f64) -> String {
    format!("{v:.1}")
}

/// Step-line paths over runs of consecutive points with numbers; a gap ends a run (the line
/// breaks). `value` picks spare or required.
fn step_path(m: &Model, value: impl Fn(u32, u32) -> u32) -> String {
    let mut d = String::new();
    let mut cur: Option<(f64, UnixMillis)> = None; // (y, end of the last bucket drawn)
    for p in &m.points {
        let Some((s, r)) = Model::numbers(p) else {
            if let Some((_, end)) = cur.take() {
                d.push_str(&format!("H{}", n(m.x(end))));
            }
            continue;
        };
        let y = m.y(value(s, r));
        match cur {
            Some((cy, end)) if p.t <= end => {
                if cy != y {
                    d.push_str(&format!("H{}V{}", n(m.x(p.t)), n(y)));
                }
            }
            Some((_, end)) => {
                d.push_str(&format!("H{}", n(m.x(end))));
                d.push_str(&format!("M{} {}", n(m.x(p.t)), n(y)));
            }
            None => d.push_str(&format!("M{} {}", n(m.x(p.t)), n(y))),
        }
        cur = Some((y, p.t + m.step));
    }
    if let Some((_, end)) = cur {
        d.push_str(&format!("H{}", n(m.x(end))));
    }
    d
}

/// One path of rectangles covering every deficit bucket between spare and required
/// (adjacent buckets of equal values merge).
fn deficit_path(m: &Model) -> String {
    let mut d = String::new();
    let mut open: Option<(UnixMillis, UnixMillis, u32, u32)> = None;
    let flush = |o: Option<(UnixMillis, UnixMillis, u32, u32)>, d: &mut String| {
        if let Some((a, b, s, r)) = o {
            let (x0, x1, y0, y1) = (m.x(a), m.x(b), m.y(r), m.y(s));
            d.push_str(&format!(
                "M{} {}H{}V{}H{}Z",
                n(x0),
                n(y0),
                n(x1),
                n(y1),
                n(x0)
            ));
        }
    };
    for p in &m.points {
        match Model::numbers(p) {
            Some((s, r)) if s < r => match open {
                Some((a, b, os, or)) if os == s && or == r && p.t <= b => {
                    open = Some((a, p.t + m.step, s, r));
                }
                o => {
                    flush(o, &mut d);
                    open = Some((p.t, p.t + m.step, s, r));
                }
            },
            _ => flush(open.take(), &mut d),
        }
    }
    flush(open, &mut d);
    d
}

fn point_title(p: &Point, step: i64) -> String {
    let when = utc(p.t);
    match Model::numbers(p) {
        Some((s, r)) => {
            let max = p
                .spare_max
                .filter(|m| *m != s)
                .map_or(String::new(), |m| format!(" (max {m})"));
            let state = if s < r { ", below required" } else { "" };
            format!(
                "{when} UTC (+{}): spare {s}{max}, required {r}{state}, {}",
                duration(step),
                p.source.as_str()
            )
        }
        None => format!("{when} UTC (+{}): no data (scrape failed)", duration(step)),
    }
}

fn gap_title(g: &Gap) -> String {
    format!(
        "Gap {} – {} UTC: {}",
        utc(g.from),
        utc(g.to),
        if g.failed {
            "scrapes failed"
        } else {
            "no samples"
        }
    )
}

fn annotation_title(a: &Annotation) -> String {
    format!("#{} {} at {} UTC", a.provision_id, a.label, utc(a.at))
}

// Every SVG element is written with an explicit end tag (`{}` in maud, never `;`): in HTML,
// `<line>` inside `<svg>` is not a void element, so an unclosed one swallows what follows.
fn svg(m: &Model, ids: &Ids) -> Markup {
    let labelledby = format!("{} {}", ids.caption, ids.summary);
    let spare = step_path(m, |s, _| s);
    let required = step_path(m, |_, r| r);
    let deficit = deficit_path(m);
    let pattern = format!("{}-hatch", ids.summary);
    html! {
        svg.chart viewBox={ "0 0 " (W) " " (H) } width="100%" preserveAspectRatio="xMidYMid meet"
            role="img" aria-labelledby=(labelledby) xmlns="http://www.w3.org/2000/svg" {
            defs {
                pattern id=(pattern) width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)" {
                    line.hatch x1="0" y1="0" x2="0" y2="6" stroke-width="3" {}
                }
            }
            (y_axis(m))
            (x_axis(m))
            g.gaps {
                @for g in &m.gaps {
                    rect.gap x=(n(m.x(g.from))) y=(n(PT)) width=(n((m.x(g.to) - m.x(g.from)).max(1.0))) height=(n(PB - PT)) {
                        title { (gap_title(g)) }
                    }
                }
            }
            @if !deficit.is_empty() {
                path.deficit d=(deficit) fill={ "url(#" (pattern) ")" } { title { "Below required" } }
            }
            path.required d=(required) fill="none" stroke-dasharray="6 4" {}
            path.spare d=(spare) fill="none" {}
            g.annotations {
                @for a in &m.annotations {
                    @let x = n(m.x(a.at));
                    g.annotation {
                        title { (annotation_title(a)) }
                        line x1=(x) x2=(x) y1=(n(PT)) y2=(n(PB)) {}
                        path d={ "M" (x) " " (n(PT)) "l-5 -8h10z" } {}
                    }
                }
            }
            g.hits {
                @for p in &m.points {
                    rect.hit x=(n(m.x(p.t))) y=(n(PT)) width=(n((m.x(p.t + m.step) - m.x(p.t)).max(0.5))) height=(n(PB - PT)) {
                        title { (point_title(p, m.step)) }
                    }
                }
            }
        }
    }
}

fn y_axis(m: &Model) -> Markup {
    let ticks: Vec<u32> = (0..=m.y_top).step_by(m.y_tick as usize).collect();
    html! {
        g.axis.y-axis aria-hidden="true" {
            @for v in &ticks {
                @let y = n(m.y(*v));
                line.grid x1=(n(PL)) x2=(n(PR)) y1=(y) y2=(y) {}
                text x=(n(PL - 6.0)) y=(y) text-anchor="end" dominant-baseline="middle" { (v) }
            }
        }
    }
}

/// Tick spacing for a range: the shortest of these giving at most `MAX_X_TICKS` labels.
fn x_tick(width: i64) -> i64 {
    const STEPS: [i64; 14] = [
        5 * MINUTE,
        10 * MINUTE,
        15 * MINUTE,
        30 * MINUTE,
        HOUR,
        2 * HOUR,
        3 * HOUR,
        6 * HOUR,
        12 * HOUR,
        DAY,
        2 * DAY,
        7 * DAY,
        14 * DAY,
        28 * DAY,
    ];
    STEPS
        .into_iter()
        .find(|s| width / s <= MAX_X_TICKS)
        .unwrap_or(28 * DAY)
}

fn x_axis(m: &Model) -> Markup {
    let width = m.to - m.from;
    let tick = x_tick(width);
    let first = m.from.div_euclid(tick) * tick + if m.from % tick == 0 { 0 } else { tick };
    let ticks: Vec<i64> = (0..)
        .map(|i| first + i * tick)
        .take_while(|t| *t < m.to)
        .collect();
    html! {
        g.axis.x-axis aria-hidden="true" {
            line.frame x1=(n(PL)) x2=(n(PR)) y1=(n(PB)) y2=(n(PB)) {}
            @for t in &ticks {
                @let x = n(m.x(*t));
                line.grid x1=(x) x2=(x) y1=(n(PT)) y2=(n(PB)) {}
                text x=(x) y=(n(PB + 16.0)) text-anchor="middle" { (time_label(*t, width, tick)) }
            }
            text x=(n(PL - 6.0)) y=(n(PB + 16.0)) text-anchor="end" { "UTC" }
        }
    }
}

/// A tick label suited to the range: clock time within a day, date and time within a week,
/// the date beyond.
fn time_label(t: UnixMillis, width: i64, tick: i64) -> String {
    let Ok(dt) = time::OffsetDateTime::from_unix_timestamp(t.div_euclid(1000)) else {
        return t.to_string();
    };
    let fmt: &[time::format_description::BorrowedFormatItem<'_>] = if width <= DAY {
        time::macros::format_description!("[hour]:[minute]")
    } else if tick < DAY {
        time::macros::format_description!("[month repr:short] [day] [hour]:[minute]")
    } else {
        time::macros::format_description!("[month repr:short] [day]")
    };
    dt.format(fmt).unwrap_or_else(|_| t.to_string())
}

fn legend() -> Markup {
    html! {
        ul.chart-legend {
            li { span.swatch.spare aria-hidden="true" {} "spare (solid line: fewest in each interval)" }
            li { span.swatch.required aria-hidden="true" {} "required (dashed line)" }
            li { span.swatch.deficit aria-hidden="true" {} "below required (hatched)" }
            li { span.swatch.gap aria-hidden="true" {} "gap: no data (grey band, line broken)" }
            li { span.swatch.annotation aria-hidden="true" {} "provision event (marker)" }
        }
    }
}

fn data_table(m: &Model) -> Markup {
    html! {
        details.chart-data {
            summary { "Data table (" (m.points.len()) " point" (plural(m.points.len())) ")" }
            div.scroll-pane tabindex="0" role="region" aria-label="Chart data points" {
                table.data {
                    thead { tr { th scope="col" { "Interval start (UTC)" } th scope="col" { "Spare (min)" } th scope="col" { "Spare (max)" } th scope="col" { "Required" } th scope="col" { "State" } } }
                    tbody {
                        @for p in &m.points {
                            tr {
                                td { (utc(p.t)) }
                                @match Model::numbers(p) {
                                    Some((s, r)) => {
                                        td { (s) } td { (p.spare_max.unwrap_or(s)) } td { (r) }
                                        td { @if s < r { "below required" } @else { "ok" } }
                                    }
                                    None => { td { "—" } td { "—" } td { "—" } td { "gap (scrape failed)" } }
                                }
                            }
                        }
                    }
                }
            }
            @if !m.annotations.is_empty() {
                h3.chart-events { "Provision events" }
                ul.chart-events {
                    @for a in &m.annotations {
                        li { a href=(paths::fill(paths::PROVISION, &[("id", &a.provision_id.to_string())])) { "#" (a.provision_id) } " " (a.label) " at " (utc(a.at)) " UTC" }
                    }
                }
            }
        }
    }
}

/// `2026-12-03 09:30:00` (UTC, shown with a "UTC" suffix by the caller).
fn utc(at: UnixMillis) -> String {
    crate::domain::clock::format_utc(at)
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_owned()
}

/// The `Range` a series of `width` covers: the series may start up to one step earlier than
/// the range (its first bucket is aligned to the step), so a step of slack is allowed.
fn range_of(width: i64, step: i64) -> Option<Range> {
    Range::ALL
        .into_iter()
        .find(|r| (width - r.millis()).abs() <= step.max(0))
}

/// The `Range` name for a width, or `custom`.
fn range_name(width: i64, step: i64) -> &'static str {
    range_of(width, step).map_or("custom", Range::as_str)
}

fn range_words(width: i64, step: i64) -> String {
    match range_of(width, step) {
        Some(Range::H1) => "last hour".to_owned(),
        Some(Range::H6) => "last 6 hours".to_owned(),
        Some(Range::H24) => "last 24 hours".to_owned(),
        Some(Range::D7) => "last 7 days".to_owned(),
        Some(Range::D30) => "last 30 days".to_owned(),
        Some(Range::D90) => "last 90 days".to_owned(),
        None => format!("{} window", duration(width)),
    }
}

fn resolution_words(r: Resolution) -> &'static str {
    match r {
        Resolution::Raw => "from raw samples",
        Resolution::Minute => "from per-minute rollups",
        Resolution::Hour => "from per-hour rollups",
        Resolution::SixHours => "from six-hour rollups",
    }
}

/// A duration in the largest whole unit that fits: `15 s`, `4 min`, `6 h`, `2 d`.
fn duration(ms: i64) -> String {
    if ms % DAY == 0 && ms >= DAY {
        format!("{} d", ms / DAY)
    } else if ms % HOUR == 0 && ms >= HOUR {
        format!("{} h", ms / HOUR)
    } else if ms % MINUTE == 0 && ms >= MINUTE {
        format!("{} min", ms / MINUTE)
    } else if ms >= 1000 {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::capacity::test_points::{failed, ok};

    const FROM: i64 = 1_764_000_000_000 - 1_764_000_000_000 % HOUR;
    const STEP: i64 = 10_000;

    fn series(points: Vec<Point>) -> Series {
        Series {
            fleet: "prod".into(),
            from: FROM,
            to: FROM + HOUR,
            step: STEP,
            resolution: Resolution::Raw,
            points,
        }
    }

    fn render(s: &Series, a: &[Annotation]) -> String {
        headroom_chart(s, a).into_string()
    }

    /// The `d` attribute of the first `<path class="{class}"`.
    fn path_d(html: &str, class: &str) -> String {
        let prefix = format!("<path class=\"{class}\" d=\"");
        let start = html
            .find(&prefix)
            .unwrap_or_else(|| panic!("no {class} path in {html}"));
        let rest = &html[start + prefix.len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    #[test]
    fn an_empty_series_says_so_and_draws_no_svg() {
        let html = render(&series(vec![]), &[]);
        assert!(html.contains("No samples in this range."), "{html}");
        assert!(!html.contains("<svg"), "{html}");
        assert!(html.contains("data-range=\"1h\""), "{html}");
    }

    #[test]
    fn the_summary_counts_spare_required_minutes_below_and_gaps() {
        // 6 ok below (1 min), one failed bucket, then a missing minute, then 3 ok.
        let mut pts: Vec<Point> = (0..6).map(|i| ok(FROM + i * STEP, 1, 2)).collect();
        pts.push(failed(FROM + 6 * STEP));
        pts.extend((13..16).map(|i| ok(FROM + i * STEP, 3, 2)));
        let html = render(&series(pts), &[]);
        assert!(
            html.contains("Spare min 1, max 3, required 2, 1 minute below required, 1 gap."),
            "{html}"
        );
        // The svg is labelled by the caption and the summary.
        assert!(
            html.contains("role=\"img\" aria-labelledby=\"chart-prod-caption chart-prod-summary\"")
        );
    }

    #[test]
    fn gaps_break_the_spare_line_and_are_marked() {
        let pts = vec![
            ok(FROM, 2, 1),
            ok(FROM + STEP, 2, 1),
            failed(FROM + 2 * STEP),
            ok(FROM + 3 * STEP, 2, 1),
            // A jump of three buckets: missing samples.
            ok(FROM + 7 * STEP, 2, 1),
        ];
        let html = render(&series(pts), &[]);
        let d = path_d(&html, "spare");
        assert_eq!(d.matches('M').count(), 3, "three runs, two breaks: {d}");
        let required = path_d(&html, "required");
        assert_eq!(required.matches('M').count(), 3, "{required}");
        assert_eq!(html.matches("<rect class=\"gap\"").count(), 2, "{html}");
        assert!(html.contains("scrapes failed"));
        assert!(html.contains("no samples</title>"));
        // Without gaps, one unbroken run.
        let whole: Vec<Point> = (0..10).map(|i| ok(FROM + i * STEP, 2, 1)).collect();
        let html = render(&series(whole), &[]);
        assert_eq!(path_d(&html, "spare").matches('M').count(), 1);
        assert!(!html.contains("<rect class=\"gap\""));
    }

    #[test]
    fn deficit_buckets_are_shaded_and_healthy_ones_are_not() {
        let healthy: Vec<Point> = (0..5).map(|i| ok(FROM + i * STEP, 2, 1)).collect();
        assert!(!render(&series(healthy), &[]).contains("class=\"deficit\""));
        let pts = vec![
            ok(FROM, 2, 1),
            ok(FROM + STEP, 0, 1),
            ok(FROM + 2 * STEP, 0, 1),
            ok(FROM + 3 * STEP, 2, 1),
            ok(FROM + 4 * STEP, 1, 2),
        ];
        let html = render(&series(pts), &[]);
        let d = path_d(&html, "deficit");
        // Two equal adjacent deficit buckets merge: two shapes.
        assert_eq!(d.matches('Z').count(), 2, "{d}");
        assert!(html.contains("<title>Below required</title>"), "{html}");
        assert!(html.contains("spare 0, required 1, below required, native</title>"));
        assert!(html.contains("less than 1 minute below required"), "{html}");
    }

    #[test]
    fn annotations_carry_titles_and_links_and_outside_ones_are_left_out() {
        let pts: Vec<Point> = (0..5).map(|i| ok(FROM + i * STEP, 2, 1)).collect();
        let ann = [
            Annotation {
                at: FROM + 30 * MINUTE,
                provision_id: 12,
                label: "approved".into(),
            },
            Annotation {
                at: FROM - 1,
                provision_id: 11,
                label: "requested".into(),
            },
        ];
        let html = render(&series(pts), &ann);
        let when = utc(FROM + 30 * MINUTE);
        assert!(
            html.contains(&format!("<title>#12 approved at {when} UTC</title>")),
            "{html}"
        );
        assert!(html.contains("href=\"/provisions/12\""));
        assert!(!html.contains("#11"));
        assert!(html.contains("1 provision event."));
    }

    #[test]
    fn every_svg_element_has_an_end_tag() {
        // In HTML an unclosed `<line>` inside `<svg>` swallows its siblings (they vanish).
        let pts = vec![
            ok(FROM, 2, 1),
            ok(FROM + STEP, 0, 1),
            failed(FROM + 2 * STEP),
        ];
        let ann = [Annotation {
            at: FROM + STEP,
            provision_id: 3,
            label: "requested".into(),
        }];
        let html = render(&series(pts), &ann);
        for tag in ["line", "path", "rect", "text", "g", "pattern"] {
            let open = html.matches(&format!("<{tag} ")).count()
                + html.matches(&format!("<{tag}>")).count();
            let close = html.matches(&format!("</{tag}>")).count();
            assert!(open > 0, "{tag} drawn");
            assert_eq!(open, close, "<{tag}> opened {open}, closed {close}");
        }
    }

    #[test]
    fn hostile_text_is_escaped() {
        let pts = vec![ok(FROM, 1, 1)];
        let ann = [Annotation {
            at: FROM,
            provision_id: 1,
            label: "<script>alert(1)</script>".into(),
        }];
        let mut s = series(pts);
        s.fleet = "a\"><script>".into();
        let html = render(&s, &ann);
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)"));
    }

    #[test]
    fn size_stays_bounded_by_chart_points_and_output_is_deterministic() {
        // 90 days at 15 s: far more than the chart draws.
        let step = 15_000;
        let to = FROM + Range::D90.millis();
        let mut pts = Vec::new();
        let mut t = FROM;
        while t < to {
            let i = (t - FROM) / step;
            pts.push(ok(t, (i % 7) as u32, 2));
            t += step * 97; // ~ 5,300 points
        }
        assert!(pts.len() > 4 * CHART_POINTS as usize);
        let s = Series {
            fleet: "big".into(),
            from: FROM,
            to,
            step,
            resolution: Resolution::Raw,
            points: pts,
        };
        let ann: Vec<Annotation> = (0..500)
            .map(|i| Annotation {
                at: FROM + i * HOUR,
                provision_id: i,
                label: "approved".into(),
            })
            .collect();
        let html = render(&s, &ann);
        let hits = html.matches("<rect class=\"hit\"").count();
        assert!(hits <= CHART_POINTS as usize, "{hits} hit areas");
        assert!(hits >= CHART_POINTS as usize - 1, "{hits} hit areas");
        assert_eq!(
            html.matches("<g class=\"annotation\">").count(),
            MAX_ANNOTATIONS
        );
        assert!(html.matches("<tr>").count() <= CHART_POINTS as usize + 1);
        // A full 90 d chart stays in the low hundreds of kilobytes.
        assert!(html.len() < 300_000, "{} bytes", html.len());
        assert_eq!(html, render(&s, &ann));
        assert!(html.contains("data-range=\"90d\""));
        // The dip survives the re-bucketing: minimum 0 is shown.
        assert!(html.contains("Spare min 0, max 6, required 2"), "{html}");
    }

    #[test]
    fn axes_use_labels_for_the_range_and_integer_ticks() {
        let pts: Vec<Point> = (0..5).map(|i| ok(FROM + i * STEP, 7, 2)).collect();
        let html = render(&series(pts.clone()), &[]);
        // 1 h: clock labels every 10 minutes.
        assert!(
            html.contains(">00:10</text>") || html.contains(":10</text>"),
            "{html}"
        );
        // y ticks: 0..=8 by 2 (7 + 1 headroom, at most five ticks).
        for v in ["0", "2", "4", "6", "8"] {
            assert!(
                html.contains(&format!("dominant-baseline=\"middle\">{v}</text>")),
                "{v}: {html}"
            );
        }
        let mut wide = series(pts);
        wide.to = FROM + Range::D30.millis();
        let html = render(&wide, &[]);
        assert!(html.contains("data-range=\"30d\""));
        assert!(
            !html.contains(":00</text>"),
            "30 d labels are dates: {html}"
        );
        assert_eq!(time_label(FROM, Range::D30.millis(), 7 * DAY).len(), 6);
    }
}
