//! Audit filters as submitted in the query string.

use serde::Deserialize;

use crate::db::audit::AuditFilter;
use crate::domain::clock::parse_utc;
use crate::domain::field_error::reject_control_chars;
use crate::domain::FieldErrors;

/// Raw filter fields; empty means "any".
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    pub actor: String,
    pub action: String,
    pub target: String,
    pub from: String,
    pub to: String,
    /// Cursor: show entries with ids below this.
    pub before: String,
    /// Export encoding.
    pub format: String,
}

/// Parsed query: filter and cursor.
#[derive(Debug, Clone, Default)]
pub struct ParsedQuery {
    pub filter: AuditFilter,
    pub before: Option<i64>,
}

fn text(errors: &mut FieldErrors, field: &str, raw: &str) -> Option<String> {
    let v = raw.trim();
    if v.is_empty() {
        return None;
    }
    if v.len() > 200 {
        errors.push(field, "must be at most 200 characters");
        return None;
    }
    errors.check(reject_control_chars(field, v))?;
    Some(v.to_owned())
}

fn time(errors: &mut FieldErrors, field: &str, raw: &str) -> Option<i64> {
    let v = raw.trim();
    if v.is_empty() {
        return None;
    }
    let parsed = parse_utc(v);
    if parsed.is_none() {
        errors.push(field, "must be a time like 2026-12-02T09:30 (UTC)");
    }
    parsed
}

impl TryFrom<&AuditQuery> for ParsedQuery {
    type Error = FieldErrors;

    fn try_from(q: &AuditQuery) -> Result<Self, FieldErrors> {
        let mut errors = FieldErrors::default();
        let filter = AuditFilter {
            actor: text(&mut errors, "actor", &q.actor),
            action: text(&mut errors, "action", &q.action),
            target: text(&mut errors, "target", &q.target),
            from: time(&mut errors, "from", &q.from),
            to: time(&mut errors, "to", &q.to),
        };
        let before = match q.before.trim() {
            "" => None,
            raw => match raw.parse::<i64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    errors.push("before", "must be a positive entry id");
                    None
                }
            },
        };
        if let (Some(f), Some(t)) = (filter.from, filter.to) {
            if f >= t {
                errors.push("to", "must be later than from");
            }
        }
        if errors.is_empty() {
            Ok(ParsedQuery { filter, before })
        } else {
            Err(errors)
        }
    }
}
