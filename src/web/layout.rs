//! The page shell: head, navigation filtered by role, flash message, and the one helper that
//! decides between a full page and an htmx partial.

use std::sync::LazyLock;

use actix_htmx::Htmx;
use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use maud::{html, Markup, DOCTYPE};

use super::paths;
use crate::auth::Principal;
use crate::domain::Role;
use crate::state::AppState;

/// Served htmx build (vendored, never fetched from a CDN).
pub const HTMX_JS: &str = "/static/htmx-2.0.11.min.js";

// htmx 2 swaps only 2xx by default; 422 carries a re-rendered form with its messages, so it is
// swapped too. Other errors are not swapped and show as a toast (static/app.js).
const HTMX_CONFIG: &str = r#"{"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"422","swap":true},{"code":"[45]..","swap":false,"error":true}],"allowEval":false,"includeIndicatorStyles":false}"#;

/// [`HTMX_CONFIG`] escaped for its attribute once, not on every page (its quotes made it the
/// largest string every page escaped).
static HTMX_CONFIG_ATTR: LazyLock<Markup> = LazyLock::new(|| html! { (HTMX_CONFIG) });

/// What every full page needs besides its content.
pub struct Frame {
    pub title: String,
    pub principal: Option<Principal>,
    pub flash: Option<String>,
    /// Which navigation entry is current.
    pub section: &'static str,
}

impl Frame {
    /// A frame for a signed-in page; consumes the session's waiting flash message.
    pub async fn load(
        state: &AppState,
        principal: &Principal,
        title: impl Into<String>,
        section: &'static str,
    ) -> Frame {
        let flash = crate::auth::sessions::take_flash(&state.ctx, principal).await;
        Frame {
            title: title.into(),
            principal: Some(principal.clone()),
            flash,
            section,
        }
    }

    /// A frame for a page seen before login.
    pub fn anonymous(title: impl Into<String>) -> Frame {
        Frame {
            title: title.into(),
            principal: None,
            flash: None,
            section: "",
        }
    }
}

/// True when the request wants only a fragment: an htmx request, except history restores and
/// boosted navigations, which need the whole document.
pub fn wants_partial(htmx: &Htmx) -> bool {
    htmx.is_htmx && !htmx.boosted && !htmx.history_restore_request
}

/// Full page or partial, as [`wants_partial`] decides. Sets `Vary: HX-Request` so caches keep
/// both.
pub fn respond(
    htmx: &Htmx,
    status: StatusCode,
    frame: Frame,
    full: impl FnOnce() -> Markup,
    partial: impl FnOnce() -> Markup,
) -> HttpResponse {
    let body = if wants_partial(htmx) {
        partial()
    } else {
        page(&frame, full())
    };
    fragment(status, body)
}

/// `markup` as it is (a fragment htmx swaps in, or a whole document), never cached, with
/// `Vary: HX-Request` because the same address answers htmx and full-page requests.
pub fn fragment(status: StatusCode, markup: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((header::VARY, "HX-Request"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string())
}

/// The answer after a successful write: htmx follows `HX-Redirect` with a full navigation (a
/// 303 would be swapped into the form's target); a plain form gets 303 See Other.
pub fn after_write(htmx: &Htmx, location: &str) -> HttpResponse {
    let mut res = if htmx.is_htmx {
        HttpResponse::Ok()
            .insert_header(("HX-Redirect", location))
            .finish()
    } else {
        super::see_other(location)
    };
    res.headers_mut()
        .insert(header::VARY, header::HeaderValue::from_static("HX-Request"));
    res
}

/// The whole document around `content`.
pub fn page(frame: &Frame, content: Markup) -> Markup {
    let csrf = frame
        .principal
        .as_ref()
        .and_then(Principal::csrf_token)
        .unwrap_or("");
    // htmx sends the session's CSRF token on every request it makes.
    // One key: written directly, the token JSON-quoted, without building a JSON map.
    let hx_headers = (!csrf.is_empty())
        .then(|| format!(r#"{{"X-CSRF-Token":{}}}"#, serde_json::Value::from(csrf)));
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=(*HTMX_CONFIG_ATTR);
                title { (frame.title) " · headroom" }
                link rel="stylesheet" href="/static/app.css";
                script src=(HTMX_JS) defer {}
                script src="/static/app.js" defer {}
            }
            body hx-headers=[hx_headers] {
                // The first stop for a keyboard: past the navigation to the page itself.
                a.skip-link href="#content" { "Skip to content" }
                header.topbar {
                    a.brand href=(paths::HOME) { "headroom" }
                    @if let Some(p) = &frame.principal {
                        nav aria-label="Main" { (nav(p.role, frame.section)) }
                        div.whoami {
                            a href=(paths::ACCOUNT) title="Your account" { (p.username) " · " span.badge { (p.role) } }
                            form method="post" action=(paths::LOGOUT) {
                                input type="hidden" name="csrf_token" value=(csrf);
                                button.linklike type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main #content tabindex="-1" {
                    @if let Some(f) = &frame.flash { div.flash role="status" { (f) } }
                    (content)
                }
                div #toasts aria-live="polite" {}
            }
        }
    }
}

fn nav(role: Role, current: &str) -> Markup {
    let entries: &[(&str, &str, Role)] = &[
        ("home", paths::HOME, Role::Viewer),
        ("provisions", paths::HISTORY, Role::Viewer),
        ("approvals", paths::APPROVALS, Role::Viewer),
        ("fleets", paths::FLEETS, Role::Viewer),
        ("machines", paths::MACHINE_CONFIGS, Role::Viewer),
        ("templates", paths::TEMPLATES, Role::Viewer),
        ("catalogue", paths::CATALOGUE, Role::Viewer),
        ("audit", paths::AUDIT, Role::Viewer),
        ("users", paths::USERS, Role::Admin),
        ("tokens", paths::TOKENS, Role::Admin),
    ];
    html! {
        @for &(name, href, needs) in entries {
            @if role.includes(needs) {
                a href=(href) aria-current=[(name == current).then_some("page")] {
                    (label(name))
                    // Only approvers have something to count; the badge loads after the page.
                    @if name == "approvals" && role.includes(Role::Approver) { " " (super::approvals::views::badge_slot()) }
                }
            }
        }
    }
}

fn label(name: &str) -> &'static str {
    match name {
        "home" => "Overview",
        "provisions" => "Provisions",
        "approvals" => "Approvals",
        "audit" => "Audit log",
        "fleets" => "Fleets",
        "machines" => "Machine configs",
        "templates" => "Templates",
        "catalogue" => "Catalogue",
        "users" => "Users",
        "tokens" => "API tokens",
        _ => "",
    }
}
