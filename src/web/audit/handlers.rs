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

/// The filtered log as JSONL or CSV, oldest first, streamed as `audit::export` walks it; a
/// client that goes away stops the walk.
pub async fn export(
    state: web::Data<AppState>,
    _principal: Principal,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, WebError> {
    let parsed = ParsedQuery::try_from(&*query).map_err(|e| WebError::BadRequest(e.to_string()))?;
    let format = match query.format.as_str() {
        "" | "jsonl" => audit::ExportFormat::Jsonl,
        "csv" => audit::ExportFormat::Csv,
        _ => return Err(WebError::BadRequest("format: must be jsonl or csv".into())),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<web::Bytes, std::io::Error>>(4);
    let pool = state.pool.clone();
    let filter = parsed.filter;
    actix_web::rt::spawn(async move {
        let sink = tx.clone();
        let walked = audit::export(&pool, &filter, format, async move |chunk: String| {
            sink.send(Ok(web::Bytes::from(chunk))).await.is_ok()
        })
        .await;
        if let Err(e) = walked {
            tracing::error!(error = %e, "audit export failed");
            let _ = tx
                .send(Err(std::io::Error::other("audit export failed")))
                .await;
        }
    });
    let csv = format == audit::ExportFormat::Csv;
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
        .streaming(ChannelBody(rx)))
}

/// A response body fed by a channel.
struct ChannelBody(tokio::sync::mpsc::Receiver<Result<web::Bytes, std::io::Error>>);

impl futures_core::Stream for ChannelBody {
    type Item = Result<web::Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
