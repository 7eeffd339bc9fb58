//! Machine configs, templates and render over JSON.

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use super::json::ApiJson;
use super::machine_request::{MachineConfigRequest, MachineConfigUpdate};
use super::rules;
use crate::auth::Principal;
use crate::cloud_init::Secrets;
use crate::domain::clock::format_utc;
use crate::domain::machine::{FieldChange, MachineInput, MachineSpec};
use crate::machine_setup::configs::{self, ConfigVersion};
use crate::machine_setup::preview::{preview, PreviewRequest};
use crate::machine_setup::templates::Version;
use crate::machine_setup::{pins, templates};
use crate::state::AppState;

/// A machine config version.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MachineConfigJson {
    pub version: i64,
    pub author: String,
    /// RFC 3339, UTC.
    pub saved_at: String,
    #[serde(flatten)]
    pub spec: MachineSpec,
}

impl From<ConfigVersion> for MachineConfigJson {
    fn from(v: ConfigVersion) -> Self {
        Self {
            version: v.version,
            author: v.author,
            saved_at: format_utc(v.created_at),
            spec: v.spec,
        }
    }
}

/// A version with its field changes against the one before.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MachineConfigVersionJson {
    #[serde(flatten)]
    pub config: MachineConfigJson,
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<FieldChange>,
}

