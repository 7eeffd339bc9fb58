use std::fmt;

use super::FieldError;

/// A login name: 1–64 characters of lowercase letters, digits, `.`, `_` and `-`, starting with
/// a letter or digit. Narrow on purpose: names show up in audit rows, URLs and CSV exports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Username(String);

impl Username {
    /// The longest accepted name.
    pub const MAX_LEN: usize = 64;

    /// Names the console uses for actors that are not users (`Actor::System`,
    /// `Actor::Anonymous`): requests, audit rows and timelines compare actors by name, so a
    /// user with one of these names would pass for the console itself (e.g. as the requester
    /// of every headroom proposal).
    pub const RESERVED: [&'static str; 2] = ["system", "anonymous"];

    /// Parses a submitted name, naming `field` in the error.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, FieldError> {
        let value = raw.trim();
        if value.is_empty() {
            return Err(FieldError::new(field, "is required"));
        }
        if value.len() > Self::MAX_LEN {
            return Err(FieldError::new(
                field,
                format!("must be at most {} characters", Self::MAX_LEN),
            ));
        }
        let first_ok = value
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let all_ok = value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
        if !first_ok || !all_ok {
            return Err(FieldError::new(
                field,
                "must start with a lowercase letter or digit and use only a-z, 0-9, '.', '_' and '-'",
            ));
        }
        if Self::RESERVED.contains(&value) {
            return Err(FieldError::new(
                field,
                "is reserved: \"system\" and \"anonymous\" name the console's own actions",
            ));
        }
        Ok(Self(value.to_owned()))
    }

    /// Parses a name with the field called `username`.
    pub fn parse(raw: &str) -> Result<Self, FieldError> {
        Self::parse_field("username", raw)
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Username> for String {
    fn from(name: Username) -> String {
        name.0
    }
}

// Lets a form's raw text be compared with a parsed name (e.g. to keep a choice selected).
impl PartialEq<Username> for String {
    fn eq(&self, other: &Username) -> bool {
        *self == other.0
    }
}

impl AsRef<str> for Username {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        assert_eq!(
            Username::parse("alice.ops-1").unwrap().as_str(),
            "alice.ops-1"
        );
    }

    #[test]
    fn rejects_hostile_names() {
        for raw in [
            "",
            " ",
            "Alice",
            "-x",
            "a b",
            "<script>",
            "x'; DROP TABLE users;--",
            "a\nb",
        ] {
            assert!(Username::parse(raw).is_err(), "{raw:?} should be rejected");
        }
        assert!(Username::parse(&"a".repeat(65)).is_err());
    }

    #[test]
    fn the_names_of_the_consoles_own_actors_are_reserved() {
        use crate::domain::Actor;
        for actor in [Actor::System, Actor::Anonymous] {
            let name = actor.name();
            assert!(Username::RESERVED.contains(&name), "{name}");
            let e = Username::parse(name).unwrap_err();
            assert!(e.to_string().contains("is reserved"), "{e}");
            // Surrounding blanks are trimmed first, so they do not slip past the rule.
            assert!(Username::parse(&format!(" {name} ")).is_err());
        }
        // Only the exact names: a name merely containing one stays ordinary.
        assert!(Username::parse("system-ops").is_ok());
        assert!(Username::parse("anonymous1").is_ok());
    }
}
