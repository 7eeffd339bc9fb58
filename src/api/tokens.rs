//! GET/POST /api/v1/tokens and POST /api/v1/tokens/{id}/revoke (admin). Token values appear
//! only in the answer that creates them.

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use super::json::ApiJson;
use super::rules;
use crate::auth::tokens::Token;
use crate::auth::tokens::{self, NewTokenInput};
use crate::auth::Principal;
use crate::domain::clock::format_utc;
use crate::domain::FieldError;
use crate::state::AppState;

/// An API token as listed: never its value.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TokenJson {
    pub id: i64,
    /// The user the token acts as (with that user's role).
    pub username: String,
    pub label: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// Who created it.
    pub created_by: String,
    /// RFC 3339, UTC; null when never used.
    pub last_used_at: Option<String>,
    /// RFC 3339, UTC; null while live.
    pub revoked_at: Option<String>,
}

impl From<&Token> for TokenJson {
    fn from(t: &Token) -> Self {
        Self {
            id: t.id,
            username: t.username.to_string(),
            label: t.label.clone(),
            created_at: format_utc(t.created_at),
            created_by: t.created_by.clone(),
            last_used_at: t.last_used_at.map(format_utc),
            revoked_at: t.revoked_at.map(format_utc),
        }
    }
}

/// A newly created token: the only answer that carries its value.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CreatedTokenJson {
    pub id: i64,
    /// `Authorization: Bearer <token>`; shown once, stored only as a sha256.
    pub token: String,
    pub username: String,
    pub label: String,
    /// RFC 3339, UTC.
    pub created_at: String,
}

/// A token to create.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// An existing, enabled user the token acts as.
    #[schema(value_type = rules::UsernameRule, inline)]
    pub username: String,
    #[schema(value_type = rules::TokenLabelRule, inline)]
    pub label: String,
}

/// Every token, newest first, without values.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "accounts",
    responses((status = 200, body = Vec<TokenJson>), (status = 403, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<Json<Vec<TokenJson>>, ApiError> {
    let tokens = tokens::list_tokens(&state.ctx, &principal.caller()).await?;
    Ok(Json(tokens.iter().map(TokenJson::from).collect()))
}

/// Creates a token acting as a user (admin).
#[utoipa::path(post, path = "/api/v1/tokens", tag = "accounts", request_body = TokenRequest,
    responses((status = 201, body = CreatedTokenJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    body: ApiJson<TokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let input = NewTokenInput {
        username: body.username,
        label: body.label,
    };
    let (token, row) = tokens::create_token(&state.ctx, &principal.caller(), &input).await?;
    Ok(HttpResponse::Created().json(CreatedTokenJson {
        id: row.id,
        token,
        username: row.username.into(),
        label: row.label,
        created_at: format_utc(row.created_at),
    }))
}

/// Revokes a token (admin); revoking a revoked token changes nothing.
#[utoipa::path(post, path = "/api/v1/tokens/{id}/revoke", tag = "accounts",
    params(("id" = i64, Path, description = "The token's id", minimum = 1)),
    responses((status = 200, body = TokenJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn revoke(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
) -> Result<Json<TokenJson>, ApiError> {
    // Parsed here, not by the path extractor, so a bad id is a 422 naming `id`.
    let id = id
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ApiError::invalid(FieldError::new("id", "must be a positive token id").into())
        })?;
    let row = tokens::revoke_token(&state.ctx, &principal.caller(), id).await?;
    Ok(Json(TokenJson::from(&row)))
}
