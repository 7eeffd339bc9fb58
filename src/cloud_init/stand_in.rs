//! Secrets reach a payload only after rendering. The template sees a stand-in for each secret,
//! `«secret:NAME»`, so nothing it does (branch, measure, slice, compare, dump its context) can
//! depend on a value. What people see, validate, hash and approve is the payload with stand-ins
//! (the *shown* payload); what the provider gets is that text with each stand-in replaced by
//! its value, and nothing else changed.
//!
//! Values are limited to characters that need no escaping (`domain::secret::VALUE_RULE`), so a
//! value put where a quoted stand-in was leaves the YAML as it was. Two checks here keep that
//! true: a stand-in must sit in a quoted or block scalar (a plain scalar's type could change
//! with the value: `12345678` is a number), and every `«secret:` must be a whole stand-in of a
//! secret this render has (a filter that changed one would send the changed text).

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

use super::validate::{Finding, Severity, MAX_FINDINGS_PER_CHECK};

/// Where every stand-in starts.
pub const OPENING: &str = "«secret:";

/// Findings for stand-ins that could not be replaced faithfully. `stand_ins` are those of the
/// secrets this render has. Linear in the payload's size; the YAML pass uses the event parser,
/// which keeps no recursion, and runs only when a stand-in is present.
pub fn findings(shown: &str, stand_ins: &[String]) -> Vec<Finding> {
    let mut out = Vec::new();
    altered(shown, stand_ins, &mut out);
    if out.is_empty() && stand_ins.iter().any(|s| shown.contains(s.as_str())) {
        unquoted(shown, &mut out);
    }
    out
}

fn finding(check: &'static str, message: String, line: Option<usize>) -> Finding {
    Finding {
        severity: Severity::Error,
        check,
        message,
        line,
        in_template: false,
    }
}

/// Every `«secret:` (in any letter case) that does not begin a whole stand-in of this render.
fn altered(shown: &str, stand_ins: &[String], out: &mut Vec<Finding>) {
    // ASCII folding keeps every byte offset, so `at` indexes `shown` too.
    let folded = shown.to_ascii_lowercase();
    let mut more = 0_usize;
    for (at, _) in folded.match_indices(OPENING) {
        let rest = &shown[at..];
        if stand_ins.iter().any(|s| rest.starts_with(s.as_str())) {
            continue;
        }
        if out.len() == MAX_FINDINGS_PER_CHECK {
            more += 1;
            continue;
        }
        let line = shown[..at].matches('\n').count() + 1;
        out.push(finding(
            "secret-stand-in",
            "a secret's stand-in («secret:…») was changed, or names no secret this fleet \
             provides; insert secrets whole, through `| yaml` or `| shell`"
                .to_owned(),
            Some(line),
        ));
    }
    if more > 0 {
        out.push(finding(
            "secret-stand-in",
            format!("… and {more} more changed stand-ins"),
            None,
        ));
    }
}

/// Stand-ins in plain (unquoted) scalars, keys included.
fn unquoted(shown: &str, out: &mut Vec<Finding>) {
    let mut parser = Parser::new_from_str(shown);
    loop {
        // A syntax error is the YAML check's to report.
        let Ok((event, mark)) = parser.next_token() else {
            return;
        };
        match event {
            Event::StreamEnd => return,
            // A plain scalar's type is resolved from its text, and an explicit tag
            // (`!!int "…"`) converts even a quoted one: either way the value could decide it.
            Event::Scalar(value, style, _, tag)
                if value.contains(OPENING) && (style == TScalarStyle::Plain || tag.is_some()) =>
            {
                if out.len() == MAX_FINDINGS_PER_CHECK {
                    return;
                }
                out.push(finding(
                    "secret-placement",
                    "a secret's stand-in is in a plain (unquoted) or explicitly tagged YAML \
                     value, whose type could change with the value; insert it through `| yaml` \
                     so it is a quoted string, without a tag"
                        .to_owned(),
                    Some(mark.line()),
                ));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stand_ins() -> Vec<String> {
        vec!["«secret:mesh-fsn»".into(), "«secret:tunnel»".into()]
    }

    fn checks(shown: &str) -> Vec<(&'static str, Option<usize>)> {
        findings(shown, &stand_ins())
            .into_iter()
            .map(|f| (f.check, f.line))
            .collect()
    }

    #[test]
    fn quoted_and_block_stand_ins_pass() {
        assert!(checks("#cloud-config\na: \"«secret:mesh-fsn»\"\n").is_empty());
        assert!(checks("#cloud-config\nruncmd:\n  - \"up --key='«secret:tunnel»'\"\n").is_empty());
        assert!(
            checks("#cloud-config\na: '«secret:tunnel»'\nb: |\n  x «secret:mesh-fsn»\n").is_empty()
        );
        // Nothing to check without stand-ins.
        assert!(checks("#cloud-config\na: b\n").is_empty());
    }

    #[test]
    fn a_plain_stand_in_is_refused_with_its_line() {
        assert_eq!(
            checks("#cloud-config\nb: 1\na: «secret:mesh-fsn»\n"),
            [("secret-placement", Some(3))]
        );
        assert_eq!(
            checks("#cloud-config\n«secret:tunnel»: 1\n"),
            [("secret-placement", Some(2))]
        );
        // An explicit tag converts even a quoted scalar.
        for tagged in [
            "a: !!int \"«secret:tunnel»\"",
            "a: !!float '«secret:tunnel»'",
            "a: !!str \"«secret:tunnel»\"",
        ] {
            assert_eq!(
                checks(&format!("#cloud-config\n{tagged}\n")),
                [("secret-placement", Some(2))],
                "{tagged}"
            );
        }
    }

    #[test]
    fn changed_or_foreign_stand_ins_are_refused() {
        for shown in [
            "#cloud-config\na: \"«SECRET:MESH-FSN»\"\n",
            "#cloud-config\na: \"«secret:mesh-fs\"\n",
            "#cloud-config\na: \"«secret:other»\"\n",
            "#cloud-config\na: \"«Secret:tunnel»\"\n",
        ] {
            assert_eq!(checks(shown), [("secret-stand-in", Some(2))], "{shown}");
        }
    }
}
