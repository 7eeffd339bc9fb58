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
}
