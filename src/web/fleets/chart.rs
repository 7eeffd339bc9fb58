//! The headroom chart: a pure view from a [`Series`] and its provision [`Annotation`]s to an
//! inline SVG figure with a text alternative. No JavaScript, no I/O, deterministic output (the
//! same input renders the same bytes), and its size is bounded by [`CHART_POINTS`] whatever the
//! series holds: a series with more points is re-bucketed (`domain::rebucket`) before drawing.
//!
//! What it draws: spare as a step line (each bucket's minimum: a dip is what matters), required
//! as a dashed threshold, deficit buckets (spare < required) hatched, gaps (failed scrapes and
//! buckets without any sample) as breaks in both lines and a grey band, time before the fleet
//! was created as a labelled band (never a gap), and each provision request as one bar from
//! its filing to its end (or the window's end while open), coloured by outcome, and, where
//! samples judged absorption headroom, a band along the bottom of the plot: absorbed, or short
//! (losing the worst node or region would leave workloads without room). Every point
//! has one hover `<title>`; a `<details>` table lists the points and the requests in words
//! for screen readers and for copying.

use std::fmt::Write as _;

use maud::{html, Markup, Render};

use super::capacity::span_words;
use crate::domain::capacity::{Annotation, Point, Range, Resolution, Series, CHART_POINTS};
use crate::domain::clock::format_utc;
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
/// Most provision requests drawn; the newest are kept (a chart with more would be unreadable,
/// and the markup must stay bounded).
pub const MAX_ANNOTATIONS: usize = 60;
/// Rows the request bars are stacked in, so overlapping requests stay apart.
const REQUEST_LANES: usize = 4;
/// Height of one request bar and the space between rows.
const LANE_H: f64 = 5.0;
const LANE_GAP: f64 = 2.0;
/// Most x-axis labels.
const MAX_X_TICKS: i64 = 8;
/// Most y-axis ticks (besides zero).
const MAX_Y_TICKS: u32 = 5;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// The chart of `series` over the last `range` (`None`: a custom window) with `annotations`
/// (provision requests; those outside the window are left out), read at `updated` (said in
/// the summary, so whoever reads a refreshed chart knows how fresh it is). Pure: no clock, no
/// I/O; the series' end stands for now (an open request runs to it).
pub fn headroom_chart(
    series: &Series,
    range: Option<Range>,
    annotations: &[Annotation],
    updated: UnixMillis,
) -> Markup {
    let model = Model::new(series, annotations);
    let ids = Ids::new(&series.fleet);
    let name = range.map_or("custom", Range::as_str);
    html! {
        figure.headroom-chart data-range=(name) data-fleet=(series.fleet)
            data-from=(format_utc(series.from)) data-to=(format_utc(series.to)) {
            figcaption id=(ids.caption) {
                strong { "Headroom of " (series.fleet) ", " (range_words(range, series.to - series.from)) }
                " "
                span.muted {
                    "(" (utc(series.from)) " – " (utc(series.to)) " UTC, one point per "
                    (duration(model.step)) ", " (resolution_words(series.resolution)) ")"
                }
            }
            p.chart-summary id=(ids.summary) {
                (model.summary()) " " span.chart-updated { "Updated " (utc(updated)) " UTC." }
            }
            @if model.points.is_empty() {
                p.chart-empty { "No samples in this range." }
                (request_list(&model))
            } @else {
                (svg(&model, &ids))
                (legend(&model))
                (request_list(&model))
                (data_table(&model, &ids))
            }
        }
    }
}

