//! Who acts: the actor the audit log names, and the caller every operation is given, with
//! the role check each operation makes. Plain values, so `auth` and `audit` both use them
//! without importing each other.

use super::Role;

/// Who did something: a user by name, or the console itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A signed-in user (or their API token).
    User(String),
    /// headroom itself, the CLI, or an anonymous visitor's attempt.
    System,
    /// Someone not signed in (failed logins).
    Anonymous,
}

impl Actor {
    /// The stored name.
    pub fn name(&self) -> &str {
        match self {
            Actor::User(n) => n,
            Actor::System => "system",
            Actor::Anonymous => "anonymous",
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

/// The caller lacks the role an operation needs, with the rule that asks for it when the role
/// depends on what is being done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this needs the {required} role{}", rule.map(|r| format!(": {r}")).unwrap_or_default())]
pub struct Forbidden {
    pub required: Role,
    pub rule: Option<&'static str>,
}

impl Forbidden {
    /// Refused by `rule`, which needs `required`.
    pub fn with_rule(required: Role, rule: &'static str) -> Self {
        Self {
            required,
            rule: Some(rule),
        }
    }
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
            Err(Forbidden {
                required,
                rule: None,
            })
        }
    }
}
