//! One home for what the audit log and the provision history share when they are searched,
//! paged and exported: filter and paging parsers that name the broken field, the two export
//! encodings (CSV cells defused against spreadsheet formulas, JSON lines), and the stream a
//! walk feeds on its own task. Pure parts need only `domain`; the stream needs only tokio.
//! [`params`] declares the query-string fields that carry these rules, with their documented
//! bounds, for every struct that takes them.

pub mod params;

use std::future::Future;

use crate::domain::clock::parse_utc;
use crate::domain::field_error::reject_control_chars;
use crate::domain::{FieldError, FieldErrors, UnixMillis};

/// The longest text filter, in characters.
pub const MAX_FILTER_CHARS: usize = 200;

/// The rule a time filter breaks, shown beside the field.
const TIME_RULE: &str = "must be a time like 2026-12-02T09:30 (UTC) or RFC 3339";

/// A text filter: `None` when empty; trimmed, at most [`MAX_FILTER_CHARS`] and free of
/// control characters, or an error named `field`.
pub fn filter_text(errors: &mut FieldErrors, field: &str, raw: &str) -> Option<String> {
    let v = raw.trim();
    if v.is_empty() {
        return None;
    }
    if v.chars().count() > MAX_FILTER_CHARS {
        errors.push(
            field,
            format!("must be at most {MAX_FILTER_CHARS} characters"),
        );
        return None;
    }
    errors.check(reject_control_chars(field, v))?;
    Some(v.to_owned())
}

/// A UTC time filter: `None` when empty; `2026-12-02T09:30` or RFC 3339, or an error named
/// `field`.
pub fn filter_time(errors: &mut FieldErrors, field: &str, raw: &str) -> Option<UnixMillis> {
    let v = raw.trim();
    if v.is_empty() {
        return None;
    }
    let parsed = parse_utc(v);
    if parsed.is_none() {
        errors.push(field, TIME_RULE);
    }
    parsed
}

/// Refuses a `from`–`to` window that is empty or backwards (the error names `to`).
pub fn check_window(errors: &mut FieldErrors, from: Option<UnixMillis>, to: Option<UnixMillis>) {
    if let (Some(f), Some(t)) = (from, to) {
        if f >= t {
            errors.push("to", "must be later than from");
        }
    }
}

/// A paging cursor (the id a page gave out): `None` when empty, else a positive id or
/// `rule` named `field` (pages call it `before`, the API `cursor`).
pub fn parse_cursor(field: &str, raw: &str, rule: &str) -> Result<Option<i64>, FieldError> {
    match raw.trim() {
        "" => Ok(None),
        v => v
            .parse::<i64>()
            .ok()
            .filter(|id| *id >= 1)
            .map(Some)
            .ok_or_else(|| FieldError::new(field, rule)),
    }
}

/// A page size named `limit`: `default` when empty, else a whole number from 1 to `max`.
pub fn parse_limit(raw: &str, max: i64, default: i64) -> Result<i64, FieldError> {
    match raw.trim() {
        "" => Ok(default),
        v => v
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                FieldError::new("limit", format!("must be a whole number from 1 to {max}"))
            }),
    }
}

/// Export encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// RFC 4180 CSV with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

impl ExportFormat {
    /// Parses `format`: `None` when empty, an error named `format` when neither encoding.
    pub fn parse_optional(raw: &str) -> Result<Option<Self>, FieldError> {
        match raw.trim() {
            "" => Ok(None),
            "csv" => Ok(Some(ExportFormat::Csv)),
            "jsonl" => Ok(Some(ExportFormat::Jsonl)),
            _ => Err(FieldError::new("format", "must be csv or jsonl")),
        }
    }

    /// Parses `format`, which must name one of the encodings.
    pub fn parse(raw: &str) -> Result<Self, FieldError> {
        Self::parse_optional(raw)?.ok_or_else(|| FieldError::new("format", "must be csv or jsonl"))
    }

