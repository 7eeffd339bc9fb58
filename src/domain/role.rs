use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::FieldError;

/// What a user may do. Each role includes every role before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads everything but secrets.
    Viewer,
    /// Edits machine configs, templates and fleets; requests provisions.
    Operator,
    /// Approves or rejects provision requests.
    Approver,
    /// Manages users, tokens and settings.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Operator, Role::Approver, Role::Admin];

    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }

    /// Whether this role includes `required`.
    pub fn includes(self, required: Role) -> bool {
        self >= required
    }

    /// Parses a submitted role, naming `field` when it is not one of the four.
    pub fn parse_field(field: &str, raw: &str) -> Result<Role, FieldError> {
        raw.trim()
            .parse()
            .map_err(|_| FieldError::new(field, "must be one of viewer, operator, approver, admin"))
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Role {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Role::ALL.into_iter().find(|r| r.as_str() == s).ok_or(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_include_the_ones_before_them() {
        assert!(Role::Admin.includes(Role::Viewer));
        assert!(Role::Approver.includes(Role::Operator));
        assert!(!Role::Operator.includes(Role::Approver));
        assert!(Role::Viewer.includes(Role::Viewer));
    }

    #[test]
    fn unknown_role_names_the_field() {
        let e = Role::parse_field("role", "root").unwrap_err();
        assert_eq!(e.field, "role");
        assert_eq!(
            Role::parse_field("role", "approver").unwrap(),
            Role::Approver
        );
    }
}
