//! GET /api/v1/me

use actix_web::web::Json;
use serde::Serialize;

use crate::auth::Principal;

/// Who the caller is.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MeResponse {
    pub username: String,
    /// viewer, operator, approver or admin.
    pub role: String,
}

/// The authenticated caller.
#[utoipa::path(get, path = "/api/v1/me", tag = "accounts",
    responses((status = 200, body = MeResponse), (status = 401, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn me(principal: Principal) -> Json<MeResponse> {
    Json(MeResponse {
        username: principal.username,
        role: principal.role.to_string(),
    })
}
