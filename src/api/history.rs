//! GET /api/v1/provisions/export: the provision history as CSV or JSONL, filtered like the
//! history page and `GET /api/v1/provisions`, newest first, streamed through the same export
//! walk as the page.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::errors::ApiError;
use crate::auth::Principal;
use crate::export::ExportFormat;
use crate::provisioning::history::{self, FilterQuery};
use crate::state::AppState;

/// The export's encoding, as submitted.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
pub struct ExportFormatParams {
    /// `csv` or `jsonl`.
    #[param(pattern = "^(csv|jsonl)$")]
    pub format: String,
}

/// Every provision request matching the filters (viewer and up), newest first, as CSV (with
/// a header row; formula-like cells prefixed with `'`) or JSONL.
#[utoipa::path(get, path = "/api/v1/provisions/export", tag = "provisions", params(FilterQuery, ExportFormatParams),
    responses((status = 200, content_type = "text/csv", description = "`text/csv` or `application/x-ndjson`, one request per line"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn export(
    state: web::Data<AppState>,
    principal: Principal,
    filters: web::Query<FilterQuery>,
    format: web::Query<ExportFormatParams>,
) -> Result<HttpResponse, ApiError> {
    let filter = history::parse_filter(&filters);
    let format = ExportFormat::parse(&format.format);
    let (filter, format) = match (filter, format) {
        (Ok(f), Ok(fmt)) => (f, fmt),
        (f, fmt) => {
            let mut all = f.err().unwrap_or_default();
            all.0.extend(fmt.err());
            return Err(ApiError::invalid(all));
        }
    };
    let stream = history::export(&state.ctx, &principal.caller(), &filter, format).await?;
    Ok(crate::http::stream::download(
        format.content_type(),
        &format.file_name(history::FILE_STEM),
        stream,
    ))
}
