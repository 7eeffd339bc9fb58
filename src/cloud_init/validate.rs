//! The seven blocking checks on a rendered payload (README.md, "cloud-init templates"):
//! leftover template markers, header, YAML mapping and runcmd shape, known top-level keys, size
//! against the cap, the sha256 check of the tarball, and cloud-init's own JSON schema when
//! available.

use std::collections::HashMap;

use serde::Serialize;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::{ScanError, Yaml, YamlLoader};

use super::known_keys::KNOWN_KEYS;
use super::MAX_PAYLOAD_BYTES;

/// How serious a finding is; any error blocks sending the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One result of validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Which check produced it (stable identifier).
    pub check: &'static str,
    pub message: String,
    /// 1-based line, in the payload (or in the template when `in_template`).
    pub line: Option<usize>,
    pub in_template: bool,
}

fn finding(
    severity: Severity,
    check: &'static str,
    message: String,
    line: Option<usize>,
) -> Finding {
    Finding {
        severity,
        check,
        message,
        line,
        in_template: false,
    }
}

/// Most findings one check reports; the rest are counted in one closing finding. A payload is
/// at most a few hundred KiB, but a hostile one can hold tens of thousands of bad lines, and
/// neither the page nor the time to build each message should grow with them.
pub const MAX_FINDINGS_PER_CHECK: usize = 20;

/// Runs every payload check. Each check costs time linear in the payload's size.
pub fn validate(payload: &str, pin: &str, schema: Option<&jsonschema::Validator>) -> Vec<Finding> {
    let mut out = Vec::new();
    leftovers(payload, &mut out);
    header(payload, &mut out);
    size(payload, &mut out);
    // The document is built only once this event pass (which keeps its own stack and never
    // recurses) has walked all of it: the loader, every check below and dropping the built
    // `Yaml` all recurse once per level, and the loader copies an aliased value at every use.
    if !shape_is_safe(payload, &mut out) {
        return cap_per_check(out);
    }
    let Some(doc) = parse(payload, &mut out) else {
        return cap_per_check(out);
    };
    let lines = KeyLines::of(payload);
    runcmd_shape(payload, &lines, &doc, &mut out);
    known_keys(&lines, &doc, &mut out);
    tarball_check(&lines, &doc, pin, &mut out);
    if let Some(schema) = schema {
        schema_check(&lines, &doc, schema, &mut out);
    }
    cap_per_check(out)
}

/// Keeps the first [`MAX_FINDINGS_PER_CHECK`] findings of each check and says how many more
/// there were.
fn cap_per_check(findings: Vec<Finding>) -> Vec<Finding> {
    let mut kept: Vec<Finding> = Vec::with_capacity(findings.len().min(64));
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    let mut dropped: Vec<(&'static str, Severity, usize)> = Vec::new();
    for f in findings {
        let n = seen.entry(f.check).or_default();
        *n += 1;
        if *n <= MAX_FINDINGS_PER_CHECK {
            kept.push(f);
        } else if let Some(d) = dropped.iter_mut().find(|d| d.0 == f.check) {
            d.2 += 1;
        } else {
            dropped.push((f.check, f.severity, 1));
        }
    }
    for (check, severity, n) in dropped {
        kept.push(finding(
            severity,
            check,
            format!("… and {n} more like the above"),
            None,
        ));
    }
    kept
}

/// Deepest nesting of collections a payload may have (the top-level mapping is level 1).
/// Real cloud-config stays under ten (`write_files` → item → key; `apt.sources.<name>` …); 64
/// leaves room for any hand-written structure, while every recursive step after parsing (the
/// loader, known keys, the schema check and its JSON copy, dropping the document) stays a few
/// hundred KiB of stack at most, far inside a 2 MiB blocking-pool thread. Beyond it a 128 KiB
/// payload of `- - - …` reaches 65,000 levels and overflows the server's stack.
pub const MAX_YAML_DEPTH: usize = 64;

/// Walks the payload's events once, before anything builds the document: flags the first
/// syntax error, anchor or alias (`&name`, `*name`), or collection nested deeper than
/// [`MAX_YAML_DEPTH`]. True when none was found, so the document may be built.
fn shape_is_safe(payload: &str, out: &mut Vec<Finding>) -> bool {
    let mut parser = Parser::new_from_str(payload);
    let mut depth = 0_usize;
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            // The scanner reads flow collections ahead and stops at its own limit (255 levels)
            // before their events reach us: that is nesting deeper than ours too.
            Err(e) if e.info() == SCANNER_DEPTH_LIMIT => {
                out.push(finding(
                    Severity::Error,
                    "yaml",
                    too_deep(),
                    Some(e.marker().line()),
                ));
                return false;
            }
            Err(e) => {
                out.push(not_yaml(&e));
                return false;
            }
        };
        let message = match event {
            Event::StreamEnd => return true,
            Event::SequenceEnd | Event::MappingEnd => {
                depth = depth.saturating_sub(1);
                continue;
            }
            Event::Alias(_) => Some(anchor_refusal("aliases (`*name`)")),
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                depth += 1;
                if anchor > 0 {
                    Some(anchor_refusal("anchors (`&name`)"))
                } else if depth > MAX_YAML_DEPTH {
                    Some(too_deep())
                } else {
                    None
                }
            }
            Event::Scalar(_, _, anchor, _) if anchor > 0 => {
                Some(anchor_refusal("anchors (`&name`)"))
            }
            _ => None,
        };
        if let Some(message) = message {
            out.push(finding(Severity::Error, "yaml", message, Some(mark.line())));
            return false;
        }
    }
}

