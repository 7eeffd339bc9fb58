//! HTML pages. `endpoints()` is the one route table; `paths` holds every path once so views
//! link with the same constants the table registers.

pub mod account;
pub mod approvals;
pub mod assets;
pub mod audit;
pub mod catalogue;
pub mod components;
pub mod configs;
pub mod errors;
pub mod fleets;
pub mod history;
pub mod home;
pub mod layout;
pub mod login;
pub mod probes;
pub mod provisions;
pub mod reply;
pub mod templates;
pub mod tokens;
pub mod users;

use actix_web::http::Method;
use actix_web::web;

use crate::domain::Role;
use crate::http::{Access, Endpoint};

/// Every page path, defined once.
pub mod paths {
    pub const HOME: &str = "/";
    pub const LOGIN: &str = "/login";
    pub const LOGOUT: &str = "/logout";
    pub const ACCOUNT: &str = "/account";
    pub const ACCOUNT_PASSWORD: &str = "/account/password";
    pub const USERS: &str = "/users";
    pub const USER_ROLE: &str = "/users/{username}/role";
    pub const USER_DISABLE: &str = "/users/{username}/disable";
    pub const USER_ENABLE: &str = "/users/{username}/enable";
    pub const TOKENS: &str = "/tokens";
    pub const TOKEN_REVOKE: &str = "/tokens/{id}/revoke";
    pub const AUDIT: &str = "/audit";
    pub const AUDIT_EXPORT: &str = "/audit/export";
    pub const MACHINE_CONFIGS: &str = "/machine-configs";
    pub const MACHINE_CONFIG_NEW: &str = "/machine-configs/new";
    pub const MACHINE_CONFIG: &str = "/machine-configs/{name}";
    pub const MACHINE_CONFIG_EDIT: &str = "/machine-configs/{name}/edit";
    pub const MACHINE_CONFIG_PIN: &str = "/machine-configs/{name}/pin-check";
    pub const TEMPLATES: &str = "/templates";
    pub const TEMPLATE_NEW: &str = "/templates/new";
    pub const TEMPLATE: &str = "/templates/{name}";
    pub const TEMPLATE_EDIT: &str = "/templates/{name}/edit";
    pub const PREVIEW: &str = "/preview";
    pub const FLEETS: &str = "/fleets";
    pub const FLEET_NEW: &str = "/fleets/new";
    pub const FLEET: &str = "/fleets/{name}";
    pub const FLEET_EDIT: &str = "/fleets/{name}/edit";
    pub const FLEET_DELETE: &str = "/fleets/{name}/delete";
    /// A fleet's chart panel for `?range=` (htmx partial of the fleet page).
    pub const FLEET_CHART: &str = "/fleets/{name}/chart";
    /// A fleet's chart figure for the same window (htmx partial of the fleet page, polled).
    pub const FLEET_CHART_LIVE: &str = "/fleets/{name}/chart/live";
    /// A fleet's "now" section (htmx partial of the fleet page, polled).
    pub const FLEET_NOW: &str = "/fleets/{name}/now";
    /// The dashboard's fleet cards (htmx partial of `/`, polled).
    pub const DASHBOARD_CARDS: &str = "/dashboard/cards";
    pub const CATALOGUE: &str = "/catalogue";
    pub const CATALOGUE_REFRESH: &str = "/catalogue/{provider}/refresh";
    pub const HEALTHZ: &str = "/healthz";
    pub const READYZ: &str = "/readyz";
    pub const METRICS: &str = "/metrics";
    pub const STATIC: &str = "/static/{file}";
    /// Provision history (the list of every request).
    pub const HISTORY: &str = "/provisions";
    /// Provision history export (CSV, JSONL).
    pub const HISTORY_EXPORT: &str = "/provisions/export";
    /// Filing a provision request (POST; the GET of the same path is the history list).
    pub const PROVISIONS: &str = "/provisions";
    /// The request form.
    pub const PROVISION_NEW: &str = "/provisions/new";
    /// The request form's live plan (htmx partial).
    pub const PROVISION_PLAN: &str = "/provisions/plan";
    /// One request; `{id}` is digits only so `new`, `plan` and `export` never match it.
    pub const PROVISION: &str = r"/provisions/{id:\d+}";
    /// A request's progress (htmx partial, polled).
    pub const PROVISION_PROGRESS: &str = r"/provisions/{id:\d+}/progress";
    /// Approving a request's plan.
    pub const PROVISION_APPROVE: &str = r"/provisions/{id:\d+}/approve";
    /// Rejecting a request (reason required).
    pub const PROVISION_REJECT: &str = r"/provisions/{id:\d+}/reject";
    /// Cancelling a request that has not started.
    pub const PROVISION_CANCEL: &str = r"/provisions/{id:\d+}/cancel";
    /// Destroying a failed machine's server.
    pub const PROVISION_MACHINE_DESTROY: &str = r"/provisions/{id:\d+}/machines/{idx:\d+}/destroy";
    /// The approvals inbox.
    pub const APPROVALS: &str = "/approvals";
    /// The navigation badge's count (htmx partial).
    pub const APPROVALS_BADGE: &str = "/approvals/badge";

