//! HTTP plumbing shared by the HTML pages (`web`) and the JSON API (`api`): the route-table
//! entry type, the authentication/CSRF/role guard, problem+json, request metrics, the client
//! address and the browser-hardening headers.

pub mod body_deadline;
pub mod client;
pub mod endpoint;
pub mod guard;
pub mod metrics;
pub mod problem;
pub mod security_headers;
pub mod span;
pub mod stream;

pub use endpoint::{Access, Endpoint};
pub use problem::Problem;

/// Whether a path belongs to the JSON API (errors answer as problem+json there).
pub fn is_api_path(path: &str) -> bool {
    path.starts_with("/api/")
}

pub mod extract;

use actix_web::http::StatusCode;
use actix_web::HttpResponse;

/// A minimal standalone HTML error page (used where the page shell is not available: the
/// guard, and failures before a handler has a principal).
pub fn html_error(status: StatusCode, detail: &str) -> HttpResponse {
    let body = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (status.as_u16()) " · headroom" } link rel="stylesheet" href="/static/app.css"; }
            body { main.narrow {
                h1 { (status.canonical_reason().unwrap_or("Error")) }
                p.error-text { (detail) }
                p { a href="/" { "Back to headroom" } }
            } }
        }
    };
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(body.into_string())
}