/// The finding for a payload the YAML scanner gave up on, at the line where it stopped.
fn not_yaml(e: &ScanError) -> Finding {
    finding(
        Severity::Error,
        "yaml",
        format!("not valid YAML: {}", e.info()),
        Some(e.marker().line()),
    )
}

/// What yaml_rust2's scanner says when flow collections nest past 255 levels.
const SCANNER_DEPTH_LIMIT: &str = "recursion limit exceeded";

fn too_deep() -> String {
    format!(
        "the YAML is nested deeper than {MAX_YAML_DEPTH} levels; cloud-config needs a handful, and deeper documents are not parsed"
    )
}

/// Why anchors and aliases are refused; `which` names the one found.
fn anchor_refusal(which: &str) -> String {
    format!(
        "YAML {which} are not allowed in payloads: cloud-config needs none, and a loader expands each use"
    )
}

fn leftovers(payload: &str, out: &mut Vec<Finding>) {
    for (i, line) in payload.lines().enumerate() {
        if let Some(marker) = ["{{", "{%", "{#"].into_iter().find(|m| line.contains(m)) {
            out.push(finding(
                Severity::Error,
                "leftover-markup",
                format!("template markup {marker} is left in the output"),
                Some(i + 1),
            ));
        }
    }
}

fn header(payload: &str, out: &mut Vec<Finding>) {
    let first = payload.lines().next().unwrap_or("");
    if first != "#cloud-config" {
        let shown: String = first.chars().take(40).collect();
        out.push(finding(Severity::Error, "header", format!("the first line must be exactly #cloud-config (found {shown:?}); cloud-init ignores the payload otherwise"), Some(1)));
    }
}

fn size(payload: &str, out: &mut Vec<Finding>) {
    let n = payload.len();
    if n > MAX_PAYLOAD_BYTES {
        out.push(finding(Severity::Error, "size", format!("{n} bytes is over Hetzner's user_data cap of {MAX_PAYLOAD_BYTES} bytes; fetch large files at boot instead of embedding them"), None));
    } else if n * 10 > MAX_PAYLOAD_BYTES * 9 {
        out.push(finding(
            Severity::Warning,
            "size",
            format!("{n} bytes is over 90 % of the {MAX_PAYLOAD_BYTES}-byte cap"),
            None,
        ));
    }
}

fn parse(payload: &str, out: &mut Vec<Finding>) -> Option<Yaml> {
    match YamlLoader::load_from_str(payload) {
        Err(e) => {
            out.push(not_yaml(&e));
            None
        }
        Ok(docs) if docs.len() != 1 => {
            out.push(finding(
                Severity::Error,
                "yaml",
                format!("expected one YAML document, found {}", docs.len()),
                None,
            ));
            None
        }
        Ok(mut docs) => {
            let doc = docs.remove(0);
            if doc.as_hash().is_none() {
                out.push(finding(
                    Severity::Error,
                    "yaml",
                    "the document must be a mapping of cloud-config keys".into(),
                    Some(2),
                ));
                return None;
            }
            Some(doc)
        }
    }
}

