//! Escaping filters. Every value reaches a payload through `yaml` (a YAML double-quoted
//! scalar, safe whatever the value holds); inside commands, `shell` makes a POSIX shell word.

use std::collections::HashMap;
use std::fmt::Write;

use tera::Value;

/// A YAML double-quoted scalar (or flow collection) for any JSON value. Everything outside
/// printable ASCII is escaped, so no line break, BOM or bidi control survives as itself, and
/// astral characters use `\U` (PyYAML does not join JSON-style surrogate pairs).
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
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08X}", c as u32);
            }
        }
    }
    out.push('"');
    out
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
        assert_eq!(yaml_str("é\u{2028}"), "\"\\u00E9\\u2028\"");
        assert_eq!(yaml_str("😀"), "\"\\U0001F600\"");
    }

    #[test]
    fn shell_words_survive_quotes() {
        assert_eq!(shell_word("it's $(rm -rf /)"), "'it'\\''s $(rm -rf /)'");
    }
}
