//! Login and logout handlers.

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};

use super::forms::{safe_next, LoginForm};
use super::views;
use crate::auth::login::{self, LoginError};
use crate::auth::{csrf, sessions, Principal, Via};
use crate::domain::FieldErrors;
use crate::http::client::{client_addr, over_tls};
use crate::http::extract::MaybePrincipal;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::{paths, see_other};

#[derive(serde::Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
}

/// Whether the browser reached us over TLS, which also picks the cookies' `__Host-` names.
fn tls(state: &AppState, req: &HttpRequest) -> bool {
    let settings = &state.ctx.settings;
    over_tls(req, settings.cookie_secure, &settings.trusted_proxies)
}

/// A cookie named by `name` for this request's TLS-ness (`Path=/`, no `Domain`, as the
/// `__Host-` names require).
fn cookie(
    state: &AppState,
    req: &HttpRequest,
    name: fn(bool) -> &'static str,
    value: String,
) -> Cookie<'static> {
    let secure = tls(state, req);
    Cookie::build(name(secure), value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .finish()
}

fn render_form(
    state: &AppState,
    req: &HttpRequest,
    status: StatusCode,
    username: &str,
    next: &str,
    message: Option<&str>,
    errors: &FieldErrors,
) -> HttpResponse {
    // Reuse the visitor's pre-login CSRF cookie so several open tabs keep working, but only
    // one this instance signed and that is still fresh; anything else is replaced.
    let now = state.ctx.clock.now();
    let token = req
        .cookie(csrf::login_cookie(tls(state, req)))
        .map(|c| c.value().to_owned())
        .filter(|v| state.login_key.verify(v, now))
        .unwrap_or_else(|| state.login_key.issue(now));
    let body = views::login_page(&token, username, next, message, errors);
    HttpResponse::build(status)
        .cookie(cookie(state, req, csrf::login_cookie, token))
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .content_type("text/html; charset=utf-8")
        .body(body.into_string())
}

/// GET /login
pub async fn form(
    state: web::Data<AppState>,
    req: HttpRequest,
    who: MaybePrincipal,
    query: web::Query<NextQuery>,
) -> HttpResponse {
    if who.0.is_some() {
        return see_other(safe_next(&query.next));
    }
    render_form(
        &state,
        &req,
        StatusCode::OK,
        "",
        safe_next(&query.next),
        None,
        &FieldErrors::default(),
    )
}

/// POST /login
pub async fn submit(
    state: web::Data<AppState>,
    req: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, WebError> {
    let addr = client_addr(&req, &state.ctx.settings.trusted_proxies)
        .map_or_else(|| "unknown".to_owned(), |a| a.to_string());
    let next = safe_next(&form.next).to_owned();
    let shown_name: String = form.username.chars().take(64).collect();
    match login::login(&state.ctx, &form.username, &form.password, &addr).await {
        Ok(done) => {
            let mut res = see_other(&next);
            res.add_cookie(&cookie(
                &state,
                &req,
                sessions::cookie_name,
                done.session_token,
            ))
            .map_err(|e| WebError::from(anyhow::Error::from(e)))?;
            let mut expired = cookie(&state, &req, csrf::login_cookie, String::new());
            expired.set_max_age(CookieDuration::ZERO);
            res.add_cookie(&expired)
                .map_err(|e| WebError::from(anyhow::Error::from(e)))?;
            Ok(res)
        }
        Err(LoginError::Invalid(errors)) => Ok(render_form(
            &state,
            &req,
            StatusCode::UNPROCESSABLE_ENTITY,
            &shown_name,
            &next,
            None,
            &errors,
        )),
        Err(LoginError::Rejected) => Ok(render_form(
            &state,
            &req,
            StatusCode::UNAUTHORIZED,
            &shown_name,
            &next,
            Some("Wrong username or password."),
            &FieldErrors::default(),
        )),
        Err(e @ (LoginError::Throttled(wait) | LoginError::Busy(wait))) => {
            let status = match e {
                LoginError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::TOO_MANY_REQUESTS,
            };
            let mut res = render_form(
                &state,
                &req,
                status,
                &shown_name,
                &next,
                Some(&e.to_string()),
                &FieldErrors::default(),
            );
            res.headers_mut().insert(
                actix_web::http::header::RETRY_AFTER,
                actix_web::http::header::HeaderValue::from(wait.as_secs().max(1)),
            );
            Ok(res)
        }
        Err(LoginError::Internal(e)) => Err(e.into()),
    }
}

/// POST /logout
pub async fn logout(
    state: web::Data<AppState>,
    req: HttpRequest,
    principal: Principal,
) -> Result<HttpResponse, WebError> {
    if let Via::Session { session_id, .. } = principal.via {
        login::logout(&state.ctx, session_id, &principal.username).await?;
    }
    let mut res = see_other(paths::LOGIN);
    let mut gone = cookie(&state, &req, sessions::cookie_name, String::new());
    gone.set_max_age(CookieDuration::ZERO);
    res.add_cookie(&gone)
        .map_err(|e| WebError::from(anyhow::Error::from(e)))?;
    Ok(res)
}
