//! GET /account and POST /account/password.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};

use super::views;
use crate::auth::users::{self, ChangeOrigin, PasswordChange};
use crate::auth::{Principal, Via};
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::http::client::client_addr;
use crate::state::AppState;
use crate::web::errors::{set_retry_after, status_of, WebError};
use crate::web::layout::{after_write, respond, Frame};
use crate::web::{flash, paths};

/// The account page.
pub async fn show(state: web::Data<AppState>, principal: Principal, htmx: Htmx) -> HttpResponse {
    let frame = Frame::load(&state, &principal, "Your account", "").await;
    let body = || views::account(&principal, &FieldErrors::default(), None);
    respond(&htmx, StatusCode::OK, frame, body, body)
}

/// Changes the signed-in user's password; other sessions end. Wrong current passwords are
/// throttled (429) and a full hashing bound answers 503, both with `Retry-After`.
pub async fn change_password(
    state: web::Data<AppState>,
    req: HttpRequest,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<PasswordChange>,
) -> Result<HttpResponse, WebError> {
    let keep_session = match principal.via {
        Via::Session { session_id, .. } => Some(session_id),
        Via::Token { .. } => None,
    };
    let addr = client_addr(&req, &state.ctx.settings.trusted_proxies)
        .map_or_else(|| "unknown".to_owned(), |a| a.to_string());
    let origin = ChangeOrigin {
        keep_session,
        client_addr: &addr,
    };
    match users::change_own_password(&state.ctx, &principal.caller(), origin, &form).await {
        Ok(()) => {
            flash(
                &state,
                &principal,
                "Password changed. Your other sessions were signed out.",
            )
            .await;
            Ok(after_write(&htmx, paths::ACCOUNT))
        }
        Err(OpError::Invalid(errors)) => {
            let frame = Frame::load(&state, &principal, "Your account", "").await;
            let body = || views::account(&principal, &errors, None);
            Ok(respond(
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                frame,
                body,
                body,
            ))
        }
        // Refused for now: the form comes back with the reason, the status and `Retry-After`.
        Err(e @ OpError::RetryLater { .. }) => {
            let message = e.to_string();
            let frame = Frame::load(&state, &principal, "Your account", "").await;
            let body = || views::account(&principal, &FieldErrors::default(), Some(&message));
            let mut res = respond(&htmx, status_of(&e), frame, body, body);
            set_retry_after(&mut res, &e);
            Ok(res)
        }
        Err(e) => Err(e.into()),
    }
}
