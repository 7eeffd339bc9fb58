//! The JSON API under `/api/v1`: bearer token or session (with CSRF), errors as
//! problem+json, documented at `/api/openapi.json`.

pub mod errors;
pub mod me;
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
}

/// The API route table.
pub fn endpoints() -> Vec<Endpoint> {
    use paths::*;
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
        Endpoint::new(Method::GET, OPENAPI, Access::Public, || {
            web::route().to(openapi_json)
        }),
    ]
}

/// The OpenAPI document, generated from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "headroom API", description = "Warm-spare headroom for yubaba fleets."),
    paths(me::me, users::list, users::create),
    components(schemas(me::MeResponse, users::UserJson, users::CreateUserRequest, crate::http::Problem)),
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
