//! GET/POST /api/v1/users (admin).

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use super::json::ApiJson;
use crate::auth::accounts::{self, NewUserInput};
use crate::auth::Principal;
use crate::db::users::User;
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
            username: u.username.clone(),
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
    pub username: String,
    /// viewer, operator, approver or admin.
    pub role: String,
    /// 12 to 1,024 characters.
    pub password: String,
}

/// Every user.
#[utoipa::path(get, path = "/api/v1/users", tag = "accounts",
    responses((status = 200, body = Vec<UserJson>), (status = 403, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<Json<Vec<UserJson>>, ApiError> {
    let users = accounts::list_users(&state.pool, &principal.caller()).await?;
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
    let user =
        accounts::create_user(&state.pool, &principal.caller(), state.clock.now(), &input).await?;
    Ok(HttpResponse::Created().json(UserJson::from(&user)))
}
