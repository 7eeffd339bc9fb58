//! Provision requests over JSON: list (filtered, cursor-paged), file, read, approve, reject,
//! cancel. Every handler parses, calls one `provisioning::requests` operation and answers.

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};

use super::audit::AuditEntryJson;
use super::errors::ApiError;
use super::json::{decode, ApiJson};
use crate::auth::Principal;
use crate::domain::clock::format_utc;
use crate::domain::provision::MachineRecord;
use crate::domain::provision::PlanHash;
use crate::domain::{FieldError, FieldErrors};
use crate::export;
use crate::export::params::query_params;
use crate::provisioning::history::{parse_filter, FilterQuery};
use crate::provisioning::{requests, NewRequest, Provision, ProvisionDetail};
use crate::state::AppState;

/// Requests per page when `limit` is not given.
const LIMIT_DEFAULT: i64 = 50;

/// One planned machine and how far it got.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProvisionMachineJson {
    /// Its server name (an RFC 1123 label).
    pub name: String,
    /// sha256 of the real payload (with the real secrets).
    pub sha256: String,
    pub size_bytes: usize,
    /// The provider's server id, once created.
    pub server_id: Option<i64>,
    /// `planned`, `creating`, `booting`, `created`, `failed` or `destroyed`.
    pub status: String,
    pub ipv4: Option<String>,
    /// Why it failed, in the provider's words (no secrets).
    pub error: Option<String>,
    /// When it was first seen as a member of its fleet; RFC 3339, UTC. A request with joins
    /// followed succeeds only once every machine has one.
    pub joined_at: Option<String>,
    /// The fleet member (raft node id) it joined as.
    pub member_id: Option<i64>,
}

/// What the plan creates and what it costs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlanJson {
    pub provider: String,
    pub location: String,
    pub server_type: String,
    pub image: String,
    /// `count × hourly_price`, decimal text with 4 places.
    pub hourly_cost: String,
    /// `count × monthly_price`, decimal text with 4 places.
    pub monthly_cost: String,
    /// ISO 4217 code of every price.
    pub currency: String,
    /// One machine's hourly price at the location, as the catalogue states it.
    pub hourly_price: String,
    /// One machine's monthly price at the location, as the catalogue states it.
    pub monthly_price: String,
}

/// A provision request.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProvisionJson {
    pub id: i64,
    /// `pending_approval`, `approved`, `executing`, `succeeded`, `failed`, `rejected`,
    /// `expired`, `cancelled` or `superseded`.
    pub state: String,
    /// Why it is in its state (rejection reason, failure, what superseded it); may be empty.
    pub state_reason: String,
    pub fleet: String,
    pub machine_config: String,
    pub config_version: i64,
    pub template: String,
    pub template_version: i64,
    pub requester: String,
    /// Who approved this plan, in order.
    pub approvers: Vec<String>,
    pub approvals_required: u32,
    pub count: u32,
    pub reason: String,
    /// What an approval binds to: send it back as `plan_hash` when approving.
    pub plan_hash: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// When the approval window (or, once approved, the run window) closes; RFC 3339, UTC.
    pub expires_at: String,
    pub approved_at: Option<String>,
    pub finished_at: Option<String>,
    pub machines: Vec<ProvisionMachineJson>,
    pub plan: PlanJson,
}

