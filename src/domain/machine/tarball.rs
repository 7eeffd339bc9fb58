//! The yubaba tarball's location and pin: an https URL and a sha256.

use crate::domain::FieldError;

/// A sha256 pin: exactly 64 lowercase hex characters.
pub fn sha256_pin(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.len() != 64
        || !v
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(FieldError::new(
            field,
            "must be a sha256: exactly 64 lowercase hex characters",
        ));
    }
    Ok(v.to_owned())
}

/// An https URL with a host, no credentials, at most 2,048 characters.
pub fn https_url(field: &str, raw: &str) -> Result<String, FieldError> {
    let v = raw.trim();
    if v.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if v.chars().count() > 2048 {
        return Err(FieldError::new(field, "must be at most 2048 characters"));
    }
    let url = url::Url::parse(v)
        .map_err(|e| FieldError::new(field, format!("is not a valid URL ({e})")))?;
    if url.scheme() != "https" {
        return Err(FieldError::new(field, "must use https (the tarball is fetched at first boot and must not be tampered with in transit)"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(FieldError::new(field, "must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FieldError::new(field, "must not carry credentials"));
    }
    Ok(url.to_string())
}
