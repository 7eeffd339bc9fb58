//! API token administration handlers.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::auth::tokens::{self, NewTokenInput};
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::web::errors::WebError;
use crate::web::reply::{submitted, Reply};
use crate::web::{paths, see_other};

/// The token page: `created` is a new token's secret, shown this once; `draft` and `errors`
/// fill the create form.
async fn page(
    reply: &Reply,
    status: StatusCode,
    created: Option<&str>,
    draft: &NewTokenInput,
    errors: &FieldErrors,
) -> Result<HttpResponse, WebError> {
    let principal = &reply.principal;
    let (tokens, users) = tokens::overview(&reply.state.ctx, &principal.caller()).await?;
    let body = || views::tokens_page(principal, &tokens, &users, created, draft, errors);
    Ok(reply.page(status, "API tokens", "tokens", body).await)
}

/// GET /tokens
pub async fn list(reply: Reply) -> Result<HttpResponse, WebError> {
    let blank = NewTokenInput::default();
    page(
        &reply,
        StatusCode::OK,
        None,
        &blank,
        &FieldErrors::default(),
    )
    .await
}

/// The create-token form as submitted.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreateForm {
    username: String,
    label: String,
}

/// POST /tokens: answers with the page showing the new token once (no redirect: the secret
/// must not travel through a flash message stored in the database).
pub async fn create(reply: Reply, form: web::Form<CreateForm>) -> Result<HttpResponse, WebError> {
    let input = NewTokenInput {
        username: form.username.clone(),
        label: form.label.clone(),
    };
    submitted(
        tokens::create_token(reply.ctx(), &reply.caller(), &input).await,
        async |(token, _)| {
            let blank = NewTokenInput::default();
            let none = FieldErrors::default();
            page(&reply, StatusCode::CREATED, Some(&token), &blank, &none).await
        },
        async |errors| {
            page(
                &reply,
                StatusCode::UNPROCESSABLE_ENTITY,
                None,
                &input,
                &errors,
            )
            .await
        },
    )
    .await
}

/// POST /tokens/{id}/revoke
pub async fn revoke(reply: Reply, path: web::Path<String>) -> Result<HttpResponse, WebError> {
    let id: i64 = path.parse().map_err(|_| {
        OpError::NotFound(format!(
            "token {:?} (the id must be a number)",
            path.chars().take(40).collect::<String>()
        ))
    })?;
    let token = tokens::revoke_token(reply.ctx(), &reply.caller(), id).await?;
    reply
        .done(
            &format!("Token {} ({}) revoked.", token.id, token.label),
            see_other(paths::TOKENS),
        )
        .await
}
