//! Values of a machine config that have rules, as types: holding a `Sha256Pin` proves it is
//! 64 lowercase hex characters, and so on. Each is parsed once, from raw input, by `parse`;
//! the fields are private, so no other code can make one that breaks its rule.
//!
//! Deserializing (reading a stored version back) does not re-check the rule: a version was
//! parsed when it was written, and a rule tightened later must not make history unreadable.

use super::labels;
use super::tarball;
use crate::domain::text::text_value;
use crate::domain::FieldError;

text_value!(
    /// The yubaba tarball's pin: exactly 64 lowercase hex characters.
    Sha256Pin
);
text_value!(
    /// An https URL with a host and no credentials.
    HttpsUrl
);
text_value!(
    /// A mesh tag: `tag:` and an RFC 1123 label.
    MeshTag
);
text_value!(
    /// A yubaba taint: `key=value:Effect`.
    Taint
);
text_value!(
    /// A Hetzner label key (optional DNS-subdomain prefix and `/`, then a name).
    LabelKey
);
text_value!(
    /// A Hetzner label value (may be empty).
    LabelValue
);

impl Sha256Pin {
    /// Parses a pin given in `field`.
    pub fn parse(field: &str, raw: &str) -> Result<Self, FieldError> {
        tarball::sha256_pin(field, raw).map(Self)
    }
}

impl HttpsUrl {
    /// Parses a URL given in `field`.
    pub fn parse(field: &str, raw: &str) -> Result<Self, FieldError> {
        tarball::https_url(field, raw).map(Self)
    }
}

impl MeshTag {
    /// Parses one tag; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        labels::mesh_tag(raw).map(Self)
    }
}

impl Taint {
    /// Parses one taint; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        labels::taint(raw).map(Self)
    }
}

impl LabelKey {
    /// Parses one label key; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        labels::label_key(raw).map(Self)
    }
}

impl LabelValue {
    /// Parses one label value; the error says what is wrong with it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        labels::label_value(raw).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_parses_only_what_its_rule_allows_and_reads_back_as_text() {
        let pin = Sha256Pin::parse("p", &"a".repeat(64)).unwrap();
        assert_eq!(pin.as_str(), "a".repeat(64));
        assert_eq!(Sha256Pin::parse("p", "A").unwrap_err().field, "p");
        assert!(HttpsUrl::parse("u", "http://x").is_err());
        assert_eq!(
            &*HttpsUrl::parse("u", "https://x/y").unwrap(),
            "https://x/y"
        );
        assert!(MeshTag::parse("spare").is_err() && MeshTag::parse("tag:spare").is_ok());
        // Serialized as plain strings, so stored versions and the API keep their shape.
        assert_eq!(
            serde_json::to_string(&pin).unwrap(),
            format!("\"{}\"", "a".repeat(64))
        );
    }
}
