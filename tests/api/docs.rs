//! The repository stands alone: every Markdown link in README.md, CHANGELOG.md and docs/*.md
//! resolves to a file inside the repo, and the docs that restate code (routes, tables, the
//! yubaba fixtures) name what the code really has, so they cannot drift silently.
//!
//! No Markdown crate is a dependency, so links are found by a small scanner that knows the
//! parts of CommonMark these files use: inline links and images, reference definitions and
//! full references, autolinks, code spans and fenced code (whose brackets are not links).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use headroom::http::Access;
use headroom::startup::route_table;

/// External links allowed in the docs, each with why. Anything else with a scheme fails: the
/// repo must read the same offline and in ten years.
const ALLOWED_EXTERNAL: &[&str] = &[
    // The demo's own address on the reader's machine (README "Two commands"), not the web.
    "http://127.0.0.1:8080",
];

/// The documents every clone must carry (issue 7).
const REQUIRED_DOCS: &[&str] = &[
    "README.md",
    "CHANGELOG.md",
    "docs/overview.md",
    "docs/architecture.md",
    "docs/yubaba-and-hetzner.md",
    "docs/http.md",
    "docs/data-model.md",
];

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CHANGELOG.md and every docs/*.md, relative to the repo root.
fn markdown_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("readable docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("file name")))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

fn read(rel: &Path) -> String {
    std::fs::read_to_string(repo_root().join(rel))
        .unwrap_or_else(|e| panic!("{}: cannot read: {e}", rel.display()))
}

/// A link found in a Markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    line: usize,
    target: String,
}

/// Every link target in `markdown`, with its line, skipping fenced code and code spans.
/// Full references (`[text][label]`) whose label has no definition come back as
/// `Err(label)` entries, because GitHub would render them as plain brackets.
fn scan_links(markdown: &str) -> (Vec<Link>, Vec<(usize, String)>) {
    let mut links = Vec::new();
    let mut definitions = BTreeSet::new();
    let mut references = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (index, raw) in markdown.lines().enumerate() {
        let line_no = index + 1;
        let trimmed = raw.trim_start_matches(' ');
        let indent = raw.len() - trimmed.len();
        if let Some((ch, len)) = fence {
            let run = trimmed.chars().take_while(|c| *c == ch).count();
            if indent <= 3 && run >= len && trimmed[run * ch.len_utf8()..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if indent <= 3 {
            for ch in ['`', '~'] {
                let run = trimmed.chars().take_while(|c| *c == ch).count();
                if run >= 3 {
                    fence = Some((ch, run));
                }
            }
            if fence.is_some() {
                continue;
            }
        }
        let line = blank_code_spans(raw);
        if let Some((label, target)) = reference_definition(&line) {
            definitions.insert(label.to_lowercase());
            links.push(Link {
                line: line_no,
                target,
            });
            continue;
        }
        links.extend(inline_targets(&line).into_iter().map(|target| Link {
            line: line_no,
            target,
        }));
        links.extend(autolinks(&line).into_iter().map(|target| Link {
            line: line_no,
            target,
        }));
        references.extend(
            full_reference_labels(&line)
                .into_iter()
                .map(|label| (line_no, label)),
        );
    }
    let undefined = references
        .into_iter()
        .filter(|(_, label)| !definitions.contains(&label.to_lowercase()))
        .collect();
    (links, undefined)
}

/// The line with the contents of every code span replaced by spaces (same byte length).
fn blank_code_spans(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = line.as_bytes().to_vec();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let open_end = i + run;
        // The span closes at the next backtick run of exactly the same length.
        let mut j = open_end;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let r = bytes[j..].iter().take_while(|b| **b == b'`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                out[open_end..c].fill(b' ');
                i = c + run;
            }
            // An unmatched run is literal text.
            None => i = open_end,
        }
    }
    // Only ASCII bytes inside spans were replaced by ASCII spaces... unless the span held
    // multi-byte characters, whose every byte became a space: still valid UTF-8.
    String::from_utf8(out).expect("spaces keep UTF-8 valid")
}

/// `[label]: target` at the start of a line (up to three spaces of indent).
fn reference_definition(line: &str) -> Option<(String, String)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let rest = trimmed.strip_prefix('[')?;
    let close = rest.find("]:")?;
    let label = &rest[..close];
    if label.is_empty() || label.contains('[') || label.contains(']') {
        return None;
    }
    let target = rest[close + 2..].split_whitespace().next()?;
    let target = target
        .strip_prefix('<')
        .and_then(|t| t.strip_suffix('>'))
        .unwrap_or(target);
    Some((label.to_owned(), target.to_owned()))
}

/// Destinations of `[text](dest "title")` and `![alt](dest)` on one line.
fn inline_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(pos) = rest.find("](") {
        let after = &rest[pos + 2..];
        let (target, used) = destination(after);
        out.push(target);
        rest = &after[used..];
    }
    out
}

/// Reads a link destination up to its closing parenthesis: `<…>` or a run without spaces in
/// which parentheses balance. Returns it and how many bytes were consumed.
fn destination(s: &str) -> (String, usize) {
    let s_trim = s.trim_start();
    let skipped = s.len() - s_trim.len();
    if let Some(inner) = s_trim.strip_prefix('<') {
        let end = inner.find('>').unwrap_or(inner.len());
        return (inner[..end].to_owned(), skipped + 1 + end);
    }
    let mut depth = 0_usize;
    let mut end = s_trim.len();
    for (i, c) in s_trim.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = i;
                break;
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    (s_trim[..end].to_owned(), skipped + end)
}

/// `<scheme:…>` autolinks (lower-case scheme, no spaces), as CommonMark reads them.
fn autolinks(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('>') else { break };
        let inner = &after[..end];
        let scheme_len = inner
            .find(':')
            .filter(|&n| n >= 2 && inner[..n].chars().all(|c| c.is_ascii_alphanumeric()));
        if scheme_len.is_some() && !inner.contains(char::is_whitespace) {
            out.push(inner.to_owned());
        }
        rest = &after[end..];
    }
    out
}

/// Labels of full references `[text][label]` on one line.
fn full_reference_labels(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(pos) = rest.find("][") {
        let after = &rest[pos + 2..];
        match after.find(']') {
            Some(end) if end > 0 => {
                out.push(after[..end].to_owned());
                rest = &after[end..];
            }
            _ => rest = after,
        }
    }
    out
}

/// Why `target`, written in `file`, does not resolve inside the repo; `None` when it does.
fn broken(file: &Path, target: &str, root: &Path) -> Option<String> {
    if target.is_empty() {
        return Some("empty link target".into());
    }
    let has_scheme = target.find(':').is_some_and(|n| {
        n > 0
            && target[..n]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if has_scheme {
        return if ALLOWED_EXTERNAL.contains(&target.trim_end_matches('/')) {
            None
        } else {
            Some("external link not in ALLOWED_EXTERNAL (tests/api/docs.rs)".into())
        };
    }
    let (path_part, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let path_part = path_part.split('?').next().unwrap_or_default();
    if path_part.starts_with('/') {
        return Some("absolute path: write it relative to the file".into());
    }
    let file_dir = file.parent().unwrap_or(Path::new(""));
    let resolved = if path_part.is_empty() {
        file.to_path_buf()
    } else {
        match normalise(&file_dir.join(percent_decode(path_part))) {
            Some(p) => p,
            None => return Some("leaves the repo (too many `../`)".into()),
        }
    };
    let on_disk = root.join(&resolved);
    let Ok(canonical) = on_disk.canonicalize() else {
        return Some(format!("no such file: {}", resolved.display()));
    };
    let canonical_root = root.canonicalize().expect("repo root resolves");
    if !canonical.starts_with(&canonical_root) {
        return Some(format!(
            "{} resolves outside the repo (symlink?)",
            resolved.display()
        ));
    }
    if let Some(pattern) = ignored_by_git(&resolved, root) {
        return Some(format!(
            "{} is ignored by .gitignore ({pattern}): a clone does not have it",
            resolved.display()
        ));
    }
    match anchor {
        Some(anchor) if resolved.extension().is_some_and(|x| x == "md") => {
            let text = std::fs::read_to_string(&on_disk).expect("readable Markdown");
            let anchors = heading_anchors(&text);
            (!anchors.contains(anchor))
                .then(|| format!("no heading with anchor #{anchor} in {}", resolved.display()))
        }
        _ => None,
    }
}

/// Resolves `.` and `..` lexically; `None` when `..` climbs above the repo root.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// `%20` and friends, as a browser would decode them before asking for the file.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The .gitignore pattern (of the forms the repo uses: `/dir`, `name`, `*.ext`) that keeps
/// `rel` out of a clone, if any.
fn ignored_by_git(rel: &Path, root: &Path) -> Option<String> {
    let gitignore = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    gitignore
        .lines()
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with('#') && !p.starts_with('!'))
        .find(|pattern| {
            let p = pattern.trim_end_matches('/');
            if let Some(anchored) = p.strip_prefix('/') {
                parts.first().is_some_and(|first| first == anchored)
            } else if let Some(ext) = p.strip_prefix('*') {
                parts.iter().any(|part| part.ends_with(ext))
            } else {
                parts.iter().any(|part| part == p)
            }
        })
        .map(str::to_owned)
}

/// GitHub's anchors for the headings of a Markdown file: lower case, punctuation dropped,
/// spaces to `-`, repeats suffixed `-1`, `-2`, …
fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let Some(text) = line
            .strip_prefix('#')
            .map(|l| l.trim_start_matches('#'))
            .filter(|l| l.starts_with(' '))
        else {
            continue;
        };
        if in_fence {
            continue;
        }
        let slug: String = text
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut candidate = slug.clone();
        let mut n = 0;
        while seen.contains(&candidate) {
            n += 1;
            candidate = format!("{slug}-{n}");
        }
        seen.insert(candidate);
    }
    seen
}

/// Every broken link in the given files, one readable line each.
fn broken_links(files: &[PathBuf], root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{}: cannot read: {e}", file.display()));
        let (links, undefined) = scan_links(&text);
        for link in links {
            if let Some(why) = broken(file, &link.target, root) {
                problems.push(format!(
                    "{}:{}: ({}) {why}",
                    file.display(),
                    link.line,
                    link.target
                ));
            }
        }
        for (line, label) in undefined {
            problems.push(format!(
                "{}:{line}: [{label}] is used but never defined",
                file.display()
            ));
        }
    }
    problems
}

#[test]
fn every_required_document_is_in_the_repo() {
    let files = markdown_files();
    for required in REQUIRED_DOCS {
        assert!(
            files.iter().any(|f| f == Path::new(required)),
            "{required} is missing"
        );
    }
}

#[test]
fn every_markdown_link_resolves_inside_the_repo() {
    let files = markdown_files();
    let root = repo_root();
    let mut total = 0;
    for file in &files {
        total += scan_links(&read(file)).0.len();
    }
    let problems = broken_links(&files, &root);
    assert!(
        problems.is_empty(),
        "{} of {total} links do not resolve inside the repo:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // README and the docs link to each other: a scanner that found nothing would pass above.
    assert!(
        total >= 20,
        "only {total} links found: is the scanner blind?"
    );
}

/// The check itself, shown to fail: a temporary repo with one good and six bad links.
#[test]
fn a_broken_link_is_reported_with_its_file_line_and_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs")).expect("mkdir");
    std::fs::create_dir_all(root.join("target")).expect("mkdir");
    std::fs::write(root.join(".gitignore"), "/target\n").expect("write");
    std::fs::write(root.join("target/build.md"), "# built\n").expect("write");
    std::fs::write(root.join("docs/a.md"), "# Alpha Beta\n").expect("write");
    std::fs::write(
        root.join("README.md"),
        "# Top\n\
         [fine](docs/a.md#alpha-beta) and `[code](nowhere.md)`\n\
         [gone](docs/missing.md)\n\
         [up](../shared/DESIGN.md)\n\
         [web](https://example.com/)\n\
         [anchor](docs/a.md#gamma)\n\
         [ignored](target/build.md)\n\
         [dangling][nolabel]\n\
         ```\n[fenced](nowhere.md)\n```\n",
    )
    .expect("write");
    let problems = broken_links(&[PathBuf::from("README.md")], root);
    let lines: Vec<&str> = problems.iter().map(String::as_str).collect();
    assert_eq!(
        lines,
        [
            "README.md:3: (docs/missing.md) no such file: docs/missing.md",
            "README.md:4: (../shared/DESIGN.md) leaves the repo (too many `../`)",
            "README.md:5: (https://example.com/) external link not in ALLOWED_EXTERNAL (tests/api/docs.rs)",
            "README.md:6: (docs/a.md#gamma) no heading with anchor #gamma in docs/a.md",
            "README.md:7: (target/build.md) target/build.md is ignored by .gitignore (/target): a clone does not have it",
            "README.md:8: [nolabel] is used but never defined",
        ]
    );
}

#[test]
fn the_scanner_reads_the_link_forms_the_docs_use() {
    let md = "see [a](x.md \"title\") and ![img](y.png), <http://127.0.0.1:8080>\n\
              [p](docs/a(b).md) `<http://not.a/link>` ``[nor](this.md)``\n\
              [ref]: <z.md>\n\
              [t][ref] then <b>bold</b>\n";
    let (links, undefined) = scan_links(md);
    let targets: Vec<(usize, &str)> = links.iter().map(|l| (l.line, l.target.as_str())).collect();
    assert_eq!(
        targets,
        [
            (1, "x.md"),
            (1, "y.png"),
            (1, "http://127.0.0.1:8080"),
            (2, "docs/a(b).md"),
            (3, "z.md"),
        ]
    );
    assert!(undefined.is_empty(), "{undefined:?}");
}

/// docs/http.md lists each route as a table row `` | `METHOD /path` | role | … ``: every
/// route the app registers is there with its least role, and every row is a real route.
#[test]
fn the_http_doc_lists_every_route_with_its_role() {
    let doc = read(Path::new("docs/http.md"));
    let rows: Vec<(String, String)> = doc
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // A table row splits into ["", first, second, ..., ""].
            let route = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let (method, path) = route.split_once(' ')?;
            if !method.chars().all(|c| c.is_ascii_uppercase()) || !path.starts_with('/') {
                return None;
            }
            Some((route.to_owned(), cells.get(2)?.to_string()))
        })
        .collect();
    let table = route_table();
    let mut missing = Vec::new();
    for route in &table {
        let key = format!("{} {}", route.method, route.path);
        let role = match route.access {
            Access::Public => "public".to_owned(),
            Access::AtLeast(role) => role.as_str().to_owned(),
        };
        match rows.iter().find(|(r, _)| *r == key) {
            Some((_, documented)) if *documented == role => {}
            Some((_, documented)) => missing.push(format!(
                "`{key}`: documented as {documented}, the route table says {role}"
            )),
            None => missing.push(format!("`{key}` ({role}) is not in docs/http.md")),
        }
    }
    for (route, _) in &rows {
        if !table
            .iter()
            .any(|r| format!("{} {}", r.method, r.path) == *route)
        {
            missing.push(format!(
                "docs/http.md lists `{route}`, which no route table registers"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    assert_eq!(rows.len(), table.len(), "a route is listed twice");
}

/// docs/data-model.md has a `` ### `table` `` heading for every table the migrations leave
/// (created, less those dropped or renamed away: a rebuild creates `x_next`, drops `x` and
/// renames `x_next` to `x`), and no heading for a table that does not exist.
#[test]
fn the_data_model_doc_describes_every_table() {
    let mut tables = BTreeSet::new();
    let mut dir: Vec<PathBuf> = std::fs::read_dir(repo_root().join("migrations"))
        .expect("migrations/")
        .map(|e| e.expect("entry").path())
        // SQLite's migrations; `postgres/` holds the same schema, compared in postgres.rs.
        .filter(|p| p.is_file())
        .collect();
    dir.sort();
    for file in dir {
        let sql = std::fs::read_to_string(&file).expect("readable migration");
        // Comments go first: they may hold a `;` of their own.
        let code: String = sql
            .lines()
            .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
            .collect::<Vec<_>>()
            .join("\n");
        for statement in code.split(';') {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
            let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
            match lower.as_slice() {
                ["drop", "table", .., name] => {
                    tables.remove(*name);
                }
                ["alter", "table", from, "rename", "to", to] => {
                    tables.remove(*from);
                    tables.insert((*to).to_owned());
                }
                _ => {}
            }
            if let [create, table, rest @ ..] = words.as_slice() {
                if create.eq_ignore_ascii_case("create") && table.eq_ignore_ascii_case("table") {
                    let name = rest
                        .iter()
                        .find(|w| !["if", "not", "exists"].contains(&w.to_lowercase().as_str()))
                        .expect("a table name");
                    tables.insert(name.trim_matches(|c| c == '"' || c == '(').to_owned());
                }
            }
        }
    }
    let doc = read(Path::new("docs/data-model.md"));
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
        .map(str::to_owned)
        .collect();
    assert!(tables.len() >= 12, "only {tables:?} found in migrations/");
    assert_eq!(
        documented, tables,
        "docs/data-model.md headings (left) against the tables in migrations/ (right)"
    );
}

/// The yubaba fixtures travel with the repo: each is named in docs/yubaba-and-hetzner.md,
/// each named one exists, and the JSON ones parse.
#[test]
fn the_yubaba_fixtures_are_in_the_repo_and_described() {
    let dir = repo_root().join("tests/fixtures/yubaba");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/yubaba/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 12, "{files:?}");
    let doc = read(Path::new("docs/yubaba-and-hetzner.md"));
    for name in &files {
        assert!(
            doc.contains(&format!("tests/fixtures/yubaba/{name}")),
            "docs/yubaba-and-hetzner.md does not mention {name}"
        );
        let body = std::fs::read_to_string(dir.join(name)).expect("readable fixture");
        if name.ends_with(".json") {
            let value: serde_json::Value =
                serde_json::from_str(&body).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
            assert!(value.is_object(), "{name} is not a JSON object");
        }
    }
}

/// docs/architecture.md names every top-level module of the crate (as `` `name/` `` or
/// `` `name.rs` ``), so a new module cannot arrive without its place in the layers.
#[test]
fn the_architecture_doc_names_every_module() {
    let lib = read(Path::new("src/lib.rs"));
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    assert!(modules.len() >= 15, "only {modules:?} in src/lib.rs");
    let doc = read(Path::new("docs/architecture.md"));
    let missing: Vec<&&str> = modules
        .iter()
        .filter(|m| !doc.contains(&format!("`{m}/`")) && !doc.contains(&format!("`{m}.rs`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md does not name {missing:?}"
    );
}
