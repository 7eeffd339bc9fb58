//! Fleets over JSON: list, create, read, replace, delete. Secrets appear only as the declared
//! names a fleet uses (or, for fleets saved before declarations, their old raw source), never as
//! values.

use std::borrow::Cow;

use actix_web::web::{self, Json};
use actix_web::HttpResponse;
use serde::{Deserialize, Serialize};
use utoipa::openapi::{RefOr, Schema};

use super::errors::ApiError;
use super::json::ApiJson;
use super::rules;
use crate::auth::Principal;
use crate::capacity::board;
use crate::domain::absorption::Absorption;
use crate::domain::capacity::{FleetNow, Health, Member, MemberRole, Pending};
use crate::domain::clock::format_utc;
use crate::domain::fleet::{FleetInput, SecretName};
use crate::fleets::{self, Fleet};
use crate::state::AppState;

/// Which declared secret each render-time secret is; absent, null or empty means none.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FleetSecretsRequest {
    #[schema(value_type = rules::SecretRefRule, inline)]
    pub mesh_preauth_key: Option<String>,
    #[schema(value_type = rules::SecretRefRule, inline)]
    pub tunnel_token: Option<String>,
}

/// A fleet to create. Omitted numbers take their defaults (approvals 1, TTL 4 h, scrape every
/// 15 s with a 5 s timeout, no required override, at most 2 machines per restore proposal).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FleetRequest {
    /// Required on create; on PUT it must be absent or equal to the path.
    #[schema(value_type = rules::DocumentNameRule, inline)]
    pub name: String,
    #[schema(value_type = rules::EndpointsRule, inline)]
    pub endpoints: Vec<String>,
    /// An existing machine config.
    #[schema(value_type = rules::DocumentNameRule, inline)]
    pub restore_machine_config: String,
    #[schema(value_type = rules::ApprovalsRequiredRule, inline)]
    pub approvals_required: Option<serde_json::Value>,
    #[schema(value_type = rules::ApprovalTtlRule, inline)]
    pub approval_ttl_hours: Option<serde_json::Value>,
    #[schema(value_type = rules::ScrapeIntervalRule, inline)]
    pub scrape_interval_secs: Option<serde_json::Value>,
    #[schema(value_type = rules::ScrapeTimeoutRule, inline)]
    pub scrape_timeout_secs: Option<serde_json::Value>,
    #[schema(value_type = rules::RequiredOverrideRule, inline)]
    pub required_override: Option<serde_json::Value>,
    #[schema(inline)]
    pub secrets: FleetSecretsRequest,
    #[schema(value_type = rules::MaxRestoreMachinesRule, inline)]
    pub max_restore_machines: Option<serde_json::Value>,
    #[schema(value_type = rules::MonthlyBudgetRule, inline)]
    pub monthly_budget: Option<serde_json::Value>,
    #[schema(value_type = rules::HeadroomRuleRule, inline)]
    pub headroom_rule: Option<serde_json::Value>,
}

impl From<FleetRequest> for FleetInput {
    fn from(r: FleetRequest) -> Self {
        let secrets = [
            (SecretName::MeshPreauthKey, r.secrets.mesh_preauth_key),
            (SecretName::TunnelToken, r.secrets.tunnel_token),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.as_str().to_owned(), v)))
        .collect();
        FleetInput {
            name: r.name,
            endpoints: r.endpoints,
            restore_machine_config: r.restore_machine_config,
            approvals_required: r.approvals_required,
            approval_ttl_hours: r.approval_ttl_hours,
            scrape_interval_secs: r.scrape_interval_secs,
            scrape_timeout_secs: r.scrape_timeout_secs,
            required_override: r.required_override,
            secrets,
            max_restore_machines: r.max_restore_machines,
            monthly_budget: r.monthly_budget,
            headroom_rule: r.headroom_rule,
        }
    }
}

/// The body of `PUT /api/v1/fleets/{name}`: a fleet's settings; the path names it.
pub struct FleetUpdate;

