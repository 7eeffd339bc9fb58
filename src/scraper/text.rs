//! The one cleaner for text a scrape shows people: every error string of a sample (stored
//! each tick, shown on the dashboard, logged) and the one body text echoed (yubaba's 503
//! "raft not configured"). Fleet-supplied text can carry terminal escapes, bidi overrides
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