/// The line of each top-level key, found in one pass (block mappings put them at column 0;
/// a quoted key is found by its unquoted text too).
struct KeyLines(HashMap<String, usize>);

impl KeyLines {
    fn of(payload: &str) -> Self {
        let mut lines = HashMap::new();
        for (i, l) in payload.lines().enumerate() {
            if l.starts_with([' ', '\t', '#', '-']) {
                continue;
            }
            let Some((key, _)) = l.split_once(':') else {
                continue;
            };
            let key = key.trim_end();
            let unquoted = key.trim_matches('"').trim_matches('\'');
            lines.entry(key.to_owned()).or_insert(i + 1);
            lines.entry(unquoted.to_owned()).or_insert(i + 1);
        }
        KeyLines(lines)
    }

    fn get(&self, key: &str) -> Option<usize> {
        self.0.get(key).copied()
    }
}

/// Line of the `index`-th item of a top-level block sequence.
fn item_line(payload: &str, lines_of_keys: &KeyLines, key: &str, index: usize) -> Option<usize> {
    let start = lines_of_keys.get(key)?;
    let lines: Vec<&str> = payload.lines().collect();
    let indent = lines
        .iter()
        .skip(start)
        .find(|l| l.trim_start().starts_with("- "))
        .map(|l| l.len() - l.trim_start().len())?;
    let mut seen = 0;
    for (i, l) in lines.iter().enumerate().skip(start) {
        let this = l.len() - l.trim_start().len();
        if !l.trim().is_empty() && this < indent && !l.trim_start().starts_with('#') {
            break;
        }
        if this == indent && l.trim_start().starts_with('-') {
            if seen == index {
                return Some(i + 1);
            }
            seen += 1;
        }
    }
    Some(start)
}

fn describe(y: &Yaml) -> &'static str {
    match y {
        Yaml::Hash(_) => {
            "a mapping (a bare `key: value` inside a command becomes one: quote the command)"
        }
        Yaml::Array(_) => "a list containing something other than strings",
        Yaml::Integer(_) | Yaml::Real(_) => "a number",
        Yaml::Boolean(_) => "a boolean",
        Yaml::Null => "empty",
        _ => "not a string",
    }
}

