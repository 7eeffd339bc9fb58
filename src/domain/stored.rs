//! Values read back from storage. One that no longer parses is headroom's fault (a database
//! edited by hand, a rule tightened since it was written), never the caller's: it is its own
//! error, which operations answer as an internal error rather than a default shown as real.

/// A stored column whose value does not parse as its domain type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored {column} {value:?} does not parse: {reason}")]
pub struct StoredValueError {
    column: &'static str,
    value: String,
    reason: String,
}

/// Parses the value `raw` of the stored `column` with `parse`; a failure names the column and
/// the value (so never use it on a secret column).
pub fn parse_stored<T, E: std::fmt::Display>(
    column: &'static str,
    raw: &str,
    parse: impl FnOnce(&str, &str) -> Result<T, E>,
) -> Result<T, StoredValueError> {
    parse(column, raw).map_err(|e| StoredValueError {
        column,
        value: raw.to_owned(),
        reason: e.to_string(),
    })
}

/// Looks the value `raw` of the stored `column` up in a closed set of names (`lookup`); a name
/// this build does not know names the column and the value.
pub fn parse_stored_name<T>(
    column: &'static str,
    raw: &str,
    lookup: impl FnOnce(&str) -> Option<T>,
) -> Result<T, StoredValueError> {
    parse_stored(column, raw, |_, name| {
        lookup(name).ok_or("not a name this build knows")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Username;

    #[test]
    fn a_stored_value_that_does_not_parse_names_its_column() {
        let e =
            parse_stored("api_tokens.username", "Not A Name", Username::parse_field).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("stored api_tokens.username \"Not A Name\""),
            "{e}"
        );
        let name = parse_stored("users.username", "alice", Username::parse_field).unwrap();
        assert_eq!(name.as_str(), "alice");
    }

    #[test]
    fn a_stored_name_outside_the_closed_set_names_its_column() {
        let lookup = |n: &str| (n == "verified").then_some(1);
        assert_eq!(
            parse_stored_name("pin_checks.verdict", "verified", lookup),
            Ok(1)
        );
        let e = parse_stored_name("pin_checks.verdict", "maybe", lookup).unwrap_err();
        assert!(
            e.to_string().contains("pin_checks.verdict \"maybe\""),
            "{e}"
        );
    }
}
