//! Which window the fleet page's chart shows: one of the range buttons (`?range=15m`), or a
//! custom `?from=…&to=…` in UTC (the history filters' formats), so a link shows the same
//! window. Pure: the handlers pass `now`.

use crate::capacity::series::MAX_RANGE_MILLIS;
use crate::domain::capacity::Range;
use crate::domain::clock::format_utc;
use crate::domain::{FieldErrors, UnixMillis};
use crate::export::{check_window, filter_time};
use crate::web::components::filter_query;

/// The range shown when none is asked for, or when a custom one is refused.
pub const DEFAULT_RANGE: Range = Range::H1;

/// A custom window given only its end covers this long before it.
const DEFAULT_WIDTH_MILLIS: i64 = 3_600_000;

/// The narrowest custom window (a window inside one scrape would draw nothing readable).
const MIN_WIDTH_MILLIS: i64 = 60_000;

/// The chart's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartWindow {
    /// The last `Range`, ending now.
    Last(Range),
    /// A custom window `[from, to)`, checked against the rules of [`custom`].
    Between { from: UnixMillis, to: UnixMillis },
    /// A custom window from `from` until now (given without `to`): it ends at now each time
    /// it is read, so a live chart and a link to it move forward.
    Since { from: UnixMillis },
}

impl ChartWindow {
    /// Its edges when read at `now`.
    pub fn bounds(self, now: UnixMillis) -> (UnixMillis, UnixMillis) {
        match self {
            ChartWindow::Last(r) => (now - r.millis(), now),
            ChartWindow::Between { from, to } => (from, to),
            ChartWindow::Since { from } => (from, now),
        }
    }

    /// The range button it is, if any.
    pub fn range(self) -> Option<Range> {
        match self {
            ChartWindow::Last(r) => Some(r),
            ChartWindow::Between { .. } | ChartWindow::Since { .. } => None,
        }
    }

    /// The query string that shows this window again (`range=1h`, `from=…&to=…` or, ending
    /// now, `from=…` alone, in RFC 3339).
    pub fn query(self) -> String {
        match self {
            ChartWindow::Last(r) => format!("range={}", r.as_str()),
            ChartWindow::Between { from, to } => filter_query(
                &[("from", &format_utc(from)), ("to", &format_utc(to))],
                None,
                None,
            ),
            ChartWindow::Since { from } => filter_query(&[("from", &format_utc(from))], None, None),
        }
    }
}