    /// The media type of the download.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Csv => "text/csv; charset=utf-8",
            ExportFormat::Jsonl => "application/x-ndjson",
        }
    }

    /// The download's file name: `stem` with this encoding's extension.
    pub fn file_name(self, stem: &str) -> String {
        let ext = match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Jsonl => "jsonl",
        };
        format!("{stem}.{ext}")
    }

    /// What a download starts with: the CSV header row, nothing for JSON lines.
    pub fn head<R: Record>(self) -> &'static str {
        match self {
            ExportFormat::Csv => R::CSV_HEADER,
            ExportFormat::Jsonl => "",
        }
    }

    /// One record as a line in this encoding, newline included.
    pub fn line(self, record: &impl Record) -> String {
        match self {
            ExportFormat::Csv => csv_line(&record.csv_cells()),
            ExportFormat::Jsonl => jsonl_line(record),
        }
    }
}

/// One exported record: its JSON form is its `Serialize`, its CSV form its cells.
pub trait Record: serde::Serialize {
    /// The CSV header row, newline included: one column per cell.
    const CSV_HEADER: &'static str;

    /// The CSV cells, in header order, before quoting.
    fn csv_cells(&self) -> Vec<String>;
}

/// One JSON line, newline included.
pub fn jsonl_line(record: &impl serde::Serialize) -> String {
    // Records are plain structs of strings and numbers: encoding cannot fail, and an empty
    // object keeps the line count right if it ever did.
    let mut s = serde_json::to_string(record).unwrap_or_else(|_| "{}".to_owned());
    s.push('\n');
    s
}

/// One RFC 4180 CSV line (LF-terminated), every cell through [`csv_cell`].
pub fn csv_line(cells: &[String]) -> String {
    let mut line = cells
        .iter()
        .map(|c| csv_cell(c))
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}

/// What a spreadsheet may read as the start of a formula (OWASP's list: a tab or carriage
/// return first is stripped by some, leaving the formula).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV cell: text a spreadsheet would run as a formula (`FORMULA_STARTS` first) gets a
/// leading `'`; then RFC 4180 quoting when it holds a comma, quote or line break.
pub fn csv_cell(raw: &str) -> String {
    // A plain number (negative included) is data, not a formula.
    let defused = if raw.starts_with(FORMULA_STARTS) && raw.parse::<f64>().is_err() {
        format!("'{raw}")
    } else {
        raw.to_owned()
    };
    if defused.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", defused.replace('"', "\"\""))
    } else {
        defused
    }
}

/// Hands encoded chunks from a walk to its [`ExportStream`].
#[derive(Clone)]
pub struct ChunkSender(tokio::sync::mpsc::Sender<Result<String, std::io::Error>>);

impl ChunkSender {
    /// Sends one chunk; false when the reader went away (the walk should stop).
    pub async fn send(&self, chunk: String) -> bool {
        self.0.send(Ok(chunk)).await.is_ok()
    }
}

/// Runs `walk` on its own task, holding `permit` until it ends, and returns the chunks it
/// sends as a stream. A failed walk is logged (naming `what`) and ends the stream with an
/// error item, so a download breaks instead of looking complete.
pub fn spawn_walk<F, E>(
    what: &'static str,
    permit: tokio::sync::OwnedSemaphorePermit,
    walk: impl FnOnce(ChunkSender) -> F,
) -> ExportStream
where
    F: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    // A few chunks in flight: the walk runs ahead of a slow client only that far.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let walked = walk(ChunkSender(tx.clone()));
    tokio::spawn(async move {
        let _permit = permit;
        if let Err(e) = walked.await {
            tracing::error!(error = %e, export = what, "{what} export failed");
            let _ = tx
                .send(Err(std::io::Error::other(format!("{what} export failed"))))
                .await;
        }
    });
    ExportStream(rx)
}

/// Encoded export chunks, in order; an error item ends a broken walk.
pub struct ExportStream(tokio::sync::mpsc::Receiver<Result<String, std::io::Error>>);