    /// Fills `{name}`-style placeholders in a path pattern, percent-encoding each value.
    /// A placeholder with a pattern (`{id:\d+}`) is filled the same way.
    pub fn fill(pattern: &str, values: &[(&str, &str)]) -> String {
        values.iter().fold(pattern.to_owned(), |p, (k, v)| {
            let value = crate::http::guard::urlencode(v).replace('/', "%2F");
            let p = p.replace(&format!("{{{k}}}"), &value);
            match p.find(&format!("{{{k}:")) {
                Some(start) => match p[start..].find('}') {
                    Some(len) => format!("{}{value}{}", &p[..start], &p[start + len + 1..]),
                    None => p,
                },
                None => p,
            }
        })
    }
}

/// The HTML route table.
pub fn endpoints() -> Vec<Endpoint> {
    use paths::*;
    let viewer = Access::AtLeast(Role::Viewer);
    let operator = Access::AtLeast(Role::Operator);
    let admin = Access::AtLeast(Role::Admin);
    let approver = Access::AtLeast(Role::Approver);
    vec![
        Endpoint::new(Method::GET, HOME, viewer, || {
            web::route().to(home::handlers::show)
        }),
        Endpoint::new(Method::GET, LOGIN, Access::Public, || {
            web::route().to(login::handlers::form)
        }),
        Endpoint::new(Method::POST, LOGIN, Access::Public, || {
            web::route().to(login::handlers::submit)
        }),
        Endpoint::new(Method::POST, LOGOUT, viewer, || {
            web::route().to(login::handlers::logout)
        }),
        Endpoint::new(Method::GET, ACCOUNT, viewer, || {
            web::route().to(account::handlers::show)
        }),
        Endpoint::new(Method::POST, ACCOUNT_PASSWORD, viewer, || {
            web::route().to(account::handlers::change_password)
        }),
        Endpoint::new(Method::GET, USERS, admin, || {
            web::route().to(users::handlers::list)
        }),
        Endpoint::new(Method::POST, USERS, admin, || {
            web::route().to(users::handlers::create)
        }),
        Endpoint::new(Method::POST, USER_ROLE, admin, || {
            web::route().to(users::handlers::set_role)
        }),
        Endpoint::new(Method::POST, USER_DISABLE, admin, || {
            web::route().to(users::handlers::disable)
        }),
        Endpoint::new(Method::POST, USER_ENABLE, admin, || {
            web::route().to(users::handlers::enable)
        }),
        Endpoint::new(Method::GET, TOKENS, admin, || {
            web::route().to(tokens::handlers::list)
        }),
        Endpoint::new(Method::POST, TOKENS, admin, || {
            web::route().to(tokens::handlers::create)
        }),
        Endpoint::new(Method::POST, TOKEN_REVOKE, admin, || {
            web::route().to(tokens::handlers::revoke)
        }),
        Endpoint::new(Method::GET, AUDIT, viewer, || {
            web::route().to(audit::handlers::list)
        }),
        Endpoint::new(Method::GET, AUDIT_EXPORT, viewer, || {
            web::route().to(audit::handlers::export)
        }),
        // Before any `/provisions/{id}` route, so `export` is not taken for an id.
        Endpoint::new(Method::GET, HISTORY_EXPORT, viewer, || {
            web::route().to(history::handlers::export)
        }),
        Endpoint::new(Method::GET, HISTORY, viewer, || {
            web::route().to(history::handlers::list)
        }),
        Endpoint::new(Method::GET, PROVISION_NEW, operator, || {
            web::route().to(provisions::handlers::new)
        }),
        Endpoint::new(Method::POST, PROVISION_PLAN, operator, || {
            web::route().to(provisions::handlers::plan)
        }),
        Endpoint::new(Method::POST, PROVISIONS, operator, || {
            web::route().to(provisions::handlers::create)
        }),
        Endpoint::new(Method::GET, PROVISION, viewer, || {
            web::route().to(provisions::handlers::show)
        }),
        Endpoint::new(Method::GET, PROVISION_PROGRESS, viewer, || {
            web::route().to(provisions::handlers::progress)
        }),
        Endpoint::new(Method::POST, PROVISION_APPROVE, approver, || {
            web::route().to(provisions::handlers::approve)
        }),
        Endpoint::new(Method::POST, PROVISION_REJECT, approver, || {
            web::route().to(provisions::handlers::reject)
        }),
        Endpoint::new(Method::POST, PROVISION_CANCEL, operator, || {
            web::route().to(provisions::handlers::cancel)
        }),
        Endpoint::new(Method::POST, PROVISION_MACHINE_DESTROY, approver, || {
            web::route().to(provisions::handlers::destroy)
        }),
        Endpoint::new(Method::GET, APPROVALS, viewer, || {
            web::route().to(approvals::handlers::inbox)
        }),
        Endpoint::new(Method::GET, APPROVALS_BADGE, viewer, || {
            web::route().to(approvals::handlers::badge)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIGS, viewer, || {
            web::route().to(configs::handlers::list)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIG_NEW, operator, || {
            web::route().to(configs::handlers::new)
        }),
        Endpoint::new(Method::POST, MACHINE_CONFIGS, operator, || {
            web::route().to(configs::handlers::create)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIG, viewer, || {
            web::route().to(configs::handlers::show)
        }),
        Endpoint::new(Method::GET, MACHINE_CONFIG_EDIT, operator, || {
            web::route().to(configs::handlers::edit)
        }),
        Endpoint::new(Method::POST, MACHINE_CONFIG, operator, || {
            web::route().to(configs::handlers::update)
        }),
        Endpoint::new(Method::POST, MACHINE_CONFIG_PIN, operator, || {
            web::route().to(configs::handlers::pin_check)
        }),
        Endpoint::new(Method::GET, TEMPLATES, viewer, || {
            web::route().to(templates::handlers::list)
        }),
        Endpoint::new(Method::GET, TEMPLATE_NEW, operator, || {
            web::route().to(templates::handlers::new)
        }),
        Endpoint::new(Method::POST, TEMPLATES, operator, || {
            web::route().to(templates::handlers::create)
        }),
        Endpoint::new(Method::GET, TEMPLATE, viewer, || {
            web::route().to(templates::handlers::show)
        }),
        Endpoint::new(Method::GET, TEMPLATE_EDIT, operator, || {
            web::route().to(templates::handlers::edit)
        }),
        Endpoint::new(Method::POST, TEMPLATE, operator, || {
            web::route().to(templates::handlers::update)
        }),
        Endpoint::new(Method::POST, PREVIEW, operator, || {
            web::route().to(templates::handlers::live_preview)
        }),
        Endpoint::new(Method::GET, CATALOGUE, viewer, || {
            web::route().to(catalogue::handlers::show)
        }),
        Endpoint::new(Method::POST, CATALOGUE_REFRESH, operator, || {
            web::route().to(catalogue::handlers::refresh)
        }),
        Endpoint::new(Method::GET, FLEETS, viewer, || {
            web::route().to(fleets::handlers::list)
        }),
        Endpoint::new(Method::GET, FLEET_NEW, operator, || {
            web::route().to(fleets::handlers::new)
        }),
        Endpoint::new(Method::POST, FLEETS, operator, || {
            web::route().to(fleets::handlers::create)
        }),
        Endpoint::new(Method::GET, FLEET, viewer, || {
            web::route().to(fleets::handlers::show)
        }),
        Endpoint::new(Method::GET, FLEET_EDIT, operator, || {
            web::route().to(fleets::handlers::edit)
        }),
        Endpoint::new(Method::POST, FLEET, operator, || {
            web::route().to(fleets::handlers::update)
        }),
        // An approver's: see `fleets::delete`.
        Endpoint::new(
            Method::POST,
            FLEET_DELETE,
            Access::AtLeast(Role::Approver),
            || web::route().to(fleets::handlers::delete),
        ),
        Endpoint::new(Method::GET, FLEET_CHART, viewer, || {
            web::route().to(fleets::handlers::chart)
        }),
        Endpoint::new(Method::GET, FLEET_CHART_LIVE, viewer, || {
            web::route().to(fleets::handlers::chart_live)
        }),
        Endpoint::new(Method::GET, FLEET_NOW, viewer, || {
            web::route().to(fleets::handlers::now)
        }),
        Endpoint::new(Method::GET, DASHBOARD_CARDS, viewer, || {
            web::route().to(home::handlers::cards)
        }),
        Endpoint::new(Method::GET, HEALTHZ, Access::Public, || {
            web::route().to(probes::healthz)
        }),
        Endpoint::new(Method::GET, READYZ, Access::Public, || {
            web::route().to(probes::readyz)
        }),
        Endpoint::new(Method::GET, METRICS, Access::Public, || {
            web::route().to(probes::metrics)
        }),
        Endpoint::new(Method::GET, STATIC, Access::Public, || {
            web::route().to(assets::static_file)
        }),
    ]
}

/// Stores a message for the next full page of this session (after a redirect).
pub async fn flash(
    state: &crate::state::AppState,
    principal: &crate::auth::Principal,
    message: &str,
) {
    crate::auth::sessions::set_flash(&state.ctx, principal, message).await;
}

/// A 303 to `location` (post/redirect/get).
pub fn see_other(location: &str) -> actix_web::HttpResponse {
    actix_web::HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, location))
        .finish()
}
