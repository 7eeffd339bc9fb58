//! The plumbing every text newtype shares: read access, display, comparisons with `&str`, and
//! (for the `parsed` kind) the conversions that all go through the type's one parser, so a
//! value can only be made by parsing, whether it comes from a form, a JSON body or storage.

/// Declares a `String` newtype with a private field and its read-only plumbing.
///
/// `text_value!(Name)` keeps serde transparent (a stored value is read back unchecked);
/// `text_value!(Name, parsed as "field" by parser)` adds `parse(field, raw)`, `FromStr`,
/// `TryFrom<&str>`/`TryFrom<String>` (naming `"field"`) and a `Deserialize` that runs `parser`.
macro_rules! text_value {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        $crate::domain::text::text_value!(@read $name);
    };
    ($(#[$doc:meta])* $name:ident, parsed as $field:literal by $parser:path) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize,
        )]
        #[serde(try_from = "String")]
        pub struct $name(String);

        $crate::domain::text::text_value!(@read $name);

        impl $name {
            /// Parses `raw`, given in `field`; the error names the field and the rule broken.
            pub fn parse(field: &str, raw: &str) -> Result<Self, $crate::domain::FieldError> {
                $parser(field, raw).map(Self)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::domain::FieldError;
            fn try_from(raw: &str) -> Result<Self, Self::Error> {
                Self::parse($field, raw)
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::domain::FieldError;
            fn try_from(raw: String) -> Result<Self, Self::Error> {
                Self::parse($field, &raw)
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::FieldError;
            fn from_str(raw: &str) -> Result<Self, Self::Err> {
                Self::parse($field, raw)
            }
        }
    };
    (@read $name:ident) => {
        impl $name {
            /// The value as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        // Hashes and compares as its text, so `[tag].join(",")` and map look-ups by `&str` work.
        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }
    };
}

pub(crate) use text_value;