impl utoipa::PartialSchema for FleetUpdate {
    fn schema() -> RefOr<Schema> {
        super::machine_request::without_name(<FleetRequest as utoipa::PartialSchema>::schema())
    }
}

impl utoipa::ToSchema for FleetUpdate {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("FleetUpdate")
    }
}

/// The sources a fleet names (never the values).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetSecretsJson {
    /// A declared secret's name (or, saved before declarations, the raw source it named).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh_preauth_key: Option<String>,
    /// A declared secret's name (or, saved before declarations, the raw source it named).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_token: Option<String>,
}

/// A fleet.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetJson {
    pub name: String,
    pub endpoints: Vec<String>,
    pub restore_machine_config: String,
    pub approvals_required: u8,
    pub approval_ttl_hours: u32,
    pub scrape_interval_secs: u32,
    pub scrape_timeout_secs: u32,
    pub required_override: Option<u32>,
    pub secrets: FleetSecretsJson,
    /// Most machines one restore proposal of headroom's asks for.
    pub max_restore_machines: u32,
    /// What the fleet's machines may cost a month, in the catalogue's currency, as decimal
    /// text with 2 places (`"250.00"`); null when no budget is set.
    pub monthly_budget: Option<String>,
    /// Which answer decides deficits and proposals: `spare_count` (yubaba's count) or
    /// `absorption` (whether losing the worst node or region leaves every workload room).
    pub headroom_rule: String,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// RFC 3339, UTC.
    pub updated_at: String,
    pub updated_by: String,
}

impl From<Fleet> for FleetJson {
    fn from(f: Fleet) -> Self {
        let source = |n: SecretName| f.spec.secrets().get(&n).map(ToString::to_string);
        let secrets = FleetSecretsJson {
            mesh_preauth_key: source(SecretName::MeshPreauthKey),
            tunnel_token: source(SecretName::TunnelToken),
        };
        let s = f.spec;
        Self {
            name: s.name().to_string(),
            endpoints: s.endpoints().to_vec(),
            restore_machine_config: s.restore_machine_config().to_string(),
            approvals_required: s.approvals_required(),
            approval_ttl_hours: s.approval_ttl_hours(),
            scrape_interval_secs: s.scrape_interval_secs(),
            scrape_timeout_secs: s.scrape_timeout_secs(),
            required_override: s.required_override(),
            secrets,
            max_restore_machines: s.max_restore_machines(),
            monthly_budget: s.monthly_budget().map(|b| b.to_string()),
            headroom_rule: s.headroom_rule().as_str().to_string(),
            created_at: format_utc(f.created_at),
            updated_at: format_utc(f.updated_at),
            updated_by: f.updated_by,
        }
    }
}

/// A fleet's state now, in yubaba's words, from the newest scrape (`unknown` and nulls before
/// the first).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetStateJson {
    /// `healthy`, `deficit` (a deficit is open), `pending` (a change is being confirmed; see
    /// `pending`), `unknown` (never scraped, or the newest scrape failed) or `stale` (no
    /// scrape for three intervals).
    pub status: Health,
    /// The change a `pending` status is confirming: `toward` (`deficit` or `recovery`),
    /// `samples` seen of the `of` it needs.
    pub pending: Option<Pending>,
    /// yubaba's N+k: `1` reads N+1, one warm spare (the same number as `spare`).
    pub n_plus: Option<u32>,
    /// Warm spares at the newest successful scrape.
    pub spare: Option<u32>,
    /// Spares the fleet must keep, at the newest successful scrape.
    pub required: Option<u32>,
}

impl FleetStateJson {
    fn unscraped() -> Self {
        Self {
            status: Health::Unknown,
            pending: None,
            n_plus: None,
            spare: None,
            required: None,
        }
    }
}

impl From<&FleetNow> for FleetStateJson {
    fn from(now: &FleetNow) -> Self {
        Self {
            status: now.status,
            pending: now.pending,
            n_plus: now.n_plus,
            spare: now.spare,
            required: now.required,
        }
    }
}

