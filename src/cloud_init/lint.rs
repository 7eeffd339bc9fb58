//! Template lint: every `{{ … }}` must end with the `yaml` filter, so no value reaches the YAML
//! raw. Commands are built with `shell` inside `{% set %}` and then inserted with `| yaml`.

use super::validate::{Finding, Severity};

/// Findings (template line numbers) for insertions that skip the `yaml` filter.
pub fn raw_insertions(body: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut rest = body;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let expr = &rest[start + 2..start + len];
        let line = body[..offset + start].matches('\n').count() + 1;
        if !ends_with_yaml(expr) {
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
        offset += start + len + 2;
        rest = &rest[start + len + 2..];
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
}
