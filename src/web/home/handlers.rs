//! GET /

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::views;
use crate::audit;
use crate::auth::Principal;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};

/// The overview: who you are and the latest activity.
pub async fn show(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let recent = audit::search(&state.ctx, &principal.caller(), &audit::Search::latest(10))
        .await?
        .entries;
    let frame = Frame::load(&state, &principal, "Overview", "home").await;
    let body = || views::overview(&principal, &recent);
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}
