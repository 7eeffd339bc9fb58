//! GET /account and POST /account/password.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};

use super::views;
use crate::auth::users::{self, ChangeOrigin, PasswordChange};
use crate::auth::Via;
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::http::client::client_addr;
use crate::web::errors::{set_retry_after, status_of, WebError};
use crate::web::layout::after_write;
use crate::web::paths;
use crate::web::reply::{submitted, Reply};

/// The account page.
pub async fn show(reply: Reply) -> HttpResponse {
    account_page(&reply, StatusCode::OK, &FieldErrors::default(), None).await
}

/// The account page with `errors` at the password form, or `refused` saying why it was refused.
async fn account_page(
    reply: &Reply,
    status: StatusCode,
    errors: &FieldErrors,
    refused: Option<&str>,
) -> HttpResponse {
    let body = || views::account(&reply.principal, errors, refused);
    reply.page(status, "Your account", "", body).await
}

/// Changes the signed-in user's password; other sessions end. Wrong current passwords are
/// throttled (429) and a full hashing bound answers 503, both with `Retry-After`.
pub async fn change_password(
    reply: Reply,
    req: HttpRequest,
    form: web::Form<PasswordChange>,
) -> Result<HttpResponse, WebError> {
    let keep_session = match reply.principal.via {
        Via::Session { session_id, .. } => Some(session_id),
        Via::Token { .. } => None,
    };
    let addr = client_addr(&req, &reply.ctx().settings.trusted_proxies)
        .map_or_else(|| "unknown".to_owned(), |a| a.to_string());
    let origin = ChangeOrigin {
        keep_session,
        client_addr: &addr,
    };
    let result = match users::change_own_password(reply.ctx(), &reply.caller(), origin, &form).await
    {
        // Refused for now: the form comes back with the reason, the status and `Retry-After`.
        Err(e @ OpError::RetryLater { .. }) => {
            let none = FieldErrors::default();
            let mut res = account_page(&reply, status_of(&e), &none, Some(&e.to_string())).await;
            set_retry_after(&mut res, &e);
            return Ok(res);
        }
        other => other,
    };
    submitted(
        result,
        async |()| {
            let msg = "Password changed. Your other sessions were signed out.";
            reply
                .done(msg, after_write(&reply.htmx, paths::ACCOUNT))
                .await
        },
        async |errors| {
            Ok(account_page(&reply, StatusCode::UNPROCESSABLE_ENTITY, &errors, None).await)
        },
    )
    .await
}