impl ProvisionJson {
    /// The request with its machines' progress (or, without rows yet, its plan's machines).
    fn new(p: &Provision, machines: Option<&[MachineRecord]>) -> Self {
        let machines = match machines {
            Some(rows) => rows
                .iter()
                .map(|m| ProvisionMachineJson {
                    name: m.name.clone(),
                    sha256: m.sha256.clone(),
                    size_bytes: m.size_bytes,
                    server_id: m.server_id,
                    status: m.status.as_str().to_owned(),
                    ipv4: m.ipv4.clone(),
                    error: m.error.clone(),
                    joined_at: m.joined_at.map(format_utc),
                    member_id: m.member_id,
                })
                .collect(),
            None => p
                .plan
                .machines
                .iter()
                .map(|m| ProvisionMachineJson {
                    name: m.name.clone(),
                    sha256: m.sha256.clone(),
                    size_bytes: m.size_bytes,
                    server_id: None,
                    status: crate::domain::MachineStatus::Planned.as_str().to_owned(),
                    ipv4: None,
                    error: None,
                    joined_at: None,
                    member_id: None,
                })
                .collect(),
        };
        let plan = &p.plan;
        ProvisionJson {
            id: p.id,
            state: p.state.as_str().to_owned(),
            state_reason: p.state_reason.clone(),
            fleet: p.fleet.to_string(),
            machine_config: p.machine_config.to_string(),
            config_version: p.config_version,
            template: p.template.to_string(),
            template_version: p.template_version,
            requester: p.requester.clone(),
            approvers: p.approvers.clone(),
            approvals_required: p.approvals_required,
            count: p.count,
            reason: p.reason.clone(),
            plan_hash: p.plan_hash.to_string(),
            created_at: format_utc(p.created_at),
            expires_at: format_utc(p.expires_at),
            approved_at: p.approved_at.map(format_utc),
            finished_at: p.finished_at.map(format_utc),
            machines,
            plan: PlanJson {
                provider: plan.provider.clone(),
                location: plan.location.clone(),
                server_type: plan.server_type.clone(),
                image: plan.image.clone(),
                hourly_cost: plan.hourly_cost.clone(),
                monthly_cost: plan.monthly_cost.clone(),
                currency: plan.currency.clone(),
                hourly_price: plan.hourly_price.clone(),
                monthly_price: plan.monthly_price.clone(),
            },
        }
    }
}

/// One line of a request's timeline.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProvisionEventJson {
    /// RFC 3339, UTC.
    pub at: String,
    /// `state`, `approval`, `provider.call`, `provider.answer`, …
    pub kind: String,
    pub machine: Option<String>,
    pub message: String,
    /// Secret-free details.
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
}

/// One named check of a plan awaiting approval.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PlanCheckJson {
    /// `pin`, `max_restore_machines`, `ssh_keys`, `server_type`, `image`, `monthly_budget` or
    /// `firewall`, in that order.
    pub name: String,
    /// `pass`, `warn` or `block` (refuses approval).
    #[schema(pattern = "^(pass|warn|block)$")]
    pub verdict: String,
    /// Why, in a sentence.
    pub detail: String,
}

/// A request with its timeline, redacted payload and audit entries.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProvisionDetailJson {
    #[serde(flatten)]
    pub provision: ProvisionJson,
    pub events: Vec<ProvisionEventJson>,
    /// The first machine's payload as approved: `«secret:NAME»` where each secret's value goes
    /// (machines differ only by name).
    pub redacted_payload: String,
    /// Each machine's payload as approved, in machine order (stand-ins, never values).
    pub redacted_payloads: Vec<String>,
    /// The plan checks as of now while the request awaits approval (empty otherwise): a
    /// `block` verdict refuses approval.
    pub checks: Vec<PlanCheckJson>,
    /// Audit entries whose target is this request, oldest first.
    pub audit: Vec<AuditEntryJson>,
}

impl From<&ProvisionDetail> for ProvisionDetailJson {
    fn from(d: &ProvisionDetail) -> Self {
        ProvisionDetailJson {
            provision: ProvisionJson::new(&d.provision, Some(&d.machines)),
            events: d
                .events
                .iter()
                .map(|e| ProvisionEventJson {
                    at: format_utc(e.at),
                    kind: e.kind.clone(),
                    machine: e.machine.clone(),
                    message: e.message.clone(),
                    details: e.details.clone(),
                })
                .collect(),
            redacted_payload: d.redacted_payloads.first().cloned().unwrap_or_default(),
            redacted_payloads: d.redacted_payloads.clone(),
            checks: d
                .checks
                .iter()
                .map(|c| PlanCheckJson {
                    name: c.name.to_owned(),
                    verdict: c.verdict.as_str().to_owned(),
                    detail: c.detail.clone(),
                })
                .collect(),
            audit: d.audit.iter().map(AuditEntryJson::from).collect(),
        }
    }
}

/// A page of requests, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProvisionPageJson {
    pub items: Vec<ProvisionJson>,
    /// Pass as `cursor` for the next (older) page; null on the last page.
    pub next_cursor: Option<String>,
}

