//! Template lint: every `{{ … }}` must end with the `yaml` filter, so no value reaches the YAML
//! raw. Commands are built with `shell` inside `{% set %}` and then inserted with `| yaml`.

use super::validate::{Finding, Severity, MAX_FINDINGS_PER_CHECK};

/// Findings (template line numbers) for insertions that skip the `yaml` filter.
/// Linear in the template's size: lines are counted from one tag to the next, never from the
/// start again, and past [`MAX_FINDINGS_PER_CHECK`] insertions are only counted.
pub fn raw_insertions(body: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut more = 0_usize;
    let mut rest = body;
    let mut line = 1;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let expr = &rest[start + 2..start + len];
        line += rest[..start].matches('\n').count();
        let expr_lines = expr.matches('\n').count();
        if !ends_with_yaml(expr) && findings.len() == MAX_FINDINGS_PER_CHECK {
            more += 1;
        } else if !ends_with_yaml(expr) {
            let shown: String = expr
                .trim()
                .trim_matches('-')
                .trim()
                .chars()
                .take(60)
                .collect();
            findings.push(Finding {
                severity: Severity::Error,
                check: "raw-insertion",
                message: format!("`{{{{ {shown} }}}}` inserts a value without the yaml filter; end it with `| yaml` (build commands with `| shell` inside {{% set %}} first)"),
                line: Some(line),
                in_template: true,
            });
        }
        line += expr_lines;
        rest = &rest[start + len + 2..];
    }
    if more > 0 {
        findings.push(Finding {
            severity: Severity::Error,
            check: "raw-insertion",
            message: format!("… and {more} more insertions without the yaml filter"),
            line: None,
            in_template: true,
        });
    }
    findings
}

fn ends_with_yaml(expr: &str) -> bool {
    // The last `|` outside quotes starts the final filter.
    let mut last_pipe = None;
    let mut quote: Option<char> = None;
    for (i, c) in expr.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '|') => last_pipe = Some(i),
            _ => {}
        }
    }
    last_pipe.is_some_and(|i| expr[i + 1..].trim().trim_end_matches('-').trim() == "yaml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_raw_and_shell_only_insertions() {
        let body = "#cloud-config\nhostname: {{ hostname }}\nfqdn: {{ hostname | yaml }}\nx: {{ a | shell }}\ny: {{- \"a|b\" | yaml -}}\n";
        let lines: Vec<usize> = raw_insertions(body).iter().filter_map(|f| f.line).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn many_insertions_are_counted_past_the_cap_with_their_lines_right() {
        let body = "#cloud-config\n".to_owned() + &"{{x}}\n".repeat(5000);
        let findings = raw_insertions(&body);
        assert_eq!(findings.len(), MAX_FINDINGS_PER_CHECK + 1);
        assert_eq!(findings[0].line, Some(2));
        assert_eq!(findings[19].line, Some(21));
        assert!(
            findings[20].message.contains("4980 more"),
            "{}",
            findings[20].message
        );
        // A tag spanning lines moves the next one down.
        let body = "a\n{{ x\n| yaml }}\n{{ y }}\n";
        assert_eq!(raw_insertions(body)[0].line, Some(4));
    }
}
