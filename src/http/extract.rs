//! Extractors for what the guard resolved.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpMessage, HttpRequest};

use crate::auth::Principal;

/// The signed-in caller. Routes behind `Access::AtLeast` always have one; elsewhere the
/// extraction fails with 401.
impl FromRequest for Principal {
    type Error = actix_web::Error;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .ok_or_else(|| actix_web::error::ErrorUnauthorized("sign in first")),
        )
    }
}

/// The caller, if signed in (for public pages such as the login form).
pub struct MaybePrincipal(pub Option<Principal>);

impl FromRequest for MaybePrincipal {
    type Error = std::convert::Infallible;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(MaybePrincipal(
            req.extensions().get::<Principal>().cloned(),
        )))
    }
}