/// A fleet in the list: its settings and its state now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetItemJson {
    #[serde(flatten)]
    pub fleet: FleetJson,
    #[serde(flatten)]
    pub state: FleetStateJson,
}

/// A page of fleets; every fleet fits on one, so `next_cursor` is always null.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetPageJson {
    pub items: Vec<FleetItemJson>,
    pub next_cursor: Option<String>,
}

/// Every fleet, by name.
#[utoipa::path(get, path = "/api/v1/fleets", tag = "fleets", responses((status = 200, body = FleetPageJson)))]
pub async fn list(
    state: web::Data<AppState>,
    p: Principal,
) -> Result<Json<FleetPageJson>, ApiError> {
    let caller = p.caller();
    let fleets = fleets::list(&state.ctx, &caller).await?;
    // One read of the (shared, cached) board for every fleet's state.
    let board = board::board(&state.ctx, &caller).await?;
    let by_name: std::collections::HashMap<&str, &FleetNow> =
        board.iter().map(|n| (n.fleet.as_str(), n)).collect();
    let items = fleets
        .into_iter()
        .map(|f| {
            let now = by_name.get(f.spec.name().as_str()).copied();
            FleetItemJson {
                // A fleet created since the board was read: not scraped yet.
                state: now.map_or_else(FleetStateJson::unscraped, FleetStateJson::from),
                fleet: f.into(),
            }
        })
        .collect();
    Ok(Json(FleetPageJson {
        items,
        next_cursor: None,
    }))
}

/// Creates a fleet (operator).
#[utoipa::path(post, path = "/api/v1/fleets", tag = "fleets", request_body = FleetRequest,
    responses((status = 201, body = FleetJson), (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    p: Principal,
    body: ApiJson<FleetRequest>,
) -> Result<HttpResponse, ApiError> {
    let fleet = fleets::create(&state.ctx, &p.caller(), &body.0.into()).await?;
    Ok(HttpResponse::Created().json(FleetJson::from(fleet)))
}

/// A fleet with its headroom now (from the newest scrape; `unknown` and nulls before the
/// first).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetDetailJson {
    #[serde(flatten)]
    pub fleet: FleetJson,
    #[serde(flatten)]
    pub state: FleetStateJson,
    /// The base URL of the raft leader the newest successful scrape read.
    pub leader: Option<String>,
    /// When the newest scrape (ok or not) ran; RFC 3339, UTC.
    pub last_scrape_at: Option<String>,
    /// Why the newest scrape failed, when it did.
    pub last_error: Option<String>,
    /// When the open deficit began (its first sample below required); RFC 3339, UTC.
    pub deficit_since: Option<String>,
    /// The members at the newest successful scrape, voters first, each with its role (empty
    /// before the first).
    pub members: Vec<FleetMemberJson>,
    /// Absorption headroom at the newest successful scrape: whether the fleet can lose its
    /// worst node (`node_loss`) or, across two or more regions, its worst region
    /// (`region_loss`) and re-place every workload; what is short; the fewest restore machines
    /// that cover it (`machines_needed`); and whether sizes came from `workloads` or
    /// `committed` totals. `null` when that scrape could not judge it.
    pub absorption: Option<Absorption>,
}

/// What a member is: `spare` (capacity published, no tenant), `carrying` (live tenants, see
/// `tenants`), `learner` (in no voter set, and neither), `voter` (a voter, and neither: its
/// load was not read, or it published no capacity).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemberRoleJson {
    Spare,
    Carrying,
    Learner,
    Voter,
}

impl From<MemberRole> for MemberRoleJson {
    fn from(r: MemberRole) -> Self {
        match r {
            MemberRole::Spare => Self::Spare,
            MemberRole::Carrying(_) => Self::Carrying,
            MemberRole::Learner => Self::Learner,
            MemberRole::Voter => Self::Voter,
        }
    }
}

