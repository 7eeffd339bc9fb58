//! The request guard. `authenticate` runs on every request: it resolves the caller (bearer
//! token or session cookie) and enforces CSRF on every unsafe method not authenticated by a
//! bearer token: first where the browser says the request came from (`Sec-Fetch-Site`,
//! `Origin`), then the token. `require` runs per route and enforces the route's [`Access`].

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{header, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpMessage, HttpResponse};

use super::client::over_tls;
use super::{is_api_path, Access, Problem};
use crate::auth::{api_tokens, csrf, secret_token, sessions, Principal};
use crate::state::AppState;

/// Resolves the principal and checks CSRF. See the module docs.
pub async fn authenticate(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
    let Some(state) = req.app_data::<web::Data<AppState>>().cloned() else {
        return Ok(next.call(req).await?.map_into_left_body());
    };
    let path = req.path().to_owned();
    if path.starts_with("/static/") {
        return Ok(next.call(req).await?.map_into_left_body());
    }
    let now = state.ctx.clock.now();
    let unsafe_method = !matches!(
        *req.method(),
        actix_web::http::Method::GET
            | actix_web::http::Method::HEAD
            | actix_web::http::Method::OPTIONS
    );

    // A bearer token that does not work is an error, never a silent fall back to anonymous.
    if let Some(auth) = req.headers().get(header::AUTHORIZATION) {
        let token = auth
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let owner = match token {
            Some(t) if !t.is_empty() => api_tokens::resolve(&state.ctx.pool, t, now)
                .await
                .map_err(internal)?,
            _ => None,
        };
        let Some(principal) = owner else {
            let res = deny(
                &req,
                StatusCode::UNAUTHORIZED,
                "the bearer token is missing, malformed, revoked or unknown",
            );
            return Ok(req.into_response(res).map_into_right_body());
        };
        req.extensions_mut().insert(principal);
        if unsafe_method {
            state.ctx.auth_epoch.bump();
        }
        return Ok(next.call(req).await?.map_into_left_body());
    }

    // Over TLS the cookies carry the `__Host-` prefix, and only those names are read: a
    // plain-named cookie may have been planted by a sibling subdomain.
    let tls = over_tls(
        req.request(),
        state.ctx.settings.cookie_secure,
        &state.ctx.settings.trusted_proxies,
    );
    let mut principal = None;
    if let Some(cookie) = req.cookie(sessions::cookie_name(tls)) {
        let life = sessions::Lifetimes {
            idle: state.ctx.settings.session_idle,
            absolute: state.ctx.settings.session_absolute,
        };
        principal = sessions::resolve(
            &state.ctx.pool,
            &state.ctx.auth_epoch,
            &state.sessions,
            cookie.value(),
            now,
            life,
        )
        .await
        .map_err(internal)?;
    }

    if unsafe_method {
        // A genuine token proves only that someone fetched our page; the browser's word on
        // who sent the request catches a harvested token planted in a victim's browser.
        if let Err(why) = request_site(&req, tls) {
            tracing::warn!(http.path = %path, reason = %why, "request refused: sent by another site");
            let res = deny(&req, StatusCode::FORBIDDEN, &why);
            return Ok(req.into_response(res).map_into_right_body());
        }
        let expected = match &principal {
            Some(p) => p.csrf_token().map(str::to_owned),
            // Only a pre-login token this instance signed counts: a planted cookie does not.
            None => req
                .cookie(csrf::login_cookie(tls))
                .map(|c| c.value().to_owned())
                .filter(|t| state.login_key.verify(t, now)),
        };
        let provided = match provided_csrf_token(&mut req).await {
            Ok(t) => t,
            Err(res) => return Ok(req.into_response(res).map_into_right_body()),
        };
        let ok = matches!((&expected, &provided), (Some(e), Some(p)) if !e.is_empty() && secret_token::constant_time_eq(e, p));
        if !ok {
            tracing::warn!(http.path = %path, "request refused: CSRF token missing or wrong");
            let res = deny(
                &req,
                StatusCode::FORBIDDEN,
                "the CSRF token is missing or wrong; reload the page and try again",
            );
            return Ok(req.into_response(res).map_into_right_body());
        }
    }
    // Belt and braces for the session-row cache: the operations that change sessions or
    // users bump the epoch after their commit, which is what makes a change seen at once.
    // This bump, before the handler runs, limits what a writer that one day forgets its own
    // bump could hide to the cache's validity (`ROW_TTL_MS`). Only for a signed-in caller:
    // an anonymous request changes no session or user (logging in creates a new row, which
    // no cached lookup can hold), and bumping for it would let anyone keep the cache cold.
    let signed_in = principal.is_some();
    if let Some(p) = principal {
        req.extensions_mut().insert(p);
    }
    if unsafe_method && signed_in {
        state.ctx.auth_epoch.bump();
    }
    Ok(next.call(req).await?.map_into_left_body())
}

