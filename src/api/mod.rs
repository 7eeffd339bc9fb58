//! The JSON API under `/api/v1`: bearer token or session (with CSRF), errors as
//! problem+json, documented at `/api/openapi.json`.

pub mod audit;
pub mod catalogue;
pub mod configs;
pub mod errors;
pub mod fleet_series;
pub mod fleets;
pub mod history;
pub mod json;
pub mod machine_request;
pub mod me;
pub mod provision_machines;
pub mod provisions;
pub mod rules;
pub mod secrets;
pub mod tokens;
pub mod users;

use actix_web::http::Method;
use actix_web::{web, HttpResponse};
use utoipa::OpenApi;

use crate::domain::Role;
use crate::http::{Access, Endpoint};

/// Every API path, defined once.
pub mod paths {
    pub const ME: &str = "/api/v1/me";
    pub const USERS: &str = "/api/v1/users";
    pub const OPENAPI: &str = "/api/openapi.json";
    pub const MACHINE_CONFIGS: &str = "/api/v1/machine-configs";
    pub const MACHINE_CONFIG: &str = "/api/v1/machine-configs/{name}";
    pub const MACHINE_CONFIG_VERSIONS: &str = "/api/v1/machine-configs/{name}/versions";
    pub const MACHINE_CONFIG_PIN_CHECK: &str = "/api/v1/machine-configs/{name}/pin-check";
    pub const TEMPLATES: &str = "/api/v1/templates";
    pub const TEMPLATE: &str = "/api/v1/templates/{name}";
    pub const TEMPLATE_VERSIONS: &str = "/api/v1/templates/{name}/versions";
    pub const RENDER: &str = "/api/v1/render";
    pub const USER: &str = "/api/v1/users/{username}";
    pub const TOKENS: &str = "/api/v1/tokens";
    pub const TOKEN_REVOKE: &str = "/api/v1/tokens/{id}/revoke";
    pub const CATALOGUE: &str = "/api/v1/catalogue";
    pub const CATALOGUE_REFRESH: &str = "/api/v1/catalogue/{provider}/refresh";
    pub const AUDIT: &str = "/api/v1/audit";
    pub const PROVISIONS_EXPORT: &str = "/api/v1/provisions/export";
    pub const FLEETS: &str = "/api/v1/fleets";
    pub const FLEET: &str = "/api/v1/fleets/{name}";
    pub const FLEET_HEADROOM: &str = "/api/v1/fleets/{name}/headroom";
    pub const SECRETS: &str = "/api/v1/secrets";
    pub const FLEET_HISTORY: &str = "/api/v1/fleets/{name}/history";
    pub const PROVISION_MACHINE_DESTROY: &str = "/api/v1/provisions/{id}/machines/{idx}/destroy";
    pub const PROVISIONS: &str = "/api/v1/provisions";
    pub const PROVISION: &str = "/api/v1/provisions/{id}";
    pub const PROVISION_APPROVE: &str = "/api/v1/provisions/{id}/approve";
    pub const PROVISION_REJECT: &str = "/api/v1/provisions/{id}/reject";
    pub const PROVISION_CANCEL: &str = "/api/v1/provisions/{id}/cancel";
}