query_params! {
    /// The listing's paging, as submitted.
    #[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
    #[serde(default)]
    #[into_params(parameter_in = Query)]
    pub struct ProvisionPageParams {
        /// The `next_cursor` of the previous page.
        pub cursor: @cursor,
        /// Requests per page, 1 to 200 (default 50).
        #[param(value_type = Option<i64>, minimum = 1, maximum = 200)]
        pub limit: String,
    }
}

/// A new request.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProvisionRequestJson {
    /// The fleet the machines join.
    #[schema(max_length = 63, pattern = "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]
    pub fleet: String,
    /// The machine config to create them from (its latest version).
    #[schema(
        max_length = 63,
        pattern = "^(?!new$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
    )]
    pub machine_config: String,
    /// A stored template; absent or empty means the config's own.
    #[serde(default)]
    #[schema(
        nullable = false,
        max_length = 63,
        pattern = "^((?!new$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$"
    )]
    pub template: Option<String>,
    /// Machines to create.
    #[schema(value_type = CountRule, inline)]
    pub count: i64,
    /// Why they are needed.
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub reason: String,
}

/// The `count` rule as the document states it: a whole number from 1 to `COUNT_MAX` (no
/// `format`, which says nothing a client must obey).
pub struct CountRule;

impl utoipa::PartialSchema for CountRule {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::Integer))
            .minimum(Some(1))
            .maximum(Some(crate::provisioning::COUNT_MAX))
            .description(Some("Machines to create, 1 to 20."))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for CountRule {}

/// An approval, optionally bound to the plan the approver reviewed.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveJson {
    /// The `plan_hash` the approver saw: refused with 409 when the plan is another by now.
    #[serde(default)]
    #[schema(nullable = false, pattern = "^[0-9a-f]{64}$")]
    pub plan_hash: Option<String>,
    /// Why the approver agrees, for the audit log and the timeline (optional).
    #[serde(default)]
    #[schema(
        nullable = false,
        max_length = 500,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub comment: Option<String>,
}

/// A rejection.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectJson {
    /// Why, for the requester.
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub reason: String,
}

/// Parses a path id; anything but a positive integer is a 422 naming `id`.
fn request_id(raw: &str) -> Result<i64, ApiError> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ApiError::invalid(FieldError::new("id", "must be a positive provision id").into())
        })
}

/// Provision requests, newest first, filtered and cursor-paged (viewer and up).
#[utoipa::path(get, path = "/api/v1/provisions", tag = "provisioning", params(FilterQuery, ProvisionPageParams),
    responses((status = 200, body = ProvisionPageJson),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    filters: web::Query<FilterQuery>,
    page: web::Query<ProvisionPageParams>,
) -> Result<Json<ProvisionPageJson>, ApiError> {
    // Every broken parameter at once.
    let mut errors = FieldErrors::default();
    let filter = match parse_filter(&filters) {
        Ok(f) => Some(f),
        Err(e) => {
            errors.0.extend(e.0);
            None
        }
    };
    let cursor = errors.check(export::parse_cursor(
        "cursor",
        &page.cursor,
        "must be the next_cursor of a page",
    ));
    let max = i64::from(requests::LIST_LIMIT_MAX);
    // Within 1..=LIST_LIMIT_MAX once parsed, so it fits a u32.
    let limit = errors
        .check(export::parse_limit(&page.limit, max, LIMIT_DEFAULT))
        .and_then(|l| u32::try_from(l).ok());
    let (Some(filter), Some(cursor), Some(limit)) = (filter, cursor, limit) else {
        return Err(ApiError::invalid(errors));
    };
    let caller = principal.caller();
    let (items, next) = requests::list(&state.ctx, &caller, &filter, cursor, limit).await?;
    let ids: Vec<i64> = items.iter().map(|p| p.id).collect();
    let machines = requests::machines_of(&state.ctx, &caller, &ids).await?;
    Ok(Json(ProvisionPageJson {
        items: items
            .iter()
            .map(|p| ProvisionJson::new(p, machines.get(&p.id).map(Vec::as_slice)))
            .collect(),
        next_cursor: next.map(|c| c.to_string()),
    }))
}

