//! GET/POST /api/v1/users (admin).

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use super::json::ApiJson;
use super::rules;
use crate::auth::users::User;
use crate::auth::users::{self, NewUserInput};
use crate::auth::Principal;
use crate::domain::clock::format_utc;
use crate::state::AppState;

/// A user as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UserJson {
    pub username: String,
    pub role: String,
    pub disabled: bool,
    /// RFC 3339, UTC.
    pub created_at: String,
}

impl From<&User> for UserJson {
    fn from(u: &User) -> Self {
        Self {
            username: u.username.to_string(),
            role: u.role.to_string(),
            disabled: u.disabled,
            created_at: format_utc(u.created_at),
        }
    }
}

/// A user to create. Unknown fields are refused so typos do not pass silently.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUserRequest {
    #[schema(value_type = rules::UsernameRule, inline)]
    pub username: String,
    /// viewer, operator, approver or admin.
    #[schema(value_type = rules::RoleRule, inline)]
    pub role: String,
    /// 12 to 1,024 characters.
    #[schema(value_type = rules::PasswordRule, inline)]
    pub password: String,
}

/// A change to a user: either or both of role and disabled.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserPatchRequest {
    /// The new role; the last active admin cannot be demoted.
    #[serde(default)]
    #[schema(value_type = Option<rules::RoleRule>, inline)]
    pub role: Option<String>,
    /// Disabling ends the user's sessions and stops their tokens; the last active admin cannot
    /// be disabled.
    #[serde(default)]
    pub disabled: Option<bool>,
}

/// Every user.
#[utoipa::path(get, path = "/api/v1/users", tag = "accounts",
    responses((status = 200, body = Vec<UserJson>), (status = 403, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<Json<Vec<UserJson>>, ApiError> {
    let users = users::list_users(&state.ctx, &principal.caller()).await?;
    Ok(Json(users.iter().map(UserJson::from).collect()))
}

/// Creates a user.
#[utoipa::path(post, path = "/api/v1/users", tag = "accounts", request_body = CreateUserRequest,
    responses((status = 201, body = UserJson),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 400, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    body: ApiJson<CreateUserRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let input = NewUserInput {
        username: body.username,
        role: body.role,
        password: body.password,
    };
    let user = users::create_user(&state.ctx, &principal.caller(), &input).await?;
    Ok(HttpResponse::Created().json(UserJson::from(&user)))
}

/// Changes a user's role and/or disables or re-enables them (admin), as the users page does;
/// the role is checked before anything is written.
#[utoipa::path(patch, path = "/api/v1/users/{username}", tag = "accounts", request_body = UserPatchRequest,
    params(("username" = String, Path, description = "An existing user", pattern = "^[a-z0-9][a-z0-9._-]*$", max_length = 64)),
    responses((status = 200, body = UserJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn patch(
    state: web::Data<AppState>,
    principal: Principal,
    username: web::Path<String>,
    body: ApiJson<UserPatchRequest>,
) -> Result<Json<UserJson>, ApiError> {
    let change = users::UserChange {
        role: body.role.clone(),
        disabled: body.disabled,
    };
    let user = users::update(&state.ctx, &principal.caller(), &username, &change).await?;
    Ok(Json(UserJson::from(&user)))
}
