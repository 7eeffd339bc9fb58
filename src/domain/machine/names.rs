//! Names of machine configs and templates: RFC 1123 labels.

use crate::domain::FieldError;

/// Longest RFC 1123 label.
pub const LABEL_MAX: usize = 63;

/// Checks an RFC 1123 label: 1–63 of a-z, 0-9 and '-', alphanumeric at both ends.
pub fn rfc1123_label(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if v.len() > LABEL_MAX {
        return Err(FieldError::new(
            field,
            format!("must be at most {LABEL_MAX} characters (RFC 1123 label)"),
        ));
    }
    let ok_chars = v
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok_chars || !ends(v.bytes().next()) || !ends(v.bytes().last()) {
        return Err(FieldError::new(field, "must be an RFC 1123 label: a-z, 0-9 and '-', starting and ending with a letter or digit"));
    }
    Ok(v.to_owned())
}

/// A name for a machine config or template: an RFC 1123 label other than `new` (which the
/// pages use for their creation forms).
pub fn document_name(field: &str, raw: &str) -> Result<String, FieldError> {
    let name = rfc1123_label(field, raw)?;
    if name == "new" {
        return Err(FieldError::new(
            field,
            "\"new\" is reserved; choose another name",
        ));
    }
    Ok(name)
}