/// Files a request (operator and up): plans it (every payload rendered and validated, priced
/// from the catalogue) and leaves it `pending_approval`.
#[utoipa::path(post, path = "/api/v1/provisions", tag = "provisioning", request_body = ProvisionRequestJson,
    responses((status = 201, body = ProvisionJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    body: ApiJson<ProvisionRequestJson>,
) -> Result<HttpResponse, ApiError> {
    let b = body.0;
    let req = NewRequest {
        fleet: b.fleet,
        machine_config: b.machine_config,
        template: b.template,
        count: b.count,
        reason: b.reason,
    };
    let caller = principal.caller();
    let p = requests::create(&state.ctx, &caller, &req).await?;
    Ok(HttpResponse::Created().json(ProvisionJson::new(&p, None)))
}

/// One request with its machines, timeline, redacted payload and audit entries (viewer and up).
#[utoipa::path(get, path = "/api/v1/provisions/{id}", tag = "provisioning",
    params(("id" = i64, Path, description = "The request's id", minimum = 1)),
    responses((status = 200, body = ProvisionDetailJson),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
) -> Result<Json<ProvisionDetailJson>, ApiError> {
    let id = request_id(&id)?;
    let d = requests::get(&state.ctx, &principal.caller(), id).await?;
    Ok(Json(ProvisionDetailJson::from(&d)))
}

/// Approves a request (approver and up; four-eyes: not its requester, not the author of the
/// config or template version it uses). The body is optional.
#[utoipa::path(post, path = "/api/v1/provisions/{id}/approve", tag = "provisioning",
    params(("id" = i64, Path, description = "The request's id", minimum = 1)),
    request_body(content = ApproveJson, description = "Optional (an empty body approves the current plan): the plan hash the approver reviewed and a comment"),
    responses((status = 200, body = ProvisionJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json", description = "Role too low, or a four-eyes rule"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 409, body = crate::http::Problem, content_type = "application/problem+json", description = "Not pending, plan changed, expired, superseded, a plan check blocks, or already approved by you"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn approve(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let id = request_id(&id)?;
    // An empty body approves whatever the plan is now; a body must be the JSON above.
    let seen_body: ApproveJson = if body.iter().all(u8::is_ascii_whitespace) {
        ApproveJson::default()
    } else {
        match decode(&body) {
            Ok(b) => b,
            Err(problem) => return Ok(problem.response()),
        }
    };
    let seen = (seen_body.plan_hash.as_deref())
        .map(|h| PlanHash::parse("plan_hash", h))
        .transpose()
        .map_err(|e| ApiError::invalid(e.into()))?;
    let caller = principal.caller();
    let approval = requests::Approval {
        seen_plan_hash: seen.as_ref(),
        comment: seen_body.comment.as_deref().unwrap_or(""),
    };
    let p = requests::approve_with(&state.ctx, &caller, id, &approval).await?;
    Ok(HttpResponse::Ok().json(ProvisionJson::new(&p, None)))
}

/// Rejects a pending request with a reason (approver and up; not its requester).
#[utoipa::path(post, path = "/api/v1/provisions/{id}/reject", tag = "provisioning",
    params(("id" = i64, Path, description = "The request's id", minimum = 1)),
    request_body = RejectJson,
    responses((status = 200, body = ProvisionJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 409, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn reject(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
    body: ApiJson<RejectJson>,
) -> Result<Json<ProvisionJson>, ApiError> {
    let id = request_id(&id)?;
    let p = requests::reject(&state.ctx, &principal.caller(), id, &body.reason).await?;
    Ok(Json(ProvisionJson::new(&p, None)))
}

/// Cancels a request that has not started (its requester, or an approver and up).
#[utoipa::path(post, path = "/api/v1/provisions/{id}/cancel", tag = "provisioning",
    params(("id" = i64, Path, description = "The request's id", minimum = 1)),
    responses((status = 200, body = ProvisionJson),
              (status = 403, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 409, body = crate::http::Problem, content_type = "application/problem+json"),
              (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn cancel(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
) -> Result<Json<ProvisionJson>, ApiError> {
    let id = request_id(&id)?;
    let p = requests::cancel(&state.ctx, &principal.caller(), id).await?;
    Ok(Json(ProvisionJson::new(&p, None)))
}
