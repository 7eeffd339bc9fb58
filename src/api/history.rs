//! GET /api/v1/provisions/export: the provision history as CSV or JSONL, filtered like the
//! history page and `GET /api/v1/provisions`, newest first, streamed through the same export
//! walk as the page.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::errors::ApiError;
use super::query::query_params;
use crate::auth::Principal;
use crate::export::ExportFormat;
use crate::provisioning::history::{self, FilterInput};
use crate::state::AppState;

query_params! {
    /// The query string, as submitted; empty filters mean "any".
    #[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
    #[serde(default)]
    #[into_params(parameter_in = Query)]
    pub struct ProvisionExportParams {
        /// `csv` or `jsonl`.
        #[param(pattern = "^(csv|jsonl)$")]
        pub format: String,
        /// Exact fleet name.
        pub fleet: @filter_text,
        /// Exact machine config name.
        pub machine_config: @filter_text,
        /// A request state.
        #[param(
            pattern = "^(pending_approval|approved|executing|succeeded|failed|rejected|expired|cancelled|superseded)?$"
        )]
        pub state: String,
        /// Exact requester username.
        pub requester: @filter_text,
        /// Requests this user approved.
        pub approver: @filter_text,
        /// Created at or after, UTC (`2026-12-02T09:30` or RFC 3339).
        pub from: @utc_bound,
        /// Created before, UTC; later than `from`.
        pub to: @utc_bound,
    }
}

/// Every provision request matching the filters (viewer and up), newest first, as CSV (with
/// a header row; formula-like cells prefixed with `'`) or JSONL.
#[utoipa::path(get, path = "/api/v1/provisions/export", tag = "provisions", params(ProvisionExportParams),
    responses((status = 200, content_type = "text/csv", description = "`text/csv` or `application/x-ndjson`, one request per line"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn export(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ProvisionExportParams>,
) -> Result<HttpResponse, ApiError> {
    let q = &*query;
    let filter = history::parse_filter(&FilterInput {
        fleet: &q.fleet,
        machine_config: &q.machine_config,
        state: &q.state,
        requester: &q.requester,
        approver: &q.approver,
        from: &q.from,
        to: &q.to,
    });
    let format = ExportFormat::parse(&q.format);
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
