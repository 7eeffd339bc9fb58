//! Names of machine configs and templates: RFC 1123 labels.

use crate::domain::text::text_value;
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

text_value!(
    /// A machine config's name: a document name (also the prefix of its machines' hostnames).
    ConfigName,
    parsed as "machine_config" by document_name
);

text_value!(
    /// A cloud-init template's name: a document name.
    TemplateName,
    parsed as "template" by document_name
);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_name_is_made_only_from_a_label_other_than_new() {
        for (raw, rule) in [
            ("", "is required"),
            ("   ", "is required"),
            ("new", "\"new\" is reserved; choose another name"),
        ] {
            let e = ConfigName::try_from(raw).unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.message.as_str()),
                ("machine_config", rule)
            );
        }
        let huge = "a".repeat(10_000);
        assert_eq!(
            TemplateName::try_from(huge.as_str()).unwrap_err().message,
            "must be at most 63 characters (RFC 1123 label)"
        );
        for hostile in [
            "<script>", "a/../b", "a\nb", "Spare", "-a", "a-", "ä", "a b",
        ] {
            let e = TemplateName::try_from(hostile).unwrap_err();
            assert_eq!(e.field, "template", "{hostile:?}");
        }
        let name = ConfigName::parse("restore_machine_config", " spare-fsn1 ").unwrap();
        assert_eq!(
            (name.as_ref(), name.to_string()),
            ("spare-fsn1", "spare-fsn1".into())
        );
        assert_eq!("tpl-1".parse::<TemplateName>().unwrap(), "tpl-1");
    }

    #[test]
    fn reading_a_name_back_goes_through_the_parser() {
        let n: ConfigName = serde_json::from_str("\"spare-fsn1\"").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"spare-fsn1\"");
        let e = serde_json::from_str::<ConfigName>("\"Not A Name\"").unwrap_err();
        assert!(
            e.to_string()
                .contains("machine_config: must be an RFC 1123 label"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn any_text_either_fails_naming_the_field_or_round_trips(raw in "(?s).{0,80}") {
            match ConfigName::parse("f", &raw) {
                Ok(n) => {
                    prop_assert!(rfc1123_label("f", n.as_str()).is_ok());
                    prop_assert_eq!(ConfigName::try_from(n.to_string()).unwrap(), n);
                }
                Err(e) => prop_assert_eq!(e.field, "f"),
            }
        }

        #[test]
        fn every_label_but_new_is_a_name(raw in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?") {
            prop_assert_eq!(ConfigName::parse("f", &raw).is_ok(), raw != "new");
        }
    }
}
