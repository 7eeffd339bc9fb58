//! The authenticated caller of a request, and the role check every operation makes.

pub use crate::domain::caller::{Caller, Forbidden};
use crate::domain::{Actor, Role};

/// How a request proved who it is.
#[derive(Debug, Clone)]
pub enum Via {
    /// A browser session; unsafe requests must carry `csrf_token`.
    Session {
        session_id: i64,
        csrf_token: String,
        /// A message waits for the next full page.
        has_flash: bool,
    },
    /// An API bearer token; no CSRF (browsers never send it by themselves).
    Token { token_id: i64 },
}

/// A signed-in user making a request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub user_id: i64,
    pub username: String,
    pub role: Role,
    pub via: Via,
}

impl Principal {
    /// The session's CSRF token, if this is a browser session.
    pub fn csrf_token(&self) -> Option<&str> {
        match &self.via {
            Via::Session { csrf_token, .. } => Some(csrf_token),
            Via::Token { .. } => None,
        }
    }

    /// The caller for domain operations.
    pub fn caller(&self) -> Caller {
        Caller {
            actor: Actor::User(self.username.clone()),
            role: self.role,
            user_id: Some(self.user_id),
        }
    }
}
