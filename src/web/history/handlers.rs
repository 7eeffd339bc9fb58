//! GET /provisions (the history list) and GET /provisions/export.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::domain::{FieldErrors, Role};
use crate::export::{self, ExportFormat};
use crate::provisioning::history::{self, FilterQuery};
use crate::provisioning::requests;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};
use crate::web::reply::Reply;

/// Requests per page.
const PAGE: u32 = 50;

/// The query string as submitted; empty means any.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct HistoryQuery {
    #[serde(flatten)]
    pub filter: FilterQuery,
    /// Cursor: the last request of the previous page; this page shows what follows it in the
    /// page's order (id order, or time order with a time bound).
    pub before: String,
    /// Export encoding.
    pub format: String,
}

impl HistoryQuery {
    fn cursor(&self) -> Result<Option<i64>, FieldErrors> {
        export::parse_cursor(
            "before",
            &self.before,
            "must be a request id this page gave out",
        )
        .map_err(FieldErrors::from)
    }
}

/// The filtered, newest-first list; htmx filter changes get just the results. Bad filters
/// re-render the form with 422 and each message beside its field.
pub async fn list(reply: Reply, query: web::Query<HistoryQuery>) -> Result<HttpResponse, WebError> {
    let parsed = history::parse_filter(&query.filter).and_then(|f| Ok((f, query.cursor()?)));
    let (rows, errors, status) = match parsed {
        Ok((filter, cursor)) => {
            let (items, next) =
                requests::list(reply.ctx(), &reply.caller(), &filter, cursor, PAGE).await?;
            (Some((items, next)), FieldErrors::default(), StatusCode::OK)
        }
        Err(errors) => (None, errors, StatusCode::UNPROCESSABLE_ENTITY),
    };
    let frame = Frame::load(
        &reply.state,
        &reply.principal,
        "Provision history",
        "provisions",
    )
    .await;
    let results = || {
        views::results(
            &query,
            rows.as_ref().map(|(r, n)| (r.as_slice(), *n)),
            &errors,
        )
    };
    let can_request = reply.principal.role.includes(Role::Operator);
    let full = || views::history_page(&query, &errors, can_request, results());
    Ok(respond(&reply.htmx, status, frame, full, results))
}

/// Every matching request as CSV or JSONL, newest first, streamed as the history is walked.
pub async fn export(
    reply: Reply,
    query: web::Query<HistoryQuery>,
) -> Result<HttpResponse, WebError> {
    let filter = history::parse_filter(&query.filter);
    // Like the audit page's export link, no format means JSON lines (the API asks for one).
    let format =
        ExportFormat::parse_optional(&query.format).map(|f| f.unwrap_or(ExportFormat::Jsonl));
    let (filter, format) = match (filter, format) {
        (Ok(f), Ok(fmt)) => (f, fmt),
        (f, fmt) => {
            let mut all = f.err().unwrap_or_default();
            all.0.extend(fmt.err());
            return Err(all.into());
        }
    };
    let stream = history::export(reply.ctx(), &reply.caller(), &filter, format).await?;
    Ok(crate::http::stream::download(
        format.content_type(),
        &format.file_name(history::FILE_STEM),
        stream,
    ))
}