/// One member of the fleet's raft group.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetMemberJson {
    /// Raft node id.
    pub id: u64,
    /// Its `host:port` as yubaba publishes it.
    pub addr: String,
    /// In a voter set; otherwise a learner.
    pub voter: bool,
    pub role: MemberRoleJson,
    /// Live tenants its `/node/usage` reported; null when not read (headroom reads each
    /// member's load in derived mode only: native yubaba counts spares without naming them).
    pub tenants: Option<u64>,
}

impl From<&Member> for FleetMemberJson {
    fn from(m: &Member) -> Self {
        Self {
            id: m.id,
            addr: m.addr.clone(),
            voter: m.voter,
            role: m.role().into(),
            tenants: m.tenants,
        }
    }
}

/// One fleet, with its current headroom status.
#[utoipa::path(get, path = "/api/v1/fleets/{name}", tag = "fleets",
    responses((status = 200, body = FleetDetailJson), (status = 404, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn get(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<FleetDetailJson>, ApiError> {
    let caller = p.caller();
    let fleet = fleets::get(&state.ctx, &caller, &name).await?;
    let now = board::now(&state.ctx, &caller, &name).await?;
    Ok(Json(FleetDetailJson {
        fleet: fleet.into(),
        state: FleetStateJson::from(&now),
        leader: now.leader,
        last_scrape_at: now.last_scrape_at.map(format_utc),
        last_error: now.last_error,
        deficit_since: now.deficit_since.map(format_utc),
        members: now.members.iter().map(FleetMemberJson::from).collect(),
        absorption: now.absorption,
    }))
}

/// Replaces a fleet's settings (operator); an identical body changes nothing.
#[utoipa::path(put, path = "/api/v1/fleets/{name}", tag = "fleets", request_body = FleetUpdate,
    responses((status = 200, body = FleetJson),
        (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
        (status = 422, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn put(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
    body: ApiJson<FleetRequest>,
) -> Result<Json<FleetJson>, ApiError> {
    let fleet = fleets::update(&state.ctx, &p.caller(), &name, &body.0.into()).await?;
    Ok(Json(fleet.into()))
}

/// One change of a fleet's settings.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetChangeJson {
    /// RFC 3339, UTC.
    pub at: String,
    /// Who changed it (`system` for the console itself).
    pub actor: String,
    /// `created`, `updated`, `deleted`, or `baseline` (stored before the history was kept).
    pub kind: String,
    /// Field → `{"before": …, "after": …}`; secrets as references, never values.
    #[schema(value_type = Object)]
    pub changes: serde_json::Map<String, serde_json::Value>,
}

/// A fleet's change history, newest first (at most 200 entries).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetHistoryJson {
    pub items: Vec<FleetChangeJson>,
}

/// Who changed a fleet's settings, when, and what (kept after a delete).
#[utoipa::path(get, path = "/api/v1/fleets/{name}/history", tag = "fleets",
    responses((status = 200, body = FleetHistoryJson), (status = 404, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn history(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<Json<FleetHistoryJson>, ApiError> {
    let items = fleets::history(&state.ctx, &p.caller(), &name)
        .await?
        .into_iter()
        .map(|c| FleetChangeJson {
            at: format_utc(c.at),
            actor: c.actor,
            kind: c.kind,
            changes: c.changes,
        })
        .collect();
    Ok(Json(FleetHistoryJson { items }))
}

/// Deletes a fleet (approver); refused with 409 while one of its requests is open.
#[utoipa::path(delete, path = "/api/v1/fleets/{name}", tag = "fleets",
    responses((status = 204),
        (status = 404, body = crate::http::Problem, content_type = "application/problem+json"),
        (status = 409, body = crate::http::Problem, content_type = "application/problem+json")))]
pub async fn delete(
    state: web::Data<AppState>,
    p: Principal,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    fleets::delete(&state.ctx, &p.caller(), &name).await?;
    Ok(HttpResponse::NoContent().finish())
}
