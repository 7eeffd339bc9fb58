//! GET /audit and GET /audit/export.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::forms::AuditQuery;
use super::views;
use crate::audit;
use crate::export::ExportFormat;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};
use crate::web::reply::Reply;

/// Entries per page.
const PAGE: i64 = 50;

/// The filtered, cursor-paged audit log; htmx filter changes get just the results.
pub async fn list(reply: Reply, query: web::Query<AuditQuery>) -> Result<HttpResponse, WebError> {
    let (rows, errors, status) = match query.search(PAGE) {
        Ok(search) => {
            let page = audit::search(reply.ctx(), &reply.caller(), &search).await?;
            let more = page.next_cursor.is_some();
            (
                Some((page.entries, more)),
                Default::default(),
                StatusCode::OK,
            )
        }
        Err(errors) => (None, errors, StatusCode::UNPROCESSABLE_ENTITY),
    };
    let frame = Frame::load(&reply.state, &reply.principal, "Audit log", "audit").await;
    let results = || {
        views::results(
            &query,
            rows.as_ref().map(|(r, m)| (r.as_slice(), *m)),
            &errors,
        )
    };
    let full = || views::audit_page(&query, results());
    Ok(respond(&reply.htmx, status, frame, full, results))
}

/// The filtered log as JSONL or CSV, oldest first, streamed as `audit::export` walks it; a
/// client that goes away stops the walk.
pub async fn export(reply: Reply, query: web::Query<AuditQuery>) -> Result<HttpResponse, WebError> {
    let search = query.search(PAGE)?;
    // Like the history export link, no format means JSON lines.
    let format = ExportFormat::parse_optional(&query.format)?.unwrap_or(ExportFormat::Jsonl);
    let stream = audit::export_stream(reply.ctx(), &reply.caller(), search.filter, format)?;
    Ok(crate::http::stream::download(
        format.content_type(),
        &format.file_name(audit::FILE_STEM),
        stream,
    ))
}