/// The API route table.
pub fn endpoints() -> Vec<Endpoint> {
    use paths::*;
    let viewer = Access::AtLeast(Role::Viewer);
    let operator = Access::AtLeast(Role::Operator);
    vec![
        Endpoint::new(Method::GET, ME, Access::AtLeast(Role::Viewer), || {
            web::route().to(me::me)
        }),
        Endpoint::new(Method::GET, USERS, Access::AtLeast(Role::Admin), || {
            web::route().to(users::list)
        }),
        Endpoint::new(Method::POST, USERS, Access::AtLeast(Role::Admin), || {
            web::route().to(users::create)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIGS, viewer, || {
            web::route().to(configs::list_configs)
        }),
        Endpoint::new(Method::POST, MACHINE_CONFIGS, operator, || {
            web::route().to(configs::create_config)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIG, viewer, || {
            web::route().to(configs::get_config)
        }),
        Endpoint::new(Method::PUT, MACHINE_CONFIG, operator, || {
            web::route().to(configs::put_config)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIG_VERSIONS, viewer, || {
            web::route().to(configs::config_versions)
        }),
        Endpoint::new(Method::POST, MACHINE_CONFIG_PIN_CHECK, operator, || {
            web::route().to(configs::pin_check)
        }),
        Endpoint::new(Method::GET, TEMPLATES, viewer, || {
            web::route().to(configs::list_templates)
        }),
        Endpoint::new(Method::POST, TEMPLATES, operator, || {
            web::route().to(configs::create_template)
        }),
        Endpoint::new(Method::GET, TEMPLATE, viewer, || {
            web::route().to(configs::get_template)
        }),
        Endpoint::new(Method::PUT, TEMPLATE, operator, || {
            web::route().to(configs::put_template)
        }),
        Endpoint::new(Method::GET, TEMPLATE_VERSIONS, viewer, || {
            web::route().to(configs::template_versions)
        }),
        Endpoint::new(Method::POST, RENDER, operator, || {
            web::route().to(configs::render)
        }),
        Endpoint::new(Method::PATCH, USER, Access::AtLeast(Role::Admin), || {
            web::route().to(users::patch)
        }),
        Endpoint::new(Method::GET, TOKENS, Access::AtLeast(Role::Admin), || {
            web::route().to(tokens::list)
        }),
        Endpoint::new(Method::POST, TOKENS, Access::AtLeast(Role::Admin), || {
            web::route().to(tokens::create)
        }),
        Endpoint::new(
            Method::POST,
            TOKEN_REVOKE,
            Access::AtLeast(Role::Admin),
            || web::route().to(tokens::revoke),
        ),
        Endpoint::new(Method::GET, CATALOGUE, viewer, || {
            web::route().to(catalogue::show)
        }),
        Endpoint::new(Method::POST, CATALOGUE_REFRESH, operator, || {
            web::route().to(catalogue::refresh)
        }),
        // The audit page's role.
        Endpoint::new(Method::GET, AUDIT, viewer, || web::route().to(audit::list)),
        // Before any `/api/v1/provisions/{id}` route, so `export` is not taken for an id.
        Endpoint::new(Method::GET, PROVISIONS_EXPORT, viewer, || {
            web::route().to(history::export)
        }),
        Endpoint::new(Method::GET, FLEETS, viewer, || {
            web::route().to(fleets::list)
        }),
        Endpoint::new(Method::POST, FLEETS, operator, || {
            web::route().to(fleets::create)
        }),
        Endpoint::new(Method::GET, FLEET, viewer, || web::route().to(fleets::get)),
        Endpoint::new(Method::PUT, FLEET, operator, || {
            web::route().to(fleets::put)
        }),
        // An approver's: deleting and creating again would replace a policy an operator may
        // only tighten.
        Endpoint::new(
            Method::DELETE,
            FLEET,
            Access::AtLeast(Role::Approver),
            || web::route().to(fleets::delete),
        ),
        Endpoint::new(Method::GET, FLEET_HISTORY, viewer, || {
            web::route().to(fleets::history)
        }),
        Endpoint::new(Method::GET, FLEET_HEADROOM, viewer, || {
            web::route().to(fleet_series::get)
        }),
        Endpoint::new(Method::GET, SECRETS, viewer, || {
            web::route().to(secrets::list)
        }),
        Endpoint::new(
            Method::POST,
            PROVISION_MACHINE_DESTROY,
            Access::AtLeast(Role::Approver),
            || web::route().to(provision_machines::destroy),
        ),
        Endpoint::new(Method::GET, PROVISIONS, viewer, || {
            web::route().to(provisions::list)
        }),
        Endpoint::new(Method::POST, PROVISIONS, operator, || {
            web::route().to(provisions::create)
        }),
        Endpoint::new(Method::GET, PROVISION, viewer, || {
            web::route().to(provisions::get)
        }),
        Endpoint::new(
            Method::POST,
            PROVISION_APPROVE,
            Access::AtLeast(Role::Approver),
            || web::route().to(provisions::approve),
        ),
        Endpoint::new(
            Method::POST,
            PROVISION_REJECT,
            Access::AtLeast(Role::Approver),
            || web::route().to(provisions::reject),
        ),
        // Operators cancel their own requests; the operation checks whose it is.
        Endpoint::new(Method::POST, PROVISION_CANCEL, operator, || {
            web::route().to(provisions::cancel)
        }),
        Endpoint::new(Method::GET, OPENAPI, Access::Public, || {
            web::route().to(openapi_json)
        }),
    ]
}

/// The OpenAPI document, generated from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "headroom API", description = "Warm-spare headroom for yubaba fleets."),
    paths(me::me, users::list, users::create, users::patch,
        tokens::list, tokens::create, tokens::revoke,
        catalogue::show, catalogue::refresh,
        audit::list,
        history::export,
        fleets::list, fleets::create, fleets::get, fleets::put, fleets::delete, fleets::history,
        fleet_series::get,
        secrets::list,
        provision_machines::destroy,
        provisions::list, provisions::create, provisions::get, provisions::approve, provisions::reject, provisions::cancel,
        configs::list_configs, configs::create_config, configs::get_config, configs::put_config, configs::config_versions, configs::pin_check,
        configs::list_templates, configs::create_template, configs::get_template, configs::put_template, configs::template_versions,
        configs::render),
    components(schemas(me::MeResponse, users::UserJson, users::CreateUserRequest, users::UserPatchRequest, crate::http::Problem,
        tokens::TokenJson, tokens::CreatedTokenJson, tokens::TokenRequest,
        catalogue::CatalogueJson, catalogue::ProviderCatalogueJson,
        audit::AuditPageJson, audit::AuditEntryJson,
        fleets::FleetJson, fleets::FleetDetailJson, fleets::FleetMemberJson, fleets::MemberRoleJson, fleets::FleetStateJson, fleets::FleetItemJson, crate::domain::capacity::Health, crate::domain::capacity::Pending, crate::domain::capacity::PendingToward, fleets::FleetPageJson, fleets::FleetSecretsJson, fleets::FleetRequest, fleets::FleetUpdate, fleets::FleetSecretsRequest, fleets::FleetChangeJson, fleets::FleetHistoryJson,
        secrets::SecretJson, secrets::SecretPageJson,
        fleet_series::HeadroomJson, fleet_series::HeadroomPointJson, crate::domain::capacity::Source, crate::domain::capacity::Resolution,
        provision_machines::DestroyedMachineJson,
        provisions::ProvisionJson, provisions::ProvisionMachineJson, provisions::PlanJson, provisions::ProvisionPageJson, provisions::ProvisionDetailJson,
        provisions::ProvisionEventJson, provisions::ProvisionRequestJson, provisions::ApproveJson, provisions::RejectJson,
        configs::MachineConfigJson, configs::MachineConfigVersionJson, configs::PinCheckJson, configs::TemplateJson, configs::TemplateRequest,
        configs::TemplateUpdate, configs::RenderRequestJson, configs::RenderResponse, configs::FindingJson, configs::SecretsJson,
        machine_request::MachineConfigRequest, machine_request::MachineConfigUpdate, crate::domain::machine::MachineSpec)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}