/// Every machine config (latest versions).
#[utoipa::path(get, path = "/api/v1/machine-configs", tag = "machine configs", responses((status = 200, body = Vec<MachineConfigJson>)))]
pub async fn list_configs(
    state: web::Data<AppState>,
    p: Principal,
) -> Result<Json<Vec<MachineConfigJson>>, ApiError> {
    Ok(Json(
        configs::list(&state.ctx, &p.caller())
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

/// Creates a machine config (operator).
#[utoipa::path(post, path = "/api/v1/machine-configs", tag = "machine configs", request_body = MachineConfigRequest,
    responses((status = 201, body = MachineConfigJson), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create_config(
    state: web::Data<AppState>,
    p: Principal,
    body: ApiJson<MachineConfigRequest>,
) -> Result<HttpResponse, ApiError> {
    let v = configs::create(&state.ctx, &p.caller(), &MachineInput::from(body.0)).await?;
    Ok(HttpResponse::Created().json(MachineConfigJson::from(v)))
}

/// The latest version of a machine config.
#[utoipa::path(get, path = "/api/v1/machine-configs/{name}", tag = "machine configs", responses((status = 200, body = MachineConfigJson), (status = 404, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn get_config(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<MachineConfigJson>, ApiError> {
    Ok(Json(
        configs::latest(&state.ctx, &p.caller(), &name)
            .await?
            .into(),
    ))
}

/// Saves a new version of a machine config (operator); an identical body makes none.
#[utoipa::path(put, path = "/api/v1/machine-configs/{name}", tag = "machine configs", request_body = MachineConfigUpdate,
    responses((status = 200, body = MachineConfigJson), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn put_config(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
    body: ApiJson<MachineConfigRequest>,
) -> Result<Json<MachineConfigJson>, ApiError> {
    let input = MachineInput::from(body.0);
    let (v, _) = configs::update(&state.ctx, &p.caller(), &name, &input).await?;
    Ok(Json(v.into()))
}

/// Every version of a machine config, newest first, with field changes.
#[utoipa::path(get, path = "/api/v1/machine-configs/{name}/versions", tag = "machine configs", responses((status = 200, body = Vec<MachineConfigVersionJson>)))]
pub async fn config_versions(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<Vec<MachineConfigVersionJson>>, ApiError> {
    let h = configs::history(&state.ctx, &p.caller(), &name).await?;
    Ok(Json(
        h.into_iter()
            .map(|(v, changes)| MachineConfigVersionJson {
                config: v.into(),
                changes,
            })
            .collect(),
    ))
}

/// The verdict of a pin pre-flight.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PinCheckJson {
    /// True when the downloaded tarball's sha256 equals the pin.
    pub ok: bool,
    /// `verified`, `mismatch` or `error`.
    pub verdict: String,
    /// A sentence for people; failures carry only generic reasons ("refused: private
    /// address", "could not connect", "timed out", "HTTP 404" …).
    pub message: String,
    /// Bytes downloaded; null when the download did not complete.
    pub bytes: Option<u64>,
    /// RFC 3339, UTC.
    pub checked_at: String,
    pub url: String,
    pub sha256: String,
}

/// Downloads the config's tarball through the outbound policy for pins and compares its
/// sha256 with the pin (operator); the verdict is remembered and audited like the page's check.
#[utoipa::path(post, path = "/api/v1/machine-configs/{name}/pin-check", tag = "machine configs",
    params(("name" = String, Path, description = "The machine config: an RFC 1123 label (a-z, 0-9, '-'; at most 63), not \"new\"")),
    responses((status = 200, body = PinCheckJson),
        (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
        (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn pin_check(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<PinCheckJson>, ApiError> {
    let outcome = pins::check(&state.ctx, &p.caller(), &name).await?;
    let ok = outcome.ok();
    let c = outcome.check;
    Ok(Json(PinCheckJson {
        ok,
        verdict: c.verdict.to_string(),
        message: c.message,
        bytes: outcome.bytes,
        checked_at: format_utc(c.checked_at),
        url: c.url,
        sha256: c.sha256.into(),
    }))
}

/// A template version.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TemplateJson {
    pub name: String,
    pub version: i64,
    pub author: String,
    pub saved_at: String,
    pub body: String,
}

impl From<Version> for TemplateJson {
    fn from(v: Version) -> Self {
        Self {
            name: v.name.to_string(),
            version: v.version,
            author: v.author,
            saved_at: format_utc(v.created_at),
            body: v.content,
        }
    }
}

/// A template to create or save.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateRequest {
    /// Required on create; on PUT it must be absent or equal to the path.
    #[serde(default)]
    #[schema(value_type = rules::DocumentNameRule, inline)]
    pub name: String,
    #[schema(value_type = rules::TemplateBodyRule, inline)]
    pub body: String,
}

/// The body of `PUT /api/v1/templates/{name}`: the template text; the path names it.
pub struct TemplateUpdate;

impl utoipa::PartialSchema for TemplateUpdate {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        super::machine_request::without_name(<TemplateRequest as utoipa::PartialSchema>::schema())
    }
}

impl utoipa::ToSchema for TemplateUpdate {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("TemplateUpdate")
    }
}

/// Every template (latest versions).
#[utoipa::path(get, path = "/api/v1/templates", tag = "templates", responses((status = 200, body = Vec<TemplateJson>)))]
pub async fn list_templates(
    state: web::Data<AppState>,
    p: Principal,
) -> Result<Json<Vec<TemplateJson>>, ApiError> {
    Ok(Json(
        templates::list(&state.ctx, &p.caller())
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

/// Creates a template (operator).
#[utoipa::path(post, path = "/api/v1/templates", tag = "templates", request_body = TemplateRequest,
    responses((status = 201, body = TemplateJson), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create_template(
    state: web::Data<AppState>,
    p: Principal,
    body: ApiJson<TemplateRequest>,
) -> Result<HttpResponse, ApiError> {
    let v = templates::create(&state.ctx, &p.caller(), &body.name, &body.body).await?;
    Ok(HttpResponse::Created().json(TemplateJson::from(v)))
}

/// The latest version of a template.
#[utoipa::path(get, path = "/api/v1/templates/{name}", tag = "templates", responses((status = 200, body = TemplateJson)))]
pub async fn get_template(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<TemplateJson>, ApiError> {
    Ok(Json(
        templates::latest(&state.ctx, &p.caller(), &name)
            .await?
            .into(),
    ))
}

/// Saves a new version of a template (operator).
#[utoipa::path(put, path = "/api/v1/templates/{name}", tag = "templates", request_body = TemplateUpdate,
    responses((status = 200, body = TemplateJson), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn put_template(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
    body: ApiJson<TemplateRequest>,
) -> Result<Json<TemplateJson>, ApiError> {
    if !body.name.is_empty() && body.name != *name {
        return Err(ApiError::invalid(
            crate::domain::FieldError::new(
                "name",
                "cannot be changed; create a new template instead",
            )
            .into(),
        ));
    }
    let (v, _) = templates::update(&state.ctx, &p.caller(), &name, &body.body).await?;
    Ok(Json(v.into()))
}

/// Every version of a template, newest first.
#[utoipa::path(get, path = "/api/v1/templates/{name}/versions", tag = "templates", responses((status = 200, body = Vec<TemplateJson>)))]
pub async fn template_versions(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<Vec<TemplateJson>>, ApiError> {
    Ok(Json(
        templates::history(&state.ctx, &p.caller(), &name)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

/// Render-time secrets.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsJson {
    #[schema(value_type = rules::SecretRule, inline)]
    pub mesh_preauth_key: Option<String>,
    #[schema(value_type = rules::SecretRule, inline)]
    pub tunnel_token: Option<String>,
}

/// What to render.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderRequestJson {
    #[schema(value_type = rules::DocumentNameRule, inline)]
    pub machine_config: String,
    /// Defaults to the config's template.
    #[serde(default)]
    #[schema(value_type = rules::TemplateChoiceRule, inline)]
    pub template: Option<String>,
    #[serde(default)]
    pub secrets: SecretsJson,
}

/// One validation finding.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FindingJson {
    /// error, warning or info.
    pub severity: String,
    pub message: String,
    pub line: Option<usize>,
}

/// A render: the payload as people see it (`«secret:NAME»` where each secret's value goes), its
/// size and sha256 (empty when a finding blocks it), and the findings.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RenderResponse {
    pub ok: bool,
    pub payload: String,
    pub size_bytes: usize,
    pub sha256: String,
    pub findings: Vec<FindingJson>,
}

/// Renders and validates a template for a machine config (operator). Secrets are used for
/// this render only and appear as `«secret:mesh_preauth_key»` / `«secret:tunnel_token»`.
#[utoipa::path(post, path = "/api/v1/render", tag = "templates", request_body = RenderRequestJson,
    responses((status = 200, body = RenderResponse), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn render(
    state: web::Data<AppState>,
    p: Principal,
    body: ApiJson<RenderRequestJson>,
) -> Result<Json<RenderResponse>, ApiError> {
    let secrets = Secrets::parse(
        body.secrets.mesh_preauth_key.as_deref(),
        body.secrets.tunnel_token.as_deref(),
    )
    .map_err(|e| {
        ApiError::invalid(crate::domain::FieldErrors(
            e.0.into_iter()
                .map(|f| crate::domain::FieldError::new(format!("secrets.{}", f.field), f.message))
                .collect(),
        ))
    })?;
    let result = preview(
        &state.ctx,
        &p.caller(),
        &PreviewRequest {
            machine_config: &body.machine_config,
            template: body.template.as_deref(),
            body: None,
            secrets: &secrets,
        },
    )
    .await?;
    let r = result.rendered;
    Ok(Json(RenderResponse {
        ok: r.ok,
        payload: r.shown,
        size_bytes: r.size_bytes,
        sha256: r.sha256,
        findings: r
            .findings
            .into_iter()
            .map(|f| FindingJson {
                severity: f.severity.as_str().into(),
                message: f.message,
                line: f.line,
            })
            .collect(),
    }))
}
