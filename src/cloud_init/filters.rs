//! Escaping filters. Every value reaches a payload through `yaml` (a YAML double-quoted
//! scalar, safe whatever the value holds); inside commands, `shell` makes a POSIX shell word.

use std::collections::HashMap;
use std::fmt::Write;

use tera::Value;

/// A YAML double-quoted scalar (or flow collection) for any JSON value. Control characters,
/// Unicode line breaks, the BOM and invisible direction/zero-width marks are escaped, so no
/// value can break a line or hide text; other characters stay readable.
pub fn yaml_value(v: &Value) -> String {
    match v {
        Value::String(s) => yaml_str(s),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(yaml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", yaml_str(k), yaml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A string as a YAML double-quoted scalar.
pub fn yaml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters that must not appear literally: C0 and C1 controls (NEL among them), the
/// Unicode line and paragraph separators, the BOM, zero-width and bidi marks, non-characters.
/// All are in the BMP, so `\u` suffices.
fn needs_escape(c: char) -> bool {
    matches!(c as u32,
        0x00..=0x1F | 0x7F..=0x9F | 0x2028 | 0x2029 | 0xFEFF | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFFFE | 0xFFFF)
}

/// A POSIX shell word: single-quoted, with embedded quotes closed, escaped and reopened.
pub fn shell_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// tera filter `yaml`.
pub fn yaml_filter(v: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    Ok(Value::String(yaml_value(v)))
}

/// tera filter `shell`: a shell word, or words joined by spaces for a list.
pub fn shell_filter(v: &Value, _: &HashMap<String, Value>) -> tera::Result<Value> {
    let out = match v {
        Value::Array(items) => items
            .iter()
            .map(|i| shell_word(&as_text(i)))
            .collect::<Vec<_>>()
            .join(" "),
        other => shell_word(&as_text(other)),
    };
    Ok(Value::String(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_escapes_everything_dangerous() {
        assert_eq!(yaml_str("a: b"), "\"a: b\"");
        assert_eq!(yaml_str("say \"hi\"\n- x"), "\"say \\\"hi\\\"\\n- x\"");
        assert_eq!(
            yaml_str("é\u{2028}\u{85}\u{202E}"),
            "\"é\\u2028\\u0085\\u202E\""
        );
        assert_eq!(yaml_str("«redacted» 😀"), "\"«redacted» 😀\"");
        assert_eq!(yaml_str("nul\0bell\u{7}"), "\"nul\\u0000bell\\u0007\"");
    }

    #[test]
    fn shell_words_survive_quotes() {
        assert_eq!(shell_word("it's $(rm -rf /)"), "'it'\\''s $(rm -rf /)'");
    }

    use proptest::prelude::*;

    /// The YAML scalar read back by a YAML parser, as cloud-init reads the payload.
    fn yaml_round_trip(s: &str) -> String {
        let doc = format!("k: {}\n", yaml_str(s));
        let parsed = yaml_rust2::YamlLoader::load_from_str(&doc)
            .unwrap_or_else(|e| panic!("{doc:?} does not parse: {e}"));
        parsed[0]["k"]
            .as_str()
            .unwrap_or_else(|| panic!("{doc:?} is not a string scalar"))
            .to_owned()
    }

    /// The arguments `sh` sees when `word` follows a command name, each ended by NUL.
    fn shell_round_trip(word: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {word}"))
            .env_clear()
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "sh failed on {word:?}");
        let text = String::from_utf8(out.stdout).expect("UTF-8 back");
        let mut args: Vec<String> = text.split('\0').map(str::to_owned).collect();
        assert_eq!(args.pop().as_deref(), Some(""), "output ends with NUL");
        args
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Any Unicode string survives the yaml filter: the scalar parses back to itself.
        #[test]
        fn yaml_scalars_parse_back_to_the_same_string(s in any::<String>()) {
            prop_assert_eq!(yaml_round_trip(&s), s);
        }

        /// Any string without NUL (which no argv can hold) comes out of `sh` as exactly one
        /// argument, unchanged: also after travelling through a YAML runcmd item first.
        #[test]
        fn shell_words_reach_sh_as_exactly_one_unchanged_argument(
            s in any::<String>().prop_filter("argv cannot hold NUL", |s| !s.contains('\0'))
        ) {
            let word = shell_word(&s);
            prop_assert_eq!(shell_round_trip(&word), vec![s.clone()]);
            let through_yaml = yaml_round_trip(&format!("printf '%s\\0' {word}"));
            prop_assert_eq!(through_yaml, format!("printf '%s\\0' {word}"));
        }
    }
}
