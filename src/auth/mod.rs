//! Who is asking and what they may do: sign-in (passwords hashed through `Ctx::hashing`), sessions, CSRF, API tokens, throttling,
//! account management with its role checks, and the per-route guard.

pub mod api_tokens;
pub mod csrf;
pub mod login;
pub mod principal;
pub mod secret_token;
pub mod sessions;
pub mod throttle;
pub mod tokens;
pub mod users;

pub use principal::{Caller, Principal, Via};

/// Last-use times (sessions, API tokens) are written back at most this often, so reading
/// pages is not a database write per request.
const ACTIVITY_WRITE_EVERY_MS: i64 = 60_000;