/// A custom window from the submitted `from` and `to` (each empty, `2026-12-02T09:30` taken
/// as UTC, or RFC 3339): `Ok(None)` when both are empty. Without `to` the window ends at now
/// whenever it is read ([`ChartWindow::Since`]); `from` defaults to an hour before `to`. Each broken rule names its field: an unreadable time, `to` later than
/// now (the chart never reaches into the future), `from` not earlier than now or older than
/// the longest retention and widest series (400 days), or `to` not at least a minute after
/// `from`.
pub fn custom(
    from_raw: &str,
    to_raw: &str,
    now: UnixMillis,
) -> Result<Option<ChartWindow>, FieldErrors> {
    if from_raw.trim().is_empty() && to_raw.trim().is_empty() {
        return Ok(None);
    }
    let mut errors = FieldErrors::default();
    let from = filter_time(&mut errors, "from", from_raw);
    let to = filter_time(&mut errors, "to", to_raw);
    if to.is_some_and(|t| t > now) {
        errors.push(
            "to",
            format!(
                "must not be later than now ({} UTC)",
                format_utc(now).trim_end_matches('Z')
            ),
        );
    }
    match from {
        Some(f) if f >= now => errors.push("from", "must be earlier than now"),
        Some(f) if f < now.saturating_sub(MAX_RANGE_MILLIS) => errors.push(
            "from",
            "must be within the last 400 days (nothing older is kept)",
        ),
        _ => {}
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let to = to.unwrap_or(now);
    let from = from.unwrap_or_else(|| to.saturating_sub(DEFAULT_WIDTH_MILLIS));
    check_window(&mut errors, Some(from), Some(to));
    if errors.is_empty() {
        let width = to.saturating_sub(from);
        // No wider than the widest series either: `from` is within 400 days of now and `to`
        // not after it.
        if width < MIN_WIDTH_MILLIS {
            errors.push("to", "must be at least 1 minute after from");
        }
    }
    if !errors.is_empty() {
        Err(errors)
    } else if to_raw.trim().is_empty() {
        Ok(Some(ChartWindow::Since { from }))
    } else {
        Ok(Some(ChartWindow::Between { from, to }))
    }
}

/// Longest refused value shown again in its input (any time these formats accept is shorter).
const MAX_ECHO_CHARS: usize = 40;

/// A refused value as its input shows it again to be fixed: trimmed, or nothing when it is
/// too long or holds control characters (neither is a time anyone typed).
pub fn echo(raw: &str) -> &str {
    let v = raw.trim();
    if v.chars().count() > MAX_ECHO_CHARS || v.chars().any(char::is_control) {
        ""
    } else {
        v
    }
}

/// A time as a `datetime-local` input's value (UTC): minutes, and seconds only when there
/// are any.
pub fn input_value(at: UnixMillis) -> String {
    let s = format_utc(at);
    let s = s.trim_end_matches('Z');
    s.strip_suffix(":00").unwrap_or(s).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::clock::parse_utc;

    const MINUTE: i64 = 60_000;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;

    fn now() -> UnixMillis {
        parse_utc("2026-12-04T17:40:30Z").unwrap()
    }

    fn refused(from: &str, to: &str) -> FieldErrors {
        custom(from, to, now()).expect_err(&format!("{from:?} – {to:?} refused"))
    }

    #[test]
    fn both_empty_is_no_custom_window() {
        assert_eq!(custom("", "  ", now()), Ok(None));
    }

    #[test]
    fn a_custom_window_takes_the_history_filters_formats_and_defaults_its_ends() {
        let w = custom("2026-12-04T09:30", "2026-12-04T10:15:00Z", now()).unwrap();
        assert_eq!(
            w,
            Some(ChartWindow::Between {
                from: parse_utc("2026-12-04T09:30:00Z").unwrap(),
                to: parse_utc("2026-12-04T10:15:00Z").unwrap(),
            })
        );
        // Only `from`: until now, whenever it is read. Only `to`: the hour before it.
        let since = custom("2026-12-04T17:00", "", now()).unwrap().unwrap();
        let from = parse_utc("2026-12-04T17:00:00Z").unwrap();
        assert_eq!(since, ChartWindow::Since { from });
        assert_eq!(since.bounds(now()), (from, now()));
        assert_eq!(since.bounds(now() + MINUTE), (from, now() + MINUTE));
        assert_eq!(since.range(), None);
        let until = custom("", "2026-12-04T12:00:00+02:00", now())
            .unwrap()
            .unwrap();
        let to = parse_utc("2026-12-04T10:00:00Z").unwrap();
        assert_eq!(until.bounds(0), (to - HOUR, to));
    }

    #[test]
    fn bad_windows_name_the_field_and_the_rule() {
        let e = refused("yesterday", "2026-13-01T00:00");
        assert!(e.for_field("from").unwrap().contains("2026-12-02T09:30"));
        assert!(e.for_field("to").unwrap().contains("RFC 3339"));
        let e = refused("2026-12-04T10:00", "2026-12-04T09:00");
        assert_eq!(e.for_field("to"), Some("must be later than from"));
        let e = refused("2026-12-04T10:00:00Z", "2026-12-04T10:00:30Z");
        assert_eq!(
            e.for_field("to"),
            Some("must be at least 1 minute after from")
        );
        let e = refused("2025-01-01T00:00", "2025-01-02T00:00");
        assert_eq!(
            e.for_field("from"),
            Some("must be within the last 400 days (nothing older is kept)")
        );
        let e = refused("", "2026-12-04T17:41");
        assert_eq!(
            e.for_field("to"),
            Some("must not be later than now (2026-12-04T17:40:30 UTC)")
        );
        let e = refused("2026-12-05T00:00", "");
        assert_eq!(e.for_field("from"), Some("must be earlier than now"));
    }

    #[test]
    fn hostile_values_are_refused_by_name_never_parsed_loosely() {
        let huge = "9".repeat(100_000);
        for (from, to, field) in [
            (huge.as_str(), "", "from"),
            ("", huge.as_str(), "to"),
            ("2026-12-04T09:30\u{0}", "", "from"),
            ("2026-12-04T09:30\n", "2026-12-04\t10:30", "to"),
            ("", "2026-12-04T10:30\u{202e}", "to"),
            ("-999999-01-01T00:00", "", "from"),
            ("0001-01-01T00:00", "0001-01-01T01:00", "from"),
            ("", "9999-12-31T23:59", "to"),
            ("1970-01-01T00:00", "", "from"),
            ("2026-12-04T10:00", "2026-12-03T10:00", "to"),
        ] {
            let e = custom(from, to, now()).expect_err(&format!("{from:.20} {to:.20}"));
            assert!(e.for_field(field).is_some(), "{from:.20} {to:.20}: {e:?}");
        }
        // A trailing newline is whitespace, trimmed like the history filters do.
        assert!(custom("2026-12-04T09:30\n", "", now()).is_ok());
    }

    #[test]
    fn only_plausible_refused_values_are_shown_again() {
        assert_eq!(echo(" yesterday "), "yesterday");
        assert_eq!(echo("2026-12-04T09:30\u{1b}[31m"), "");
        assert_eq!(echo(&"9".repeat(41)), "");
    }

    #[test]
    fn a_window_links_back_to_itself() {
        assert_eq!(ChartWindow::Last(Range::M15).query(), "range=15m");
        let w = ChartWindow::Between {
            from: parse_utc("2026-12-04T09:30").unwrap(),
            to: parse_utc("2026-12-04T10:00").unwrap(),
        };
        assert_eq!(
            w.query(),
            "from=2026-12-04T09%3A30%3A00Z&to=2026-12-04T10%3A00%3A00Z"
        );
        let (from, to) = w.bounds(0);
        assert_eq!(
            custom(&format_utc(from), &format_utc(to), now()),
            Ok(Some(w))
        );
        assert_eq!(
            ChartWindow::Last(Range::D7).bounds(10 * DAY),
            (3 * DAY, 10 * DAY)
        );
        // A window ending now links to itself without `to`, so the link keeps ending now.
        let since = ChartWindow::Since { from };
        assert_eq!(since.query(), "from=2026-12-04T09%3A30%3A00Z");
        assert_eq!(custom(&format_utc(from), "", now()), Ok(Some(since)));
        assert_eq!(input_value(from), "2026-12-04T09:30");
        assert_eq!(input_value(from + 5_000), "2026-12-04T09:30:05");
    }
}
