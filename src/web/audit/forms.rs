//! Audit filters as submitted in the query string.

use serde::Deserialize;

use crate::audit;
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
    /// Cursor: the last entry of the previous page; this page shows what follows it in the
    /// page's order (id order unfiltered, time order with a filter or a time bound).
    pub before: String,
    /// Export encoding.
    pub format: String,
}

impl AuditQuery {
    /// The search this query asks for, `page` entries at a time, by the same rules as the API
    /// (`audit::Search::parse`); the page calls its cursor `before`.
    pub fn search(&self, page: i64) -> Result<audit::Search, FieldErrors> {
        let limit = page.to_string();
        audit::Search::parse(&audit::SearchInput {
            actor: &self.actor,
            action: &self.action,
            target: &self.target,
            from: &self.from,
            to: &self.to,
            cursor: &self.before,
            limit: &limit,
        })
        .map_err(|errors| {
            FieldErrors(
                errors
                    .0
                    .into_iter()
                    .map(|mut e| {
                        if e.field == "cursor" {
                            e.field = "before".into();
                        }
                        e
                    })
                    .collect(),
            )
        })
    }
}