fn runcmd_shape(payload: &str, lines: &KeyLines, doc: &Yaml, out: &mut Vec<Finding>) {
    let runcmd = &doc["runcmd"];
    if runcmd.is_badvalue() {
        return;
    }
    let Some(items) = runcmd.as_vec() else {
        out.push(finding(
            Severity::Error,
            "runcmd",
            "runcmd must be a list".into(),
            lines.get("runcmd"),
        ));
        return;
    };
    let mut reported = 0;
    for (i, item) in items.iter().enumerate() {
        let ok = match item {
            Yaml::String(_) => true,
            Yaml::Array(parts) => parts.iter().all(|p| matches!(p, Yaml::String(_))),
            _ => false,
        };
        if !ok {
            // Past the cap the finding only counts: finding its line costs a scan.
            reported += 1;
            let line = if reported <= MAX_FINDINGS_PER_CHECK {
                item_line(payload, lines, "runcmd", i)
            } else {
                None
            };
            out.push(finding(
                Severity::Error,
                "runcmd",
                format!(
                    "runcmd item {} is {}; cloud-init would skip the whole list",
                    i + 1,
                    describe(item)
                ),
                line,
            ));
        }
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn known_keys(lines: &KeyLines, doc: &Yaml, out: &mut Vec<Finding>) {
    let Some(map) = doc.as_hash() else { return };
    let mut reported = 0;
    for key in map.keys() {
        let name = match key {
            Yaml::String(s) => s.clone(),
            other => format!("{other:?}"),
        };
        if KNOWN_KEYS.binary_search(&name.as_str()).is_ok() {
            continue;
        }
        reported += 1;
        if reported > MAX_FINDINGS_PER_CHECK {
            // Counted, not described: the hint costs an edit distance to every known key.
            out.push(finding(Severity::Error, "unknown-key", String::new(), None));
            continue;
        }
        let line = lines.get(&name);
        let name: String = name.chars().take(80).collect();
        let hint = KNOWN_KEYS
            .iter()
            .map(|k| (edit_distance(&name, k), *k))
            .min()
            .filter(|(d, _)| *d <= 3)
            .map(|(_, k)| format!("; did you mean `{k}`?"))
            .unwrap_or_default();
        out.push(finding(
            Severity::Error,
            "unknown-key",
            format!("`{name}` is not a cloud-config module key{hint}"),
            line,
        ));
    }
}

fn item_text(item: &Yaml) -> String {
    match item {
        Yaml::String(s) => s.clone(),
        Yaml::Array(parts) => parts
            .iter()
            .filter_map(Yaml::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn tarball_check(lines: &KeyLines, doc: &Yaml, pin: &str, out: &mut Vec<Finding>) {
    let items = doc["runcmd"].as_vec().cloned().unwrap_or_default();
    let found = items
        .iter()
        .map(item_text)
        .any(|t| t.contains("sha256sum -c") && t.contains(pin));
    if !found {
        out.push(finding(Severity::Error, "tarball-pin", format!("no runcmd item checks the downloaded tarball with `sha256sum -c` against the pinned sha256 {pin}"), lines.get("runcmd")));
    }
}

/// YAML as JSON, for the schema check. Recursive, so private: it only ever sees a document
/// that passed [`shape_is_safe`].
fn to_json(y: &Yaml) -> serde_json::Value {
    use serde_json::Value;
    match y {
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(r.clone()), Value::Number),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| (item_text_key(k), to_json(v)))
                .collect(),
        ),
        _ => Value::Null,
    }
}

fn item_text_key(k: &Yaml) -> String {
    match k {
        Yaml::String(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn schema_check(
    lines: &KeyLines,
    doc: &Yaml,
    schema: &jsonschema::Validator,
    out: &mut Vec<Finding>,
) {
    let instance = to_json(doc);
    for err in schema.iter_errors(&instance).take(20) {
        let path = err.instance_path.to_string();
        let top = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("")
            .to_owned();
        let line = if top.is_empty() {
            None
        } else {
            lines.get(&top)
        };
        let at = if path.is_empty() {
            "the document".to_owned()
        } else {
            path
        };
        out.push(finding(
            Severity::Error,
            "schema",
            format!("cloud-init schema: {at}: {err}"),
            line,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn good() -> String {
        format!("#cloud-config\nhostname: \"x\"\nruncmd:\n  - \"echo '{PIN}  /tmp/t.tgz' | sha256sum -c -\"\n")
    }

    fn checks(payload: &str) -> Vec<&'static str> {
        validate(payload, PIN, None)
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.check)
            .collect()
    }

    #[test]
    fn yaml_anchors_and_aliases_are_refused_before_the_document_is_built() {
        // Six levels of twelve aliases would expand to ~3 GB in the loader.
        let mut bomb = "#cloud-config\na0: &a0 \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n".to_owned();
        for level in 1..=6 {
            let refs = vec![format!("*a{}", level - 1); 12].join(",");
            bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        let found = validate(&bomb, PIN, None);
        let yaml: Vec<_> = found.iter().filter(|f| f.check == "yaml").collect();
        assert_eq!(yaml.len(), 1, "{found:?}");
        assert!(yaml[0].message.contains("anchors"), "{}", yaml[0].message);
        assert_eq!(yaml[0].line, Some(2));
        let alias_only = format!("{}x: *nothing\n", good());
        assert!(validate(&alias_only, PIN, None)
            .iter()
            .any(|f| f.check == "yaml"));
    }

    /// A payload whose value `x` nests `levels` collections of one kind below the top-level
    /// mapping (so the document is `levels + 1` deep), all on line 3 but for indented mappings.
    fn nested(kind: &str, levels: usize) -> String {
        let body = match kind {
            "block-seq" => format!("{}1", "- ".repeat(levels)),
            "flow-seq" => format!("  {}1{}", "[".repeat(levels), "]".repeat(levels)),
            "flow-map" => format!("  {}1{}", "{a: ".repeat(levels), "}".repeat(levels)),
            "block-map" => (0..levels)
                .map(|i| format!("{}a:", "  ".repeat(i + 1)))
                .collect::<Vec<_>>()
                .join("\n"),
            other => panic!("unknown kind {other}"),
        };
        format!("#cloud-config\nx:\n{body}\n")
    }

    const KINDS: [&str; 4] = ["block-seq", "flow-seq", "flow-map", "block-map"];

    fn yaml_findings(payload: &str, schema: Option<&jsonschema::Validator>) -> Vec<Finding> {
        validate(payload, PIN, schema)
            .into_iter()
            .filter(|f| f.check == "yaml")
            .collect()
    }

    /// Runs `f` on a thread with a `kib` KiB stack, as the server's blocking pool would (with
    /// far less than its 2 MiB): an overflow aborts the test binary.
    fn on_small_stack<T: Send + 'static>(kib: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(kib * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn nesting_at_the_bound_passes_every_check_and_one_level_more_is_refused_with_its_line() {
        let schema = jsonschema::draft4::options()
            .build(&serde_json::json!({"type": "object"}))
            .unwrap();
        for kind in KINDS {
            // The top-level mapping is the first level.
            let at_bound = nested(kind, MAX_YAML_DEPTH - 1);
            assert_eq!(yaml_findings(&at_bound, Some(&schema)), [], "{kind}");
            // Parsed and checked like any payload: `x` is reported as unknown.
            assert!(
                checks(&at_bound).contains(&"unknown-key"),
                "{kind}: {:?}",
                checks(&at_bound)
            );

            let over = nested(kind, MAX_YAML_DEPTH);
            let found = yaml_findings(&over, Some(&schema));
            assert_eq!(found.len(), 1, "{kind}: {found:?}");
            assert_eq!(
                found[0].message,
                "the YAML is nested deeper than 64 levels; cloud-config needs a handful, and deeper documents are not parsed"
            );
            let line = if kind == "block-map" {
                MAX_YAML_DEPTH + 2
            } else {
                3
            };
            assert_eq!(found[0].line, Some(line), "{kind}");
            // Nothing after the refusal looked at the document.
            assert!(!checks(&over).contains(&"unknown-key"), "{kind}");
        }
    }

    #[test]
    fn a_document_at_the_bound_is_checked_within_a_quarter_of_a_blocking_thread_stack() {
        let found = on_small_stack(512, || {
            let schema = jsonschema::draft4::options()
                .build(&serde_json::json!({"type": "object", "additionalProperties": {"type": "array"}}))
                .unwrap();
            KINDS.map(|kind| validate(&nested(kind, MAX_YAML_DEPTH - 1), PIN, Some(&schema)))
        });
        for findings in found {
            assert!(findings.iter().all(|f| f.check != "yaml"), "{findings:?}");
        }
    }

    #[test]
    fn the_event_parser_walks_100_000_levels_without_recursing() {
        let (starts, flow_errors) = on_small_stack(128, || {
            let mut starts = 0;
            let payload = nested("block-seq", 100_000);
            let mut parser = Parser::new_from_str(&payload);
            loop {
                match parser.next_token().expect("valid YAML").0 {
                    Event::SequenceStart(..) => starts += 1,
                    Event::StreamEnd => break,
                    _ => {}
                }
            }
            // Flow collections end in the scanner's own limit (255 levels), as an error.
            let flow_errors = ["flow-seq", "flow-map"].map(|kind| {
                let payload = nested(kind, 100_000);
                let mut parser = Parser::new_from_str(&payload);
                loop {
                    match parser.next_token() {
                        Err(e) => return e.info().to_owned(),
                        Ok((Event::StreamEnd, _)) => return "no error".to_owned(),
                        Ok(_) => {}
                    }
                }
            });
            (starts, flow_errors)
        });
        assert_eq!(starts, 100_000);
        assert_eq!(flow_errors, [SCANNER_DEPTH_LIMIT; 2]);
    }

    #[test]
    fn hostile_nesting_is_refused_on_a_small_stack_before_anything_recurses() {
        let found = on_small_stack(128, || {
            let mut found = Vec::new();
            for kind in KINDS {
                // Indented mappings grow quadratically: 300 levels already take 90 KB.
                let sizes: &[usize] = if kind == "block-map" {
                    &[300]
                } else {
                    &[20_000, 100_000]
                };
                for &levels in sizes {
                    found.push((kind, levels, yaml_findings(&nested(kind, levels), None)));
                }
            }
            found
        });
        for (kind, levels, f) in found {
            assert_eq!(f.len(), 1, "{kind} {levels}: {f:?}");
            assert!(
                f[0].message.contains("nested deeper than 64 levels"),
                "{kind} {levels}: {f:?}"
            );
        }
    }

    #[test]
    fn findings_are_capped_per_check_and_the_rest_counted() {
        let mut many = good();
        for i in 0..10_000 {
            many.push_str(&format!("k{i:05}: 1\n"));
        }
        let found = validate(&many, PIN, None);
        let unknown: Vec<_> = found.iter().filter(|f| f.check == "unknown-key").collect();
        assert_eq!(unknown.len(), MAX_FINDINGS_PER_CHECK + 1);
        assert_eq!(unknown[0].line, Some(5));
        assert!(
            unknown[20].message.contains("9980 more"),
            "{}",
            unknown[20].message
        );
    }

    #[test]
    fn a_good_payload_passes() {
        assert!(
            checks(&good()).is_empty(),
            "{:?}",
            validate(&good(), PIN, None)
        );
    }

    #[test]
    fn header_must_be_exact() {
        assert_eq!(
            checks(&good().replacen("#cloud-config", "#cloud-config ", 1)),
            ["header"]
        );
        assert_eq!(
            checks(&good().replacen("#cloud-config\n", "", 1)),
            ["header"]
        );
    }

    #[test]
    fn leftover_markup_is_an_error_with_its_line() {
        let p = format!("{}packages: [\"{{{{ x }}}}\"]\n", good());
        let f = validate(&p, PIN, None);
        assert!(
            f.iter()
                .any(|f| f.check == "leftover-markup" && f.line == Some(5)),
            "{f:?}"
        );
    }

    #[test]
    fn yaml_errors_carry_a_line() {
        let f = validate("#cloud-config\nhostname: [unclosed\n", PIN, None);
        assert!(
            f.iter().any(|f| f.check == "yaml" && f.line.is_some()),
            "{f:?}"
        );
        assert!(checks("#cloud-config\n- a list\n").contains(&"yaml"));
    }

    #[test]
    fn runcmd_items_must_be_strings_or_string_lists() {
        let p = format!("{}  - echo a: b\n  - [ls, 5]\n  - [ls, -l]\n", good());
        let f: Vec<_> = validate(&p, PIN, None)
            .into_iter()
            .filter(|f| f.check == "runcmd")
            .collect();
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].line, Some(5));
        assert!(f[0].message.contains("mapping"));
        assert_eq!(f[1].line, Some(6));
    }

    #[test]
    fn unknown_keys_get_a_did_you_mean() {
        let p = good().replace("runcmd:", "runcmds:");
        let f: Vec<_> = validate(&p, PIN, None)
            .into_iter()
            .filter(|f| f.check == "unknown-key")
            .collect();
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("did you mean `runcmd`"),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].line, Some(3));
    }

    #[test]
    fn size_cap_is_an_error_and_ninety_percent_a_warning() {
        let pad = |n: usize| {
            let base = good();
            let filler = n - base.len() - "final_message: \"\"\n".len();
            format!("{base}final_message: \"{}\"\n", "x".repeat(filler))
        };
        let over = pad(32_769);
        assert_eq!(over.len(), 32_769);
        assert_eq!(checks(&over), ["size"]);
        let near = pad(30_000);
        assert_eq!(near.len(), 30_000);
        let f = validate(&near, PIN, None);
        assert!(f
            .iter()
            .any(|f| f.check == "size" && f.severity == Severity::Warning));
        assert!(checks(&near).is_empty());
        assert!(validate(&pad(29_000), PIN, None)
            .iter()
            .all(|f| f.check != "size"));
    }

    #[test]
    fn the_pinned_sha256_check_must_be_present() {
        assert_eq!(
            checks(&good().replace("sha256sum -c", "sha256sum")),
            ["tarball-pin"]
        );
        assert_eq!(
            checks(&good().replace(PIN, &"b".repeat(64))),
            ["tarball-pin"]
        );
    }
}