/// Enforces a route's access rule.
pub async fn require(
    access: Access,
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Access::AtLeast(required) = access else {
        return next.call(req).await;
    };
    let role = req.extensions().get::<Principal>().map(|p| p.role);
    match role {
        Some(role) if role.includes(required) => next.call(req).await,
        Some(_) => {
            let res = deny(
                &req,
                StatusCode::FORBIDDEN,
                &format!("this needs the {required} role"),
            );
            Ok(req.into_response(res))
        }
        None => {
            let res = if is_api_path(req.path()) {
                deny(
                    &req,
                    StatusCode::UNAUTHORIZED,
                    "sign in or send a bearer token",
                )
            } else {
                to_login(&req)
            };
            Ok(req.into_response(res))
        }
    }
}

fn to_login(req: &ServiceRequest) -> HttpResponse {
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let location = format!("/login?next={}", urlencode(target));
    if req.headers().contains_key("hx-request") {
        // htmx follows this header with a full navigation instead of swapping a login page in.
        HttpResponse::Unauthorized()
            .insert_header(("HX-Redirect", location))
            .finish()
    } else {
        HttpResponse::SeeOther()
            .insert_header((header::LOCATION, location))
            .finish()
    }
}

/// Percent-encodes a query value.
pub fn urlencode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn deny(req: &ServiceRequest, status: StatusCode, detail: &str) -> HttpResponse {
    if is_api_path(req.path()) {
        let mut res = Problem::new(status, detail).response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        res
    } else {
        super::html_error(status, detail)
    }
}

/// [`csrf::check_request_site`] over this request's headers and the origin it reached.
fn request_site(req: &ServiceRequest, tls: bool) -> Result<(), String> {
    let host = match req.uri().authority() {
        Some(a) => Some(a.as_str()),
        None => match seen(req, header::HOST) {
            csrf::Seen::Once(h) => Some(h),
            _ => None,
        },
    };
    csrf::check_request_site(
        seen(req, header::HeaderName::from_static("sec-fetch-site")),
        seen(req, header::ORIGIN),
        &csrf::OwnOrigin { tls, host },
    )
}

/// How a request carries header `name`: absent, once as text, or otherwise (repeated, binary).
fn seen(req: &ServiceRequest, name: header::HeaderName) -> csrf::Seen<'_> {
    let mut all = req.headers().get_all(name);
    match (all.next(), all.next()) {
        (None, _) => csrf::Seen::Absent,
        (Some(v), None) => v.to_str().map_or(csrf::Seen::Garbled, csrf::Seen::Once),
        (Some(_), Some(_)) => csrf::Seen::Garbled,
    }
}

/// The CSRF token a request carries: the header, else the form field of a urlencoded body
/// (the body is read, within the size limit, and put back for the handler).
async fn provided_csrf_token(req: &mut ServiceRequest) -> Result<Option<String>, HttpResponse> {
    if let Some(v) = req.headers().get(csrf::HEADER) {
        return Ok(v.to_str().ok().map(str::to_owned));
    }
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Ok(None);
    }
    let bytes = match req.extract::<web::Bytes>().await {
        Ok(b) => b,
        Err(e) => {
            let status = e.as_response_error().status_code();
            return Err(deny(req, status, &format!("request body: {e}")));
        }
    };
    let token = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
        .ok()
        .and_then(|pairs| {
            pairs
                .into_iter()
                .find(|(k, _)| k == csrf::FIELD)
                .map(|(_, v)| v)
        });
    req.set_payload(Payload::from(bytes));
    Ok(token)
}

fn internal(e: impl std::fmt::Display) -> Error {
    tracing::error!(error = %e, "authentication lookup failed");
    actix_web::error::ErrorInternalServerError("internal error")
}
