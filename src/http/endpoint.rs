//! One route of a route table: method, path, who may call it, and the handler. Routes are
//! registered only through this type, so the guard is applied to every one and tests can
//! enumerate the table (CSRF and role matrices) without a route slipping past.

use actix_web::http::Method;
use actix_web::middleware::from_fn;
use actix_web::{web, Route};

use crate::domain::Role;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, signed in or not (login, health, static files).
    Public,
    /// Signed-in users whose role includes this one.
    AtLeast(Role),
}

/// A route table entry.
#[derive(Clone)]
pub struct Endpoint {
    pub method: Method,
    /// actix path pattern, e.g. `/users/{username}/role`.
    pub path: &'static str,
    pub access: Access,
    handler: fn() -> Route,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({:?})", self.method, self.path, self.access)
    }
}

impl Endpoint {
    /// An entry; `handler` returns `web::route().to(the_handler)`.
    pub fn new(method: Method, path: &'static str, access: Access, handler: fn() -> Route) -> Self {
        Self {
            method,
            path,
            access,
            handler,
        }
    }

    /// Whether the method changes state (and so needs CSRF protection under a cookie).
    pub fn is_unsafe(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }

    /// Adds the route, wrapped in its access guard.
    pub fn register(&self, cfg: &mut web::ServiceConfig) {
        let access = self.access;
        let route = (self.handler)()
            .method(self.method.clone())
            .wrap(from_fn(move |req, next| {
                super::guard::require(access, req, next)
            }));
        cfg.route(self.path, route);
    }
}
