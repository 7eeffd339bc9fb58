//! GET /audit and GET /audit/export.

use actix_htmx::Htmx;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};

use super::forms::{AuditQuery, ParsedQuery};
use super::views;
use crate::audit;
use crate::auth::Principal;
use crate::db;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};

/// Entries per page.
const PAGE: i64 = 50;

/// The filtered, cursor-paged audit log; htmx filter changes get just the results.
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, WebError> {
    let (rows, errors, status) = match ParsedQuery::try_from(&*query) {
        Ok(parsed) => {
            let mut conn = state.pool.acquire().await?;
            // One extra row tells whether an older page exists.
            let mut rows =
                db::audit::page(&mut conn, &parsed.filter, parsed.before, PAGE + 1).await?;
            let more = rows.len() > PAGE as usize;
            rows.truncate(PAGE as usize);
            (Some((rows, more)), Default::default(), StatusCode::OK)
        }
        Err(errors) => (None, errors, StatusCode::UNPROCESSABLE_ENTITY),
    };
    let frame = Frame::load(&state, &principal, "Audit log", "audit").await;
    let results = || {
        views::results(
            &query,
            rows.as_ref().map(|(r, m)| (r.as_slice(), *m)),
            &errors,
        )
    };
    let full = || views::audit_page(&query, results());
    Ok(respond(&htmx, status, frame, full, results))
}

/// The filtered log as JSONL or CSV (all matching entries, oldest first).
pub async fn export(
    state: web::Data<AppState>,
    _principal: Principal,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, WebError> {
    let parsed = ParsedQuery::try_from(&*query).map_err(|e| WebError::BadRequest(e.to_string()))?;
    let csv = match query.format.as_str() {
        "" | "jsonl" => false,
        "csv" => true,
        _ => return Err(WebError::BadRequest("format: must be jsonl or csv".into())),
    };
    let mut conn = state.pool.acquire().await?;
    // Walk newest-first pages with the cursor, then reverse: bounded queries on any size.
    let mut all = Vec::new();
    let mut before = parsed.before;
    loop {
        let page = db::audit::page(&mut conn, &parsed.filter, before, 1000).await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        all.extend(page);
    }
    all.reverse();
    let mut body = String::new();
    if csv {
        body.push_str(audit::CSV_HEADER);
    }
    for row in &all {
        body.push_str(&if csv {
            audit::to_csv(row)
        } else {
            audit::to_jsonl(row)
        });
    }
    let (mime, ext) = if csv {
        ("text/csv; charset=utf-8", "csv")
    } else {
        ("application/x-ndjson", "jsonl")
    };
    Ok(HttpResponse::Ok()
        .content_type(mime)
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"headroom-audit.{ext}\""),
        ))
        .body(body))
}
