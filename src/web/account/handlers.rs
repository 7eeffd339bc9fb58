//! GET /account and POST /account/password.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::views;
use crate::auth::accounts::{self, AccountError, PasswordChange};
use crate::auth::{Principal, Via};
use crate::domain::FieldErrors;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};
use crate::web::{flash, paths, see_other};

/// The account page.
pub async fn show(state: web::Data<AppState>, principal: Principal, htmx: Htmx) -> HttpResponse {
    let frame = Frame::load(&state, &principal, "Your account", "").await;
    let body = || views::account(&principal, &FieldErrors::default());
    respond(&htmx, StatusCode::OK, frame, body, body)
}

/// Changes the signed-in user's password; other sessions end.
pub async fn change_password(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<PasswordChange>,
) -> Result<HttpResponse, WebError> {
    let keep = match principal.via {
        Via::Session { session_id, .. } => Some(session_id),
        Via::Token { .. } => None,
    };
    match accounts::change_own_password(
        &state.pool,
        &principal.caller(),
        state.clock.now(),
        keep,
        &form,
    )
    .await
    {
        Ok(()) => {
            flash(
                &state,
                &principal,
                "Password changed. Your other sessions were signed out.",
            )
            .await;
            if htmx.is_htmx {
                htmx.redirect(paths::ACCOUNT);
                return Ok(HttpResponse::Ok().finish());
            }
            Ok(see_other(paths::ACCOUNT))
        }
        Err(AccountError::Invalid(errors)) => {
            let frame = Frame::load(&state, &principal, "Your account", "").await;
            let body = || views::account(&principal, &errors);
            Ok(respond(
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                frame,
                body,
                body,
            ))
        }
        Err(e) => Err(e.into()),
    }
}