/// Element ids derived from the fleet name (an RFC 1123 label, so safe in an id), so two
/// charts of different fleets on one page do not collide.
struct Ids {
    caption: String,
    summary: String,
    data: String,
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
            data: format!("chart-{slug}-data"),
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
    /// When the fleet was created, when inside the window: nothing before it is a gap.
    born: Option<UnixMillis>,
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
            // A bucket wholly before the fleet existed is no part of its history.
            .filter(|p| p.t >= from && p.t < to && p.t + step > series.fleet_created_at)
            .cloned()
            .collect();
        points.sort_by_key(|p| p.t);
        if points.len() > CHART_POINTS as usize {
            (points, step) = rebucket(&points, from, to, step, CHART_POINTS);
        }
        let born = Some(series.fleet_created_at).filter(|b| *b > from && *b < to);
        let gaps = gaps(&points, step, series.fleet_created_at);
        let mut annotations: Vec<Annotation> = annotations
            .iter()
            .filter(|a| a.span_within(from, to).is_some())
            .cloned()
            .collect();
        annotations.sort_by_key(|a| (a.requested_at, a.provision_id));
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
            born,
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

    /// The text alternative: the numbers, then when the fleet was created (inside the
    /// window) and the requests by outcome.
    fn summary(&self) -> String {
        let mut out = self.numbers_summary();
        if let Some(born) = self.born {
            out.push_str(&format!(
                " The fleet was created at {} UTC; the time before is not counted as gaps.",
                utc(born)
            ));
        }
        if !self.annotations.is_empty() {
            out.push_str(&format!(" {}.", requests_words(&self.annotations)));
        }
        out
    }

