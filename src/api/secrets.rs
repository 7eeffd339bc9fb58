//! The secrets the server declares, by name: what fleets may refer to. Never a value, and not
//! the variable or path either (`headroom settings` shows those to whoever runs the server).

use actix_web::web::{self, Json};
use serde::Serialize;

use super::errors::ApiError;
use crate::auth::Principal;
use crate::fleets;
use crate::state::AppState;

/// One declared secret.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SecretJson {
    /// The name fleets use (`secrets.mesh_preauth_key: NAME`).
    pub name: String,
    /// `env` or `file`.
    pub source_kind: String,
    /// Whether it can be read now and holds an allowed value.
    pub readable: bool,
}

/// Every declared secret; all fit on one page, so `next_cursor` is always null.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SecretPageJson {
    pub items: Vec<SecretJson>,
    pub next_cursor: Option<String>,
}

/// The secrets the server declares (viewer).
#[utoipa::path(get, path = "/api/v1/secrets", tag = "fleets", responses((status = 200, body = SecretPageJson)))]
pub async fn list(
    state: web::Data<AppState>,
    p: Principal,
) -> Result<Json<SecretPageJson>, ApiError> {
    let items = fleets::secrets::declared(&state.ctx, &p.caller())?
        .into_iter()
        .map(|d| SecretJson {
            name: d.name,
            source_kind: d.source_kind.to_owned(),
            readable: d.readable,
        })
        .collect();
    Ok(Json(SecretPageJson {
        items,
        next_cursor: None,
    }))
}
