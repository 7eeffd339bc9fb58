//! The authenticated caller of a request, and the role check every operation makes.

use crate::audit::Actor;
use crate::domain::Role;

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

/// Whoever invokes a domain operation: a user, or the console itself (CLI, demo seeding).
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub role: Role,
    pub user_id: Option<i64>,
}

/// The caller lacks the role an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this needs the {required} role")]
pub struct Forbidden {
    pub required: Role,
}

impl Caller {
    /// The console acting on its own (CLI on the server, demo seeding): full rights.
    pub fn system() -> Self {
        Self {
            actor: Actor::System,
            role: Role::Admin,
            user_id: None,
        }
    }

    /// Fails unless the caller's role includes `required`.
    pub fn require(&self, required: Role) -> Result<(), Forbidden> {
        if self.role.includes(required) {
            Ok(())
        } else {
            Err(Forbidden { required })
        }
    }
}
