//! GET /api/v1/audit: the audit page's filters and cursor paging as JSON, or every matching
//! entry streamed as JSONL or CSV through the same export walk as the page and the CLI.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use crate::audit::{self, Entry, Search, SearchInput};
use crate::auth::Principal;
use crate::domain::clock::format_utc;
use crate::export::params::query_params;
use crate::export::ExportFormat;
use crate::state::AppState;

query_params! {
    /// The query string, as submitted; empty means "any".
    #[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
    #[serde(default)]
    #[into_params(parameter_in = Query)]
    pub struct AuditParams {
        /// Exact actor name.
        pub actor: @filter_text,
        /// Exact action, or a prefix ending in `.` or `*` (`user.`).
        pub action: @filter_text,
        /// `kind` or `kind:id` (`user:alice`).
        pub target: @filter_text,
        /// Inclusive lower bound, UTC (`2026-12-02T09:30` or RFC 3339).
        pub from: @utc_bound,
        /// Exclusive upper bound, UTC; later than `from`.
        pub to: @utc_bound,
        /// The `next_cursor` of the previous page.
        pub cursor: @cursor,
        /// Entries per page, 1 to 500 (default 50).
        #[param(value_type = Option<i64>, minimum = 1, maximum = 500)]
        pub limit: String,
        /// `jsonl` or `csv`: stream every matching entry, oldest first, instead of a page.
        #[param(value_type = Option<String>, pattern = "^(jsonl|csv)?$")]
        pub format: String,
    }
}

/// One audit entry.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditEntryJson {
    pub id: i64,
    /// RFC 3339, UTC.
    pub at: String,
    /// A username, `system` or `anonymous`.
    pub actor: String,
    /// Dotted verb, e.g. `user.role_changed`.
    pub action: String,
    /// `kind:id`, e.g. `user:alice`.
    pub target: String,
    /// What changed (secrets never appear).
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
    /// This entry's link in the hash chain.
    pub hash: String,
    pub prev_hash: String,
}

impl From<&Entry> for AuditEntryJson {
    fn from(r: &Entry) -> Self {
        Self {
            id: r.id,
            at: format_utc(r.at),
            actor: r.actor.clone(),
            action: r.action.clone(),
            target: r.target.clone(),
            details: serde_json::from_str(&r.details).unwrap_or(serde_json::Value::Null),
            hash: r.hash.clone(),
            prev_hash: r.prev_hash.clone(),
        }
    }
}

/// A page of entries, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuditPageJson {
    pub items: Vec<AuditEntryJson>,
    /// Pass as `cursor` for the next (older) page; null on the last page.
    pub next_cursor: Option<String>,
}

/// The audit log (viewer and up), filtered and paged like the audit page; with `format` the
/// matching entries stream as JSONL or CSV.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit", params(AuditParams),
    responses((status = 200, body = AuditPageJson, description = "A page; with `format`, `application/x-ndjson` or `text/csv` instead"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<AuditParams>,
) -> Result<HttpResponse, ApiError> {
    let q = &*query;
    let format =
        ExportFormat::parse_optional(&q.format).map_err(|e| ApiError::invalid(e.into()))?;
    let search = Search::parse(&SearchInput {
        actor: &q.actor,
        action: &q.action,
        target: &q.target,
        from: &q.from,
        to: &q.to,
        cursor: &q.cursor,
        limit: &q.limit,
    })
    .map_err(ApiError::invalid)?;
    let Some(format) = format else {
        let page = audit::search(&state.ctx, &principal.caller(), &search).await?;
        return Ok(HttpResponse::Ok().json(AuditPageJson {
            items: page.entries.iter().map(AuditEntryJson::from).collect(),
            next_cursor: page.next_cursor.map(|c| c.to_string()),
        }));
    };
    let stream = audit::export_stream(&state.ctx, &principal.caller(), search.filter, format)?;
    Ok(crate::http::stream::download(
        format.content_type(),
        &format.file_name(audit::FILE_STEM),
        stream,
    ))
}
