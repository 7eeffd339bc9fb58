use secrecy::{ExposeSecret, SecretString};

use super::FieldError;

/// A password that meets the policy: 12 to 1,024 characters (argon2 cost grows with length, so
/// the upper bound keeps a login from being a denial-of-service lever).
pub struct NewPassword(SecretString);

impl NewPassword {
    /// Shortest accepted password.
    pub const MIN_LEN: usize = 12;
    /// Longest accepted password.
    pub const MAX_LEN: usize = 1024;

    /// Checks `raw` against the policy, naming `field` in the error.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, FieldError> {
        let chars = raw.chars().count();
        if chars < Self::MIN_LEN {
            return Err(FieldError::new(
                field,
                format!("must be at least {} characters", Self::MIN_LEN),
            ));
        }
        if chars > Self::MAX_LEN {
            return Err(FieldError::new(
                field,
                format!("must be at most {} characters", Self::MAX_LEN),
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err(FieldError::new(
                field,
                "must not contain control characters",
            ));
        }
        Ok(Self(SecretString::from(raw.to_owned())))
    }

    /// The password, for hashing only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl std::fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NewPassword(«redacted»)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforces_length_bounds() {
        assert!(NewPassword::parse_field("password", "short").is_err());
        assert!(NewPassword::parse_field("password", &"x".repeat(1025)).is_err());
        assert!(NewPassword::parse_field("password", "correct horse battery").is_ok());
        assert!(NewPassword::parse_field("password", "twelve chars\n!").is_err());
    }
}
