//! CSRF tokens. A session's token is derived from its secret cookie token, so nothing extra is
//! stored and a leaked database yields no CSRF token. Before login, a double-submit cookie
//! protects the login form itself.

use super::secret_token;

/// Form field carrying the token.
pub const FIELD: &str = "csrf_token";
/// Header carrying the token (htmx sends it through `hx-headers`).
pub const HEADER: &str = "x-csrf-token";
/// Cookie holding the pre-login token.
pub const LOGIN_COOKIE: &str = "headroom_login_csrf";

/// The CSRF token of the session whose cookie token is `session_token`.
pub fn for_session(session_token: &str) -> String {
    secret_token::digest(&format!("csrf\0{session_token}"))
}

/// A new pre-login token.
pub fn new_login_token() -> String {
    secret_token::generate("")
}