impl futures_core::Stream for ExportStream {
    type Item = Result<String, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn csv_cells_defuse_formulas_and_quote_by_rfc_4180() {
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("=cmd()"), "'=cmd()");
        assert_eq!(csv_cell("+1+1"), "'+1+1");
        assert_eq!(csv_cell("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_cell("-2"), "-2");
        assert_eq!(csv_cell("-5"), "-5");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("\t=1+1"), "'\t=1+1");
        assert_eq!(csv_cell("\r=1+1"), "\"'\r=1+1\"");
    }

    /// Reads one cell back the way a spreadsheet's RFC 4180 reader would.
    fn unquote(cell: &str) -> String {
        match cell.strip_prefix('"').and_then(|c| c.strip_suffix('"')) {
            Some(inner) => inner.replace("\"\"", "\""),
            None => cell.to_owned(),
        }
    }

    proptest! {
        /// Whatever the text, the cell read back never starts a formula (unless it is a
        /// plain number), and drops nothing but the `'` it added.
        #[test]
        fn no_cell_reads_back_as_a_formula(raw in any::<String>()) {
            let cell = csv_cell(&raw);
            let back = unquote(&cell);
            // OWASP's list, written out here rather than taken from the code under test.
            let formula = back.starts_with(['=', '+', '-', '@', '\t', '\r']);
            prop_assert!(!formula || back.parse::<f64>().is_ok(), "{raw:?} → {cell:?}");
            prop_assert!(back == raw || back == format!("'{raw}"), "{raw:?} → {back:?}");
        }

        /// A cell holding a separator, quote or line break is quoted, and nothing inside
        /// the quotes ends it early: every quote inside is doubled.
        #[test]
        fn a_cell_never_spills_into_the_next(raw in "[a-z=,\"\r\n@+ -]{0,12}") {
            let cell = csv_cell(&raw);
            if raw.contains([',', '"', '\n', '\r']) {
                prop_assert!(cell.starts_with('"') && cell.ends_with('"') && cell.len() >= 2);
                let inner = &cell[1..cell.len() - 1];
                prop_assert!(inner.replace("\"\"", "").find('"').is_none(), "{cell:?}");
            } else {
                prop_assert!(!cell.contains('"'));
            }
        }
    }

    #[test]
    fn paging_and_format_errors_name_their_field() {
        assert_eq!(parse_cursor("before", "", "r"), Ok(None));
        assert_eq!(parse_cursor("before", " 42 ", "r"), Ok(Some(42)));
        for bad in ["0", "-1", "x"] {
            let e = parse_cursor("before", bad, "rule").unwrap_err();
            assert_eq!((e.field.as_str(), e.message.as_str()), ("before", "rule"));
        }
        assert_eq!(parse_limit("", 500, 50), Ok(50));
        assert_eq!(parse_limit("500", 500, 50), Ok(500));
        for bad in ["0", "501", "ten"] {
            let e = parse_limit(bad, 500, 50).unwrap_err();
            assert_eq!(e.field, "limit");
            assert_eq!(e.message, "must be a whole number from 1 to 500");
        }
        assert_eq!(ExportFormat::parse_optional(""), Ok(None));
        assert_eq!(ExportFormat::parse(" csv "), Ok(ExportFormat::Csv));
        assert_eq!(ExportFormat::parse("xml").unwrap_err().field, "format");
        assert_eq!(ExportFormat::parse("").unwrap_err().field, "format");
        assert_eq!(
            ExportFormat::Jsonl.file_name("headroom-audit"),
            "headroom-audit.jsonl"
        );
    }

    #[test]
    fn filters_name_each_broken_field() {
        let mut errors = FieldErrors::default();
        let long = "x".repeat(MAX_FILTER_CHARS + 1);
        assert_eq!(filter_text(&mut errors, "fleet", " a "), Some("a".into()));
        assert_eq!(filter_text(&mut errors, "fleet", &long), None);
        assert_eq!(filter_text(&mut errors, "actor", "a\u{0}b"), None);
        assert_eq!(filter_time(&mut errors, "from", "yesterday"), None);
        check_window(&mut errors, Some(2), Some(1));
        let fields: Vec<_> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["fleet", "actor", "from", "to"]);
        assert!(errors
            .for_field("from")
            .unwrap()
            .contains("2026-12-02T09:30"));
    }
}
