//! How one key's raw value, from the file or from a variable, becomes a typed value. The file
//! and the environment differ only in how the raw value arrives ([`Raw`]); everything after
//! that is this code, shared by both.

use std::net::IpAddr;
use std::path::PathBuf;

use super::LogFormat;

/// A raw value as a layer gives it: file scalars and variables arrive as text; file arrays
/// and comma-separated variables of list keys as lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Raw {
    /// One value.
    Text(String),
    /// Several values.
    List(Vec<String>),
}

/// How a key is written in the TOML file (variables are text; lists are comma-separated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A TOML integer, e.g. `workers = 3`.
    Integer,
    /// A TOML boolean, e.g. `cookie_secure = true`.
    Boolean,
    /// A TOML string, e.g. `bind = "127.0.0.1:8080"`.
    Text,
    /// A TOML array of strings, e.g. `trusted_proxies = ["10.0.0.2"]`.
    List,
    /// A TOML table of strings, e.g. `[secrets]` with `mesh-fsn = "env:MESH_KEY"`; the
    /// variable lists `NAME=VALUE` entries, comma-separated.
    Table,
}

impl Raw {
    /// Reads a variable's text: list keys split on commas (blank entries dropped), others
    /// are one value.
    pub fn from_env(kind: Kind, text: &str) -> Raw {
        match kind {
            Kind::List | Kind::Table => Raw::List(
                text.split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => Raw::Text(text.to_owned()),
        }
    }

    /// Reads a TOML value, which must have the key's TOML type; scalars become their text,
    /// so numbers and booleans are then parsed exactly as a variable's text is.
    pub fn from_toml(kind: Kind, value: &toml::Value) -> Result<Raw, String> {
        use toml::Value as V;
        match (kind, value) {
            (Kind::Integer, V::Integer(n)) => Ok(Raw::Text(n.to_string())),
            (Kind::Boolean, V::Boolean(b)) => Ok(Raw::Text(b.to_string())),
            (Kind::Text, V::String(s)) => Ok(Raw::Text(s.clone())),
            (Kind::List, V::Array(items)) => items
                .iter()
                .map(|i| match i {
                    V::String(s) => Ok(s.clone()),
                    other => Err(format!(
                        "must be an array of strings, but holds a {}",
                        other.type_str()
                    )),
                })
                .collect::<Result<_, _>>()
                .map(Raw::List),
            // Entries become `NAME=VALUE`, as the variable writes them.
            (Kind::Table, V::Table(t)) => t
                .iter()
                .map(|(k, v)| match v {
                    V::String(s) => Ok(format!("{k}={s}")),
                    other => Err(format!(
                        "must be a table of strings, but {k} is a {}",
                        other.type_str()
                    )),
                })
                .collect::<Result<_, _>>()
                .map(Raw::List),
            (kind, other) => Err(format!(
                "must be {}, not a {}",
                kind.described(),
                other.type_str()
            )),
        }
    }

    fn text(self) -> Result<String, String> {
        match self {
            Raw::Text(t) if t.trim().is_empty() => Err("must not be empty".into()),
            Raw::Text(t) => Ok(t),
            Raw::List(_) => Err("must be a single value, not a list".into()),
        }
    }

    fn list(self) -> Vec<String> {
        match self {
            Raw::List(items) => items,
            Raw::Text(t) => vec![t],
        }
    }
}

impl Kind {
    fn described(self) -> &'static str {
        match self {
            Kind::Integer => "an integer",
            Kind::Boolean => "true or false",
            Kind::Text => "a string",
            Kind::List => "an array of strings",
            Kind::Table => "a table of strings",
        }
    }
}

/// A type a setting can hold: its TOML kind, its parser and how `headroom settings` shows it.
pub trait Value: Sized {
    /// How the value is written in the file.
    const KIND: Kind;
    /// Parses the raw value; the message says what the value must be.
    fn parse(raw: Raw) -> Result<Self, String>;
    /// The value as a variable would give it (lists comma-separated).
    fn show(&self) -> String;
}

