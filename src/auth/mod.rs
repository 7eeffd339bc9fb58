//! Who is asking and what they may do: passwords, sessions, CSRF, API tokens, throttling,
//! account management with its role checks, and the per-route guard.

pub mod accounts;
pub mod csrf;
pub mod login;
pub mod password;
pub mod principal;
pub mod secret_token;
pub mod sessions;
pub mod throttle;

pub use principal::{Caller, Principal, Via};
