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
}