    /// The one-sentence summary of the points.
    fn numbers_summary(&self) -> String {
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
        let minutes = |ms: i64| match ms / MINUTE {
            0 if ms > 0 => "less than 1 minute".to_owned(),
            m => format!("{m} minute{}", plural(m as usize)),
        };
        let mut out = format!(
            "Spare min {spare_min}, max {spare_max}, required {required}, {} below required, {} gap{}.",
            minutes(below),
            self.gaps.len(),
            plural(self.gaps.len()),
        );
        let judged: Vec<bool> = self
            .points
            .iter()
            .filter(|p| p.ok)
            .filter_map(|p| p.absorbed)
            .collect();
        if !judged.is_empty() {
            // Intervals whose worst verdict was short, as `below` counts intervals: one short
            // sample marks its whole interval.
            let short = judged.iter().filter(|a| !**a).count() as i64 * self.step;
            out.push_str(&format!(
                " Absorption short in intervals totalling {}.",
                minutes(short)
            ));
        }
        out
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `2 provision requests: 1 succeeded, 1 open`: the requests drawn, counted by outcome in
/// the order first seen.
fn requests_words(annotations: &[Annotation]) -> String {
    let mut by_outcome: Vec<(&'static str, usize)> = Vec::new();
    for a in annotations {
        let word = if a.is_open() { "open" } else { a.state.words() };
        match by_outcome.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n += 1,
            None => by_outcome.push((word, 1)),
        }
    }
    let counts: Vec<String> = by_outcome.iter().map(|(w, n)| format!("{n} {w}")).collect();
    format!(
        "{} provision request{}: {}",
        annotations.len(),
        plural(annotations.len()),
        counts.join(", ")
    )
}

/// The gaps between and at failed points: a bucket with `ok = false`, or a jump in `t` larger
/// than the step (buckets without any sample). Adjacent stretches merge into one gap. Time
/// before the first point and after the last is not a gap (the fleet may be new, and the
/// current bucket may not be scraped yet), nor is any time before the fleet was created
/// (`born`): a gap reaching back past it is cut there.
fn gaps(points: &[Point], step: i64, born: UnixMillis) -> Vec<Gap> {
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
    out.retain_mut(|g| {
        g.from = g.from.max(born);
        g.to > g.from
    });
    out
}

/// A number for an SVG attribute: one decimal, fixed, so output is deterministic.
fn n(v: f64) -> Tenths {
    Tenths(v)
}

/// A coordinate rounded to tenths, written as two integers: a 360-point chart writes some two
/// thousand of them, and float formatting (with its allocation and escaping) was the largest
/// part of its render. Digits, a point and a sign need no escaping.
#[derive(Debug, Clone, Copy)]
struct Tenths(f64);

impl Tenths {
    fn push_to(self, out: &mut String) {
        // `as` saturates (and makes NaN 0): coordinates are clamped to the plot anyway.
        let tenths = (self.0 * 10.0).round() as i64;
        if tenths < 0 {
            out.push('-');
        }
        let abs = tenths.unsigned_abs();
        let _ = write!(out, "{}.{}", abs / 10, abs % 10);
    }
}

impl Render for Tenths {
    fn render_to(&self, buffer: &mut String) {
        self.push_to(buffer);
    }
}

/// Appends a path command: its letter, then its numbers separated by spaces.
fn command(d: &mut String, letter: char, numbers: &[f64]) {
    d.push(letter);
    for (i, v) in numbers.iter().enumerate() {
        if i > 0 {
            d.push(' ');
        }
        n(*v).push_to(d);
    }
}

/// Step-line paths over runs of consecutive points with numbers; a gap ends a run (the line
/// breaks). `value` picks spare or required.
fn step_path(m: &Model, value: impl Fn(u32, u32) -> u32) -> String {
    let mut d = String::new();
    let mut cur: Option<(f64, UnixMillis)> = None; // (y, end of the last bucket drawn)
    for p in &m.points {
        let Some((s, r)) = Model::numbers(p) else {
            if let Some((_, end)) = cur.take() {
                command(&mut d, 'H', &[m.x(end)]);
            }
            continue;
        };
        let y = m.y(value(s, r));
        match cur {
            Some((cy, end)) if p.t <= end => {
                if cy != y {
                    command(&mut d, 'H', &[m.x(p.t)]);
                    command(&mut d, 'V', &[y]);
                }
            }
            Some((_, end)) => {
                command(&mut d, 'H', &[m.x(end)]);
                command(&mut d, 'M', &[m.x(p.t), y]);
            }
            None => command(&mut d, 'M', &[m.x(p.t), y]),
        }
        cur = Some((y, p.t + m.step));
    }
    if let Some((_, end)) = cur {
        command(&mut d, 'H', &[m.x(end)]);
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
            command(d, 'M', &[x0, y0]);
            command(d, 'H', &[x1]);
            command(d, 'V', &[y1]);
            command(d, 'H', &[x0]);
            d.push('Z');
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

/// A point's absorption verdict in words; `None` where no sample judged it.
fn absorption_words(p: &Point) -> Option<String> {
    match (p.ok, p.absorbed, p.machines_needed) {
        (true, Some(true), _) => Some("absorbed".to_owned()),
        (true, Some(false), Some(k)) if k > 0 => Some(format!(
            "short ({k} more restore machine{} needed)",
            plural(k as usize)
        )),
        (true, Some(false), _) => Some("short".to_owned()),
        _ => None,
    }
}

/// A point's hover title: `2026-12-03 09:30:00 UTC (+6 h): spare 1 (max 2), required 2, below
/// required, native, absorption: absorbed`. `step_words` is the step in words, worked out once
/// per chart.
fn point_title(p: &Point, step_words: &str) -> String {
    let mut out = utc(p.t);
    let _ = write!(out, " UTC (+{step_words}): ");
    match Model::numbers(p) {
        Some((s, r)) => {
            let _ = write!(out, "spare {s}");
            if let Some(max) = p.spare_max.filter(|m| *m != s) {
                let _ = write!(out, " (max {max})");
            }
            let _ = write!(out, ", required {r}");
            if s < r {
                out.push_str(", below required");
            }
            out.push_str(", ");
            out.push_str(p.source.as_str());
            if let Some(words) = absorption_words(p) {
                out.push_str(", absorption: ");
                out.push_str(&words);
            }
        }
        None => out.push_str("no data (scrape failed)"),
    }
    out
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

/// A request in words, its window edge `to` standing for now: `#12 succeeded: requested
/// 2026-12-04 09:30:00 UTC, ended 2026-12-04 09:34:10 UTC (4 min 10 s)`.
fn annotation_words(a: &Annotation, to: UnixMillis) -> String {
    let requested = utc(a.requested_at);
    let end = a.end(to);
    let took = span_words(end - a.requested_at);
    if a.is_open() {
        format!(
            "#{} {}: requested {requested} UTC, still open ({took} so far)",
            a.provision_id,
            a.outcome_words()
        )
    } else {
        format!(
            "#{} {}: requested {requested} UTC, ended {} UTC ({took})",
            a.provision_id,
            a.outcome_words(),
            utc(end)
        )
    }
}

/// The row each request's bar is drawn in: the first row whose last bar ended before this
/// one starts (requests sorted by filing), else the row that frees up first. Pure, so
/// overlapping requests are tested apart.
fn lanes(spans: &[(UnixMillis, UnixMillis)], rows: usize) -> Vec<usize> {
    let rows = rows.max(1);
    let mut ends: Vec<UnixMillis> = Vec::with_capacity(rows);
    spans
        .iter()
        .map(|&(start, end)| {
            let lane = match ends.iter().position(|e| *e < start) {
                Some(i) => i,
                None if ends.len() < rows => {
                    ends.push(UnixMillis::MIN);
                    ends.len() - 1
                }
                None => (0..ends.len()).min_by_key(|i| ends[*i]).unwrap_or(0),
            };
            ends[lane] = ends[lane].max(end);
            lane
        })
        .collect()
}

// Every SVG element is written with an explicit end tag (`{}` in maud, never `;`): in HTML,
// `<line>` inside `<svg>` is not a void element, so an unclosed one swallows what follows.
fn svg(m: &Model, ids: &Ids) -> Markup {
    let labelledby = format!("{} {}", ids.caption, ids.summary);
    let spare = step_path(m, |s, _| s);
    let required = step_path(m, |_, r| r);
    let deficit = deficit_path(m);
    let pattern = format!("{}-hatch", ids.summary);
    let step_words = duration(m.step);
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
            @if let Some(born) = m.born {
                rect.before-fleet x=(n(PL)) y=(n(PT)) width=(n(m.x(born) - PL)) height=(n(PB - PT)) {
                    title { "Before the fleet existed (created " (utc(born)) " UTC)" }
                }
            }
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
            // Under the lines, so a spare line at 0 stays visible over it.
            (absorption_band(m))
            path.required d=(required) fill="none" stroke-dasharray="6 4" {}
            path.spare d=(spare) fill="none" {}
            g.hits {
                @for p in &m.points {
                    rect.hit x=(n(m.x(p.t))) y=(n(PT)) width=(n((m.x(p.t + m.step) - m.x(p.t)).max(0.5))) height=(n(PB - PT)) {
                        title { (point_title(p, &step_words)) }
                    }
                }
            }
            (request_bars(m))
        }
    }
}

/// Height of the absorption band along the bottom of the plot.
const BAND_H: f64 = 5.0;

/// Absorption's verdict as a band along the bottom of the plot, one rect per run of points
/// with the same verdict (so its size follows the runs, never the points); nothing where no
/// sample judged it.
fn absorption_band(m: &Model) -> Markup {
    let mut runs: Vec<(UnixMillis, UnixMillis, bool)> = Vec::new();
    for p in &m.points {
        let Some(absorbed) = p.absorbed.filter(|_| p.ok) else {
            continue;
        };
        match runs.last_mut() {
            Some((_, end, verdict)) if *end == p.t && *verdict == absorbed => *end = p.t + m.step,
            _ => runs.push((p.t, p.t + m.step, absorbed)),
        }
    }
    html! {
        @if !runs.is_empty() {
            g.absorption-band {
                @for (from, to, absorbed) in &runs {
                    rect class=(if *absorbed { "absorbed" } else { "absorption-short" })
                        x=(n(m.x(*from))) y=(n(PB - BAND_H)) width=(n((m.x(*to) - m.x(*from)).max(1.0))) height=(n(BAND_H)) {
                        title {
                            (utc(*from)) " – " (utc(*to)) " UTC: "
                            @if *absorbed { "absorbed (survives losing its worst node or region)" } @else { "absorption short" }
                        }
                    }
                }
            }
        }
    }
}

/// One bar a request, at the top of the plot, from its filing to its end (the window's end
/// while open), with a tick at the filing; drawn above the hover areas so its own title wins.
fn request_bars(m: &Model) -> Markup {
    let spans: Vec<(UnixMillis, UnixMillis)> = m
        .annotations
        .iter()
        .map(|a| a.span_within(m.from, m.to).unwrap_or((m.from, m.from)))
        .collect();
    let lane_of = lanes(&spans, REQUEST_LANES);
    html! {
        g.requests {
            @for ((a, (start, end)), lane) in m.annotations.iter().zip(&spans).zip(&lane_of) {
                @let (x0, x1) = (m.x(*start), m.x(*end));
                @let y = PT + 1.0 + *lane as f64 * (LANE_H + LANE_GAP);
                g class={ "request outcome-" (a.outcome_class()) } data-provision=(a.provision_id) {
                    title { (annotation_words(a, m.to)) }
                    @if a.requested_at >= m.from {
                        line x1=(n(x0)) x2=(n(x0)) y1=(n(PT)) y2=(n(PB)) {}
                    }
                    rect x=(n(x0)) y=(n(y)) width=(n((x1 - x0).max(2.0))) height=(n(LANE_H)) {}
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

fn legend(m: &Model) -> Markup {
    html! {
        ul.chart-legend {
            li { span.swatch.spare aria-hidden="true" {} "spare (solid line: fewest in each interval)" }
            li { span.swatch.required aria-hidden="true" {} "required (dashed line)" }
            li { span.swatch.deficit aria-hidden="true" {} "below required (hatched)" }
            li { span.swatch.gap aria-hidden="true" {} "gap: no data (grey band, line broken)" }
            @if m.born.is_some() {
                li { span.swatch.before-fleet aria-hidden="true" {} "before the fleet existed (not a gap)" }
            }
            @if m.points.iter().any(|p| p.ok && p.absorbed.is_some()) {
                li { span.swatch.absorbed aria-hidden="true" {} "absorbed: survives losing its worst node or region (band along the bottom)" }
                li { span.swatch.absorption-short aria-hidden="true" {} "absorption short: that loss would leave workloads without room" }
            }
            @for (class, words) in outcomes(&m.annotations) {
                li { span class={ "swatch request outcome-" (class) } aria-hidden="true" {} "request " (words) " (bar: requested to its end)" }
            }
        }
    }
}

/// Each outcome among `annotations` once, in the order first seen: (class, words).
fn outcomes(annotations: &[Annotation]) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for a in annotations {
        let words = if a.is_open() { "open" } else { a.state.words() };
        if !out.iter().any(|(c, _)| *c == a.outcome_class()) {
            out.push((a.outcome_class(), words));
        }
    }
    out
}

fn data_table(m: &Model, ids: &Ids) -> Markup {
    html! {
        // An id, so a refresh of a live chart opens the table again when it was open.
        details.chart-data id=(ids.data) {
            summary { "Data table (" (m.points.len()) " point" (plural(m.points.len())) ")" }
            div.scroll-pane tabindex="0" role="region" aria-label="Chart data points" {
                table.data {
                    thead { tr { th scope="col" { "Interval start (UTC)" } th scope="col" { "Spare (min)" } th scope="col" { "Spare (max)" } th scope="col" { "Required" } th scope="col" { "State" } th scope="col" { "Absorption" } } }
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
                                td { (absorption_words(p).unwrap_or_else(|| "—".to_owned())) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `2026-12-03 09:30:00` (UTC, shown with a "UTC" suffix by the caller).
fn utc(at: UnixMillis) -> String {
    let mut out = String::with_capacity(19);
    if !crate::domain::clock::write_utc(&mut out, at, ' ') {
        out = format_utc(at)
            .replace('T', " ")
            .trim_end_matches('Z')
            .to_owned();
    }
    out
}

/// The requests in words, each linked to its page: what the bars say, for everyone.
fn request_list(m: &Model) -> Markup {
    html! {
        @if !m.annotations.is_empty() {
            h3.chart-requests { "Provision requests in this window" }
            ul.chart-requests {
                @for a in &m.annotations {
                    li data-outcome=(a.outcome_class()) {
                        a href=(paths::fill(paths::PROVISION, &[("id", &a.provision_id.to_string())])) { "#" (a.provision_id) }
                        " " (annotation_words(a, m.to).split_once(' ').map_or("", |(_, rest)| rest))
                    }
                }
            }
        }
    }
}

/// The caption's name for the window: `last hour`, or a custom window's width.
fn range_words(range: Option<Range>, width: i64) -> String {
    match range {
        Some(Range::M15) => "last 15 minutes".to_owned(),
        Some(Range::H1) => "last hour".to_owned(),
        Some(Range::H6) => "last 6 hours".to_owned(),
        Some(Range::H24) => "last 24 hours".to_owned(),
        Some(Range::D7) => "last 7 days".to_owned(),
        Some(Range::D30) => "last 30 days".to_owned(),
        Some(Range::D90) => "last 90 days".to_owned(),
        None => format!("custom window of {}", span_words(width)),
    }
}

fn resolution_words(r: Resolution) -> &'static str {
    match r {
        Resolution::Raw => "from raw samples",
        Resolution::Minute => "from per-minute rollups",
        Resolution::FiveMinutes => "from five-minute rollups",
        Resolution::Hour => "from per-hour rollups",
        Resolution::TwoHours => "from two-hour rollups",
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
    use crate::domain::ProvisionState;

    const FROM: i64 = 1_764_000_000_000 - 1_764_000_000_000 % HOUR;
    const STEP: i64 = 10_000;

    fn series(points: Vec<Point>) -> Series {
        Series {
            fleet: "prod".into(),
            from: FROM,
            to: FROM + HOUR,
            step: STEP,
            resolution: Resolution::Raw,
            fleet_created_at: FROM - DAY,
            points,
        }
    }

    /// The last hour's chart of `s`.
    fn render(s: &Series, a: &[Annotation]) -> String {
        headroom_chart(s, Some(Range::H1), a, s.to).into_string()
    }

    /// Request `id` filed at `at`, in `state`, finished at `finished`.
    fn req(id: i64, at: i64, finished: Option<i64>, state: ProvisionState) -> Annotation {
        Annotation {
            provision_id: id,
            requested_at: at,
            finished_at: finished,
            state,
        }
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
    fn absorption_is_a_band_of_runs_counted_in_the_summary_and_listed_in_the_table() {
        let judged = |i: i64, absorbed: Option<bool>| {
            let mut p = ok(FROM + i * STEP, 1, 1);
            p.absorbed = absorbed;
            p.machines_needed = absorbed.map(|a| if a { 0 } else { 2 });
            p
        };
        // 3 absorbed, 6 short (1 min), 2 not judged, 3 absorbed: three runs drawn.
        let mut pts: Vec<Point> = (0..3).map(|i| judged(i, Some(true))).collect();
        pts.extend((3..9).map(|i| judged(i, Some(false))));
        pts.extend((9..11).map(|i| judged(i, None)));
        pts.extend((11..14).map(|i| judged(i, Some(true))));
        let html = render(&series(pts), &[]);
        assert_eq!(
            html.matches("<rect class=\"absorbed\"").count(),
            2,
            "{html}"
        );
        assert_eq!(html.matches("<rect class=\"absorption-short\"").count(), 1);
        assert!(
            html.contains("Absorption short in intervals totalling 1 minute."),
            "{html}"
        );
        assert!(html.contains("<td>short (2 more restore machines needed)</td>"));
        assert!(html.contains(", absorption: absorbed</title>"));
        assert!(
            html.contains("UTC: absorption short</title>"),
            "each run has a title"
        );
        assert!(html.contains("absorption short: that loss would leave workloads without room"));
        // A series nothing judged draws no band and says nothing of it.
        let plain = render(&series(vec![ok(FROM, 1, 1)]), &[]);
        assert!(!plain.contains("absorption-band"), "{plain}");
        assert!(!plain.contains("Absorption short") && !plain.contains("swatch absorbed"));
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
    fn the_summary_says_when_the_chart_was_read() {
        let s = series(vec![ok(FROM, 1, 1)]);
        let at = |updated: i64| headroom_chart(&s, Some(Range::H1), &[], updated).into_string();
        let html = at(FROM + HOUR + 5_000);
        let summary = texts_of(&html, ".chart-summary").join("");
        assert!(
            summary.ends_with(&format!("Updated {} UTC.", utc(FROM + HOUR + 5_000))),
            "{summary}"
        );
        // Only the time differs between two reads of the same data.
        assert_ne!(at(FROM + HOUR), at(FROM + HOUR + 1_000));
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
    fn each_request_is_one_bar_from_its_filing_to_its_end_in_words_and_linked() {
        let pts: Vec<Point> = (0..5).map(|i| ok(FROM + i * STEP, 2, 1)).collect();
        let ann = [
            req(
                12,
                FROM + 30 * MINUTE,
                Some(FROM + 34 * MINUTE + 10_000),
                ProvisionState::Succeeded,
            ),
            // Ended before the window: left out.
            req(11, FROM - HOUR, Some(FROM - 1), ProvisionState::Failed),
            // Filed before the window, still open: drawn from the window's start to its end.
            req(13, FROM - MINUTE, None, ProvisionState::PendingApproval),
        ];
        let html = render(&series(pts), &ann);
        assert_eq!(html.matches("<g class=\"request ").count(), 2, "{html}");
        let filed = utc(FROM + 30 * MINUTE);
        let ended = utc(FROM + 34 * MINUTE + 10_000);
        assert!(
            html.contains(&format!(
                "<title>#12 succeeded: requested {filed} UTC, ended {ended} UTC (4 min 10 s)</title>"
            )),
            "{html}"
        );
        assert!(html.contains("<g class=\"request outcome-succeeded\" data-provision=\"12\">"));
        assert!(
            html.contains("<g class=\"request outcome-open\" data-provision=\"13\">"),
            "{html}"
        );
        // The open one's bar runs from the window's start (x = PL) to its end (x = PR).
        assert!(
            html.contains(&format!(
                "<rect x=\"{}\" y=\"{}\" width=\"{}\"",
                n(PL).render().0,
                n(PT + 1.0).render().0,
                n(PR - PL).render().0
            )),
            "{html}"
        );
        assert!(html.contains("#13 open (pending approval): requested"));
        assert!(html.contains("still open (1 h 1 min so far)"), "{html}");
        assert!(html.contains("href=\"/provisions/12\""));
        assert!(!html.contains("#11"));
        assert!(
            html.contains("2 provision requests: 1 open, 1 succeeded."),
            "{html}"
        );
        assert!(html.contains("request succeeded (bar: requested to its end)"));
        let list = texts_of(&html, "ul.chart-requests li");
        assert_eq!(list.len(), 2, "{list:?}");
        assert!(list[1].starts_with("#12 succeeded: requested"), "{list:?}");
    }

    #[test]
    fn overlapping_requests_take_separate_rows_and_reuse_freed_ones() {
        let spans = [(0, 10), (5, 20), (11, 12), (13, 30), (14, 15), (16, 17)];
        assert_eq!(lanes(&spans, 3), [0, 1, 0, 0, 2, 2]);
        // With every row taken, the one that frees up first.
        assert_eq!(lanes(&[(0, 10), (1, 5), (2, 8)], 2), [0, 1, 1]);
        assert_eq!(lanes(&[], 4), Vec::<usize>::new());
    }

    #[test]
    fn time_before_the_fleet_existed_is_neither_a_gap_nor_counted() {
        // Created 20 minutes into the window; a failed bucket before then (an earlier fleet's
        // sample) and a jump over the creation.
        let born = FROM + 20 * MINUTE;
        let mut s = series(vec![
            failed(FROM),
            ok(FROM + 10 * MINUTE, 2, 1),
            ok(born + STEP, 2, 1),
            ok(born + 2 * STEP, 2, 1),
        ]);
        s.fleet_created_at = born;
        let html = render(&s, &[]);
        assert!(
            html.contains("Spare min 2, max 2, required 1, 0 minutes below required, 0 gaps."),
            "{html}"
        );
        assert!(!html.contains("<rect class=\"gap\""), "{html}");
        assert!(html.contains(&format!(
            "The fleet was created at {} UTC; the time before is not counted as gaps.",
            utc(born)
        )));
        assert!(html.contains("<rect class=\"before-fleet\""), "{html}");
        assert!(html.contains("before the fleet existed (not a gap)"));
        // A failed bucket holding the creation is a gap only from the creation on.
        let mut s = series(vec![failed(born - STEP / 2), ok(born + STEP, 2, 1)]);
        s.fleet_created_at = born - STEP / 2 + 1;
        s.points[0].t = born - STEP / 2;
        let m = Model::new(&s, &[]);
        assert_eq!(m.gaps.len(), 1);
        assert_eq!(m.gaps[0].from, born - STEP / 2 + 1);
        // A fleet older than the window: no band, no sentence.
        let html = render(&series(vec![ok(FROM, 2, 1)]), &[]);
        assert!(!html.contains("before-fleet") && !html.contains("was created"));
    }

    /// The text of every element `selector` matches.
    fn texts_of(html: &str, selector: &str) -> Vec<String> {
        let doc = scraper::Html::parse_fragment(html);
        let sel = scraper::Selector::parse(selector).unwrap();
        doc.select(&sel)
            .map(|e| e.text().collect::<String>().trim().to_owned())
            .collect()
    }

    #[test]
    fn every_svg_element_has_an_end_tag() {
        // In HTML an unclosed `<line>` inside `<svg>` swallows its siblings (they vanish).
        let pts = vec![
            ok(FROM, 2, 1),
            ok(FROM + STEP, 0, 1),
            failed(FROM + 2 * STEP),
        ];
        let ann = [req(3, FROM + STEP, None, ProvisionState::Approved)];
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
        let mut s = series(pts);
        s.fleet = "a\"><script>alert(1)</script>".into();
        let html = render(&s, &[]);
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
            fleet_created_at: FROM,
            points: pts,
        };
        let ann: Vec<Annotation> = (0..500)
            .map(|i| {
                req(
                    i,
                    FROM + i * HOUR,
                    Some(FROM + i * HOUR + MINUTE),
                    ProvisionState::Succeeded,
                )
            })
            .collect();
        let render = |s: &Series, a: &[Annotation]| {
            headroom_chart(s, Some(Range::D90), a, s.to).into_string()
        };
        let html = render(&s, &ann);
        let hits = html.matches("<rect class=\"hit\"").count();
        assert!(hits <= CHART_POINTS as usize, "{hits} hit areas");
        assert!(hits >= CHART_POINTS as usize - 1, "{hits} hit areas");
        assert_eq!(html.matches("<g class=\"request ").count(), MAX_ANNOTATIONS);
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
        let html = headroom_chart(&wide, Some(Range::D30), &[], wide.to).into_string();
        assert!(html.contains("data-range=\"30d\""));
        assert!(
            !html.contains(":00</text>"),
            "30 d labels are dates: {html}"
        );
        assert_eq!(time_label(FROM, Range::D30.millis(), 7 * DAY).len(), 6);
    }

    proptest::proptest! {
        /// Any coordinate, negative and past the plot included, is written as the nearest
        /// tenth: it reads back within half a tenth, and is `format!("{:.1}")`'s text except
        /// where that rounds a tie to even or writes `-0.0`.
        #[test]
        fn coordinates_are_written_as_the_nearest_tenth(v in -100_000.0_f64..100_000.0) {
            let written = n(v).render().0;
            let back: f64 = written.parse().unwrap();
            proptest::prop_assert!((back - v).abs() <= 0.050_000_1, "{} -> {}", v, written);
            let std = format!("{v:.1}");
            let tie = ((v * 10.0).fract().abs() - 0.5).abs() < 1e-9;
            if !tie && std != "-0.0" {
                proptest::prop_assert_eq!(written, std);
            }
        }
    }

    #[test]
    fn a_coordinate_that_is_not_a_number_is_written_as_zero() {
        assert_eq!(n(f64::NAN).render().0, "0.0");
        assert_eq!(n(-0.04).render().0, "0.0");
        assert_eq!(n(-2.26).render().0, "-2.3");
    }
}
