//! POST /api/v1/provisions/{id}/machines/{idx}/destroy (approver): destroys the server of a
//! failed machine that headroom created. Never automatic; audited.

use actix_web::web::{self, Json};
use serde::Serialize;

use super::errors::ApiError;
use crate::auth::Principal;
use crate::domain::FieldError;
use crate::state::AppState;

/// The machine after its server was destroyed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DestroyedMachineJson {
    pub provision_id: i64,
    pub idx: u32,
    /// Always `destroyed`.
    pub status: String,
}

fn positive(field: &str, raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::invalid(FieldError::new(field, format!("must be {what}")).into()))
}

/// Destroys a failed machine's server (approver): only a failed machine of a finished
/// request, and only a server that carries the request's provision label at the provider.
#[utoipa::path(post, path = "/api/v1/provisions/{id}/machines/{idx}/destroy", tag = "provisioning",
    params(("id" = i64, Path, description = "The request's id", minimum = 1),
           ("idx" = u32, Path, description = "The machine's index in the plan, from 0", minimum = 0)),
    responses((status = 200, body = DestroyedMachineJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 409, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn destroy(
    state: web::Data<AppState>,
    principal: Principal,
    path: web::Path<(String, String)>,
) -> Result<Json<DestroyedMachineJson>, ApiError> {
    // Parsed here, not by the path extractor, so a bad value is a 422 naming its field.
    let (id, idx) = path.into_inner();
    let id = positive("id", &id, "a positive provision id")?;
    let idx = idx.trim().parse::<u32>().map_err(|_| {
        ApiError::invalid(FieldError::new("idx", "must be a machine index (0, 1, …)").into())
    })?;
    crate::provisioning::runner::destroy_machine(&state.ctx, &principal.caller(), id, idx).await?;
    Ok(Json(DestroyedMachineJson {
        provision_id: id,
        idx,
        status: crate::domain::MachineStatus::Destroyed.as_str().to_owned(),
    }))
}
