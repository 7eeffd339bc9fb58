//! The cleaners for text a scrape keeps or shows people: every error string of a sample
//! (stored each tick, shown on the dashboard, logged), the one body text echoed (yubaba's 503
//! "raft not configured"), and every string of a parsed status (`clean_field`, `clean_json`). Fleet-supplied text can carry terminal escapes, bidi overrides
//! that reorder what a reader sees, or megabytes; what leaves here has none of that.

/// Characters of a sample's error kept, at most (then "…").
pub const ERROR_CAP_CHARS: usize = 300;

/// Unicode's format characters (general category Cf, Unicode 15): invisible, and some of
/// them (U+202A–202E, U+2066–2069) reorder the text around them when displayed.
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Whether `c` is a control (Cc) or format (Cf) character.
pub fn is_hidden(c: char) -> bool {
    let u = u32::from(c);
    c.is_control() || FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
}

/// `text` made safe to show: whitespace runs (newlines and tabs included) become one space,
/// control and format characters are removed, the ends are trimmed, and at most `cap`
/// characters are kept (then "…"). Reads no further than it needs, so a huge input costs
/// only the characters kept plus the hidden ones skipped before the cap.
pub fn clean(text: &str, cap: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if is_hidden(c) {
            continue;
        }
        let needed = if pending_space { 2 } else { 1 };
        if kept + needed > cap {
            out.push('…');
            return out;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
        kept += needed;
    }
    out
}

/// A sample's error as stored and shown: `clean` with `ERROR_CAP_CHARS`.
pub fn clean_error(reason: &str) -> String {
    clean(reason, ERROR_CAP_CHARS)
}

/// Characters of one scraped string (a member's address, a state, any string or key of the
/// evidence) kept, at most (then "…"): room for a 253-character host name and its port.
pub const FIELD_CAP_CHARS: usize = 300;

/// Marks where `clean_field` removed hidden characters.
pub const REPLACED: char = '\u{FFFD}';

/// Marks where `clean_field` cut a string.
pub const CUT: char = '…';

/// Whether `c` is replaced in a scraped field: hidden (`is_hidden`) or a line or paragraph
/// separator, which reflow text as a newline would.
fn is_unsafe_in_field(c: char) -> bool {
    is_hidden(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A string taken from a scraped body, made safe to store and show. Unlike `clean`, which
/// tidies prose, it keeps the text's shape: each run of control, format (bidi, zero-width)
/// or separator characters becomes one `REPLACED`, so an address that carried one is visibly
/// damaged (and unusable, see `urls::member_base`) instead of quietly turned into a different
/// address; at most `cap` characters are kept, then `CUT`.
pub fn clean_field(text: &str, cap: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    let mut replaced = false;
    for c in text.chars() {
        let c = if is_unsafe_in_field(c) {
            if replaced {
                continue;
            }
            replaced = true;
            REPLACED
        } else {
            replaced = false;
            c
        };
        if kept == cap {
            out.push(CUT);
            return out;
        }
        out.push(c);
        kept += 1;
    }
    out
}

/// A parsed scraped body with `clean_field` applied to every string and every object key, so
/// nothing kept from it (evidence, addresses, states) carries a hidden character. Keys that
/// clean to the same text keep the last value, as a JSON object with a repeated key would.
pub fn clean_json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(clean_field(&s, FIELD_CAP_CHARS)),
        Value::Array(items) => Value::Array(items.into_iter().map(clean_json).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (clean_field(&k, FIELD_CAP_CHARS), clean_json(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_format_characters_are_removed_and_whitespace_collapsed() {
        let s = "  a\n\t\u{1b}[31mb\u{202e}c\u{2066}d\u{200b}e\u{feff}\u{0}  f \r\n";
        assert_eq!(clean_error(s), "a [31mbcde f");
        assert_eq!(clean_error(""), "");
        assert_eq!(clean_error(" \n\u{202a} "), "");
        assert!(is_hidden('\u{2069}') && is_hidden('\u{85}') && !is_hidden('é'));
    }

    #[test]
    fn a_field_keeps_its_shape_with_hidden_runs_marked_once() {
        assert_eq!(
            clean_field("127.0.0.1:1\u{202e}\u{200b}7442", FIELD_CAP_CHARS),
            "127.0.0.1:1\u{FFFD}7442"
        );
        assert_eq!(
            clean_field("\u{1b}[31ma\u{0}b\u{2028}", 10),
            "\u{FFFD}[31ma\u{FFFD}b\u{FFFD}"
        );
        assert_eq!(
            clean_field("10.0.0.2:7443", FIELD_CAP_CHARS),
            "10.0.0.2:7443"
        );
        assert_eq!(clean_field("abcdef", 3), "abc…");
        assert_eq!(clean_field("abc", 3), "abc");
    }

    #[test]
    fn every_string_and_key_of_a_scraped_body_is_cleaned() {
        let v = serde_json::json!({
            "a\u{202e}": ["x\u{2066}y", 1, null, {"k": "\u{0}"}],
            "n": 2,
        });
        assert_eq!(
            clean_json(v),
            serde_json::json!({
                "a\u{FFFD}": ["x\u{FFFD}y", 1, null, {"k": "\u{FFFD}"}],
                "n": 2,
            })
        );
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Whatever a node sends, a cleaned field holds no control, format (bidi,
        /// zero-width) or separator character and at most `cap` characters plus the cut mark.
        #[test]
        fn a_cleaned_field_never_holds_a_hidden_character_and_is_capped(
            s in any::<String>(),
            cap in 0_usize..64,
        ) {
            let c = clean_field(&s, cap);
            prop_assert!(c.chars().all(|ch| !is_unsafe_in_field(ch)), "{:?}", c);
            prop_assert!(c.chars().count() <= cap + 1);
            if s.chars().all(|ch| !is_unsafe_in_field(ch)) && s.chars().count() <= cap {
                prop_assert_eq!(c, s);
            }
        }

        /// The same with hidden characters planted densely among ordinary ones.
        #[test]
        fn planted_bidi_and_controls_never_survive(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("\u{202e}".to_owned()),
                    Just("\u{2066}".to_owned()),
                    Just("\u{200b}".to_owned()),
                    Just("\u{0}".to_owned()),
                    Just("\u{1b}".to_owned()),
                    Just("\u{feff}".to_owned()),
                    "[a-z0-9.:]{0,8}",
                ],
                0..200,
            ),
        ) {
            let s: String = parts.concat();
            let c = clean_field(&s, FIELD_CAP_CHARS);
            prop_assert!(c.chars().all(|ch| !is_hidden(ch)), "{:?}", c);
            prop_assert!(c.chars().count() <= FIELD_CAP_CHARS + 1);
        }
    }

    #[test]
    fn long_text_is_capped_with_an_ellipsis() {
        let long = format!("{}\u{202e}{}", "A".repeat(250_000), "x y ".repeat(10));
        let c = clean_error(&long);
        assert_eq!(c.chars().count(), ERROR_CAP_CHARS + 1);
        assert!(c.ends_with('…'));
        let exact = "b".repeat(ERROR_CAP_CHARS);
        assert_eq!(clean_error(&exact), exact);
        // A space that would be the last kept character ends the text instead.
        assert_eq!(clean("ab cd", 3), "ab…");
        assert_eq!(clean("ab cd", 4), "ab c…");
    }
}