macro_rules! whole_numbers {
    ($($t:ty),+) => {$(
        impl Value for $t {
            const KIND: Kind = Kind::Integer;
            fn parse(raw: Raw) -> Result<Self, String> {
                let text = raw.text()?;
                text.trim()
                    .parse()
                    .map_err(|_| format!("must be a whole number, not {text:?}"))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )+};
}
whole_numbers!(u32, u64, usize);

impl Value for bool {
    const KIND: Kind = Kind::Boolean;
    fn parse(raw: Raw) -> Result<Self, String> {
        let text = raw.text()?;
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("must be true or false, not {text:?}")),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Value for String {
    const KIND: Kind = Kind::Text;
    fn parse(raw: Raw) -> Result<Self, String> {
        raw.text()
    }
    fn show(&self) -> String {
        self.clone()
    }
}

impl Value for PathBuf {
    const KIND: Kind = Kind::Text;
    fn parse(raw: Raw) -> Result<Self, String> {
        raw.text().map(PathBuf::from)
    }
    fn show(&self) -> String {
        self.display().to_string()
    }
}

impl Value for LogFormat {
    const KIND: Kind = Kind::Text;
    fn parse(raw: Raw) -> Result<Self, String> {
        let text = raw.text()?;
        match text.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("must be text or json, not {text:?}")),
        }
    }
    fn show(&self) -> String {
        match self {
            LogFormat::Text => "text".into(),
            LogFormat::Json => "json".into(),
        }
    }
}

impl Value for Vec<String> {
    const KIND: Kind = Kind::List;
    fn parse(raw: Raw) -> Result<Self, String> {
        Ok(raw.list())
    }
    fn show(&self) -> String {
        self.join(",")
    }
}

impl Value for crate::domain::secret::DeclaredSecrets {
    const KIND: Kind = Kind::Table;
    fn parse(raw: Raw) -> Result<Self, String> {
        Self::parse_entries(&raw.list())
    }
    fn show(&self) -> String {
        Self::show(self)
    }
}

impl Value for crate::domain::plan_check_blocking::BlockingChecks {
    const KIND: Kind = Kind::List;
    fn parse(raw: Raw) -> Result<Self, String> {
        Self::parse(&raw.list())
    }
    fn show(&self) -> String {
        self.names().join(",")
    }
}

impl Value for Vec<IpAddr> {
    const KIND: Kind = Kind::List;
    fn parse(raw: Raw) -> Result<Self, String> {
        raw.list()
            .iter()
            .map(|a| {
                a.trim()
                    .parse()
                    .map_err(|_| format!("entry {a:?} is not an IP address"))
            })
            .collect()
    }
    fn show(&self) -> String {
        self.iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_number_and_a_variable_number_take_the_same_parser() {
        let from_file = Raw::from_toml(Kind::Integer, &toml::Value::Integer(7)).unwrap();
        let from_env = Raw::from_env(Kind::Integer, "7");
        assert_eq!(u64::parse(from_file), u64::parse(from_env));
        // A negative TOML integer is refused by the same rule as a negative variable.
        let negative = Raw::from_toml(Kind::Integer, &toml::Value::Integer(-1)).unwrap();
        assert_eq!(
            u64::parse(negative).unwrap_err(),
            u64::parse(Raw::from_env(Kind::Integer, "-1")).unwrap_err()
        );
    }

    #[test]
    fn the_file_must_use_the_keys_toml_type() {
        let err = Raw::from_toml(Kind::Integer, &toml::Value::String("3".into())).unwrap_err();
        assert_eq!(err, "must be an integer, not a string");
        let err = Raw::from_toml(
            Kind::List,
            &toml::Value::Array(vec![toml::Value::Integer(1)]),
        )
        .unwrap_err();
        assert!(err.contains("array of strings"), "{err}");
    }

    #[test]
    fn list_variables_split_on_commas_and_drop_blanks() {
        assert_eq!(
            Raw::from_env(Kind::List, " a, b ,,"),
            Raw::List(vec!["a".into(), "b".into()])
        );
        assert_eq!(Raw::from_env(Kind::Text, "a,b"), Raw::Text("a,b".into()));
    }

    #[test]
    fn a_secrets_table_and_its_variable_take_the_same_parser() {
        use crate::domain::secret::DeclaredSecrets;
        let table: toml::Table =
            toml::from_str("mesh-fsn = \"env:YUBABA_MESH_KEY_FSN\"\ntunnel = \"file:/etc/t\"\n")
                .unwrap();
        let from_file = Raw::from_toml(Kind::Table, &toml::Value::Table(table)).unwrap();
        let from_env = Raw::from_env(
            Kind::Table,
            "mesh-fsn=env:YUBABA_MESH_KEY_FSN, tunnel=file:/etc/t",
        );
        let a = DeclaredSecrets::parse(from_file).unwrap();
        assert_eq!(Some(a.clone()), DeclaredSecrets::parse(from_env).ok());
        assert_eq!(
            a.show(),
            "mesh-fsn=env:YUBABA_MESH_KEY_FSN,tunnel=file:/etc/t"
        );
        let bad: toml::Table = toml::from_str("a = 1\n").unwrap();
        assert!(Raw::from_toml(Kind::Table, &toml::Value::Table(bad))
            .unwrap_err()
            .contains("table of strings"));
    }

    #[test]
    fn empty_text_and_bad_words_are_refused_with_the_rule() {
        assert_eq!(
            String::parse(Raw::Text("  ".into())).unwrap_err(),
            "must not be empty"
        );
        assert!(bool::parse(Raw::Text("yes".into()))
            .unwrap_err()
            .contains("true or false"));
        assert!(LogFormat::parse(Raw::Text("xml".into()))
            .unwrap_err()
            .contains("text or json"));
        assert!(Vec::<IpAddr>::parse(Raw::List(vec!["10.0.0.300".into()]))
            .unwrap_err()
            .contains("not an IP address"));
    }
}
