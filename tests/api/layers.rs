//! The layering rules of CONVENTIONS.md, read from the source: pages and the API never reach
//! `src/db`, and no two top-level modules of `src/` import each other. Comments, strings and
//! `#[cfg(test)]` modules are blanked out first, so only code counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One reference from a file to a top-level module of the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    /// The top-level module named (`db`, `auth`, …).
    module: String,
    /// 1-based line in the file.
    line: usize,
}

/// `src/` of this crate.
fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, sorted so reports are stable.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments, string/char literals and `#[cfg(test)]` modules replaced by
/// spaces (newlines kept, so line numbers still match the file).
fn code_only(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(chars.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.extend([' ', ' ']);
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.extend([' ', ' ']);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_start(&chars, i).filter(|_| !prev_ident) {
            // r"…", r#"…"#, br#"…"#, cr"…": no escapes; ends at `"` plus as many `#`.
            let hashes = chars[i..i + len].iter().filter(|&&h| h == '#').count();
            out.extend(std::iter::repeat_n(' ', len));
            i += len;
            while i < chars.len() {
                if chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|&h| h == '#') {
                    let end = 1 + hashes.min(chars.len() - i - 1);
                    out.extend(std::iter::repeat_n(' ', end));
                    i += end;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' || (matches!(c, 'b' | 'c') && next == Some('"') && !prev_ident) {
            if c != '"' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime/label ('a, 'static).
            let close = if next == Some('\\') {
                // The escaped character itself may be a quote: search after it.
                (i + 3..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.extend(std::iter::repeat_n(' ', end + 1 - i));
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    let code: String = out.into_iter().collect();
    blank_test_modules(&code)
}

/// If a raw string literal starts at `i`, the length of its opening (`r#"` is 3).
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(j + 1 - i)
}

/// Blanks every `#[cfg(test)] mod … { … }`: unit tests may set up fixtures however they like.
fn blank_test_modules(code: &str) -> String {
    let mut chars: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= chars.len() {
        if chars[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        let rest: String = chars[i + marker.len()..].iter().collect();
        let mut after = rest.trim_start();
        // Further attributes may sit between `#[cfg(test)]` and the module.
        while let Some(attr) = after.strip_prefix("#[") {
            after = attr.split_once(']').map_or("", |(_, r)| r).trim_start();
        }
        let is_mod = after.starts_with("mod ") || after.starts_with("pub mod ");
        // `mod tests;` (a file of its own) has no body here to blank.
        let body = rest
            .find(['{', ';'])
            .filter(|&at| rest[at..].starts_with('{'));
        let Some(open) = body.filter(|_| is_mod) else {
            i += marker.len();
            continue;
        };
        // `rest` is made of whole chars, so its char count locates the brace.
        let open = i + marker.len() + rest[..open].chars().count();
        let mut depth = 0;
        let mut end = open;
        for (j, &c) in chars.iter().enumerate().skip(open) {
            if c == '{' {
                depth += 1;
            } else if c == '}' {
                depth -= 1;
                if depth == 0 {
                    end = j;
                    break;
                }
            }
        }
        for c in &mut chars[i..=end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = end + 1;
    }
    chars.into_iter().collect()
}

/// The module path of a file under `src/` (`src/web/users/handlers.rs` → web, users,
/// handlers; `src/web/mod.rs` → web).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir()).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The identifier starting at `i` (empty when none).
fn ident_at(chars: &[char], i: usize) -> String {
    chars[i..].iter().take_while(|&&c| is_ident(c)).collect()
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// After a path prefix ending in `::` at `i`: the first segment, or each first segment of a
/// `{…}` group (`crate::{auth::Caller, db}` names auth and db).
fn first_segments(chars: &[char], i: usize) -> Vec<(String, usize)> {
    let i = skip_space(chars, i);
    if chars.get(i) != Some(&'{') {
        let name = ident_at(chars, i);
        return if name.is_empty() {
            vec![]
        } else {
            vec![(name, i)]
        };
    }
    let mut out = Vec::new();
    let mut depth = 0;
    let mut expect_item = true;
    for (j, &c) in chars.iter().enumerate().skip(i) {
        match c {
            '{' => {
                depth += 1;
                expect_item = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => expect_item = true,
            c if depth == 1 && expect_item && is_ident(c) => {
                out.push((ident_at(chars, j), j));
                expect_item = false;
            }
            _ => {}
        }
    }
    out
}

/// Every top-level crate module a file's code names, through `crate::…` or `super::…`, with
/// the line; plus bare `db::…` paths (after `use crate::db`), which count as `db`.
fn references(file: &Path, code: &str) -> Vec<Reference> {
    let here = module_path(file);
    let chars: Vec<char> = code.chars().collect();
    let line_of = |pos: usize| chars[..pos].iter().filter(|&&c| c == '\n').count() + 1;
    let mut out = Vec::new();
    // Positions of segments already counted through a `crate::`/`super::` prefix.
    let mut claimed = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == '$');
        let before = chars[..i].iter().rev().skip_while(|c| c.is_whitespace());
        let after_path = before.take(2).eq([':', ':'].iter());
        if !starts_word || after_path || claimed.contains(&i) || !is_ident(chars[i]) {
            i += 1;
            continue;
        }
        let word = ident_at(&chars, i);
        let end = i + word.len();
        let sep = skip_space(&chars, end);
        let has_path = chars.get(sep..sep + 2) == Some(&[':', ':'][..]);
        if has_path && (word == "crate" || word == "super") {
            // Resolve `super::super::x` against this file's module path.
            let mut base = here.clone();
            let mut k = sep + 2;
            if word == "super" {
                base.pop();
                loop {
                    let k2 = skip_space(&chars, k);
                    if ident_at(&chars, k2) != "super" {
                        break;
                    }
                    let after = skip_space(&chars, k2 + 5);
                    if chars.get(after..after + 2) != Some(&[':', ':'][..]) {
                        break;
                    }
                    base.pop();
                    k = after + 2;
                }
            } else {
                base.clear();
            }
            for (name, at) in first_segments(&chars, k) {
                claimed.insert(at);
                let module = if base.is_empty() {
                    name
                } else {
                    base[0].clone()
                };
                out.push(Reference {
                    module,
                    line: line_of(at),
                });
            }
        } else if has_path && word == "db" {
            out.push(Reference {
                module: "db".into(),
                line: line_of(i),
            });
        }
        i = end;
    }
    out
}

/// The top-level module a file belongs to (`src/web/users/handlers.rs` → web).
fn top_module(file: &Path) -> String {
    module_path(file)
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("{} is a crate root", file.display()))
}

/// Crate roots are left out: `lib.rs` holds only `pub mod` lines, `main.rs` is the binary.
fn library_files() -> Vec<PathBuf> {
    let src = src_dir();
    rust_files(&src)
        .into_iter()
        .filter(|f| *f != src.join("lib.rs") && *f != src.join("main.rs"))
        .collect()
}

fn display(file: &Path) -> String {
    file.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .display()
        .to_string()
}

/// Where each file of `files` names `src/db`, as `path:line: code`.
fn db_uses(files: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let src = std::fs::read_to_string(file).unwrap();
        let code = code_only(&src);
        let lines: Vec<&str> = src.lines().collect();
        let mut seen = BTreeSet::new();
        for r in references(file, &code) {
            if r.module == "db" && seen.insert(r.line) {
                found.push(format!(
                    "{}:{}: {}",
                    display(file),
                    r.line,
                    lines[r.line - 1].trim()
                ));
            }
        }
    }
    found
}

/// Edges between top-level modules, each with the `path:line` places that make it.
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn module_graph(files: &[PathBuf]) -> Graph {
    let known: BTreeSet<String> = files.iter().map(|f| top_module(f)).collect();
    let mut graph = Graph::new();
    for file in files {
        let from = top_module(file);
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        for r in references(file, &code) {
            if r.module != from && known.contains(&r.module) {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(r.module)
                    .or_default()
                    .push(format!("{}:{}", display(file), r.line));
            }
        }
    }
    graph
}

/// The modules `from` reaches by following edges (itself only through a cycle).
fn reachable(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut pending = vec![from.to_owned()];
    while let Some(n) = pending.pop() {
        for m in graph.get(&n).into_iter().flat_map(|e| e.keys()) {
            if seen.insert(m.clone()) {
                pending.push(m.clone());
            }
        }
    }
    seen
}

/// Each group of modules that import each other (a strongly connected part of the graph),
/// written out with every edge inside it and the places that make the edge, so the report
/// names the files to change. Pairs importing each other directly are marked "mutual".
fn cycles(graph: &Graph) -> Vec<String> {
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reachable(graph, n))).collect();
    let mut groups: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    for (n, from_n) in &reach {
        if !from_n.contains(*n) {
            continue;
        }
        let group: BTreeSet<String> = from_n
            .iter()
            .filter(|m| reach.get(m).is_some_and(|r| r.contains(*n)))
            .cloned()
            .collect();
        groups.insert(group);
    }
    groups
        .into_iter()
        .map(|group| {
            let names: Vec<&str> = group.iter().map(String::as_str).collect();
            let mut text = format!("cycle among {}:", names.join(", "));
            for a in &group {
                for (b, places) in graph.get(a).into_iter().flatten() {
                    if !group.contains(b) {
                        continue;
                    }
                    let mutual = graph.get(b).is_some_and(|e| e.contains_key(a));
                    text.push_str(&format!(
                        "\n    {a} → {b}{}: {}",
                        if mutual { " (mutual)" } else { "" },
                        places.join(", ")
                    ));
                }
            }
            text
        })
        .collect()
}

#[test]
fn pages_and_the_api_never_reach_the_database_layer() {
    let src = src_dir();
    let files: Vec<PathBuf> = rust_files(&src.join("web"))
        .into_iter()
        .chain(rust_files(&src.join("api")))
        .collect();
    assert!(files.len() > 10, "src/web and src/api are read: {files:?}");
    let found = db_uses(&files);
    assert!(
        found.is_empty(),
        "src/web and src/api must go through an operation, never src/db ({} places):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Where a file re-exports something of `src/db` (`pub use crate::db::…`, `pub(crate) use
/// db::…`, a `{…}` group naming db), as `path:line: code`.
fn db_re_exports(files: &[PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let src = std::fs::read_to_string(file).unwrap();
        let code = code_only(&src);
        let lines: Vec<&str> = src.lines().collect();
        let db_lines: BTreeSet<usize> = references(file, &code)
            .into_iter()
            .filter(|r| r.module == "db")
            .map(|r| r.line)
            .collect();
        for statement in pub_use_statements(&code) {
            let (first, last) = statement;
            if let Some(line) = db_lines.range(first..=last).next() {
                found.push(format!(
                    "{}:{}: {}",
                    display(file),
                    line,
                    lines[line - 1].trim()
                ));
            }
        }
    }
    found
}

/// The first and last line of every `pub use …;` / `pub(…) use …;` statement in `code`.
fn pub_use_statements(code: &str) -> Vec<(usize, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let line_of = |pos: usize| chars[..pos].iter().filter(|&&c| c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !is_ident(chars[i - 1]);
        if !starts_word || ident_at(&chars, i) != "pub" {
            i += 1;
            continue;
        }
        let mut j = skip_space(&chars, i + 3);
        if chars.get(j) == Some(&'(') {
            // `pub(crate)`, `pub(super)`, `pub(in path)`.
            while j < chars.len() && chars[j] != ')' {
                j += 1;
            }
            j = skip_space(&chars, j + 1);
        }
        if ident_at(&chars, j) == "use" {
            let end = (j..chars.len())
                .find(|&k| chars[k] == ';')
                .unwrap_or(chars.len() - 1);
            out.push((line_of(i), line_of(end)));
            i = end;
        }
        i += 1;
    }
    out
}

#[test]
fn no_module_above_db_re_exports_its_rows() {
    let src = src_dir();
    let files: Vec<PathBuf> = library_files()
        .into_iter()
        .filter(|f| !f.starts_with(src.join("db")))
        .collect();
    let found = db_re_exports(&files);
    assert!(
        found.is_empty(),
        "operations return their own read models; `pub use` of src/db above it ({} places):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The re-export check on made-up files: a `pub use` of db counts however it is spelt; a
/// private `use`, or a `pub use` of something else, does not.
#[test]
fn the_re_export_check_finds_pub_use_of_db_only() {
    // Only the path matters (it names the module `super::` resolves against); never read.
    let file = src_dir().join("auth/made_up.rs");
    let flagged = |text: &str| -> Vec<usize> {
        let c = code_only(text);
        let db: BTreeSet<usize> = references(&file, &c)
            .into_iter()
            .filter(|r| r.module == "db")
            .map(|r| r.line)
            .collect();
        pub_use_statements(&c)
            .into_iter()
            .filter_map(|(a, b)| db.range(a..=b).next().copied())
            .collect()
    };
    assert_eq!(flagged("pub use crate::db::users::User;\n"), [1]);
    assert_eq!(
        flagged("pub(crate) use crate::db::tokens::TokenRow;\n"),
        [1]
    );
    assert_eq!(
        flagged("pub use crate::{\n    audit::Entry,\n    db::pins::PinCheck,\n};\n"),
        [3]
    );
    assert_eq!(
        flagged("use crate::db;\npub use db::versions::Version;\n"),
        [2]
    );
    assert!(flagged("use crate::db::users::User;\n").is_empty());
    assert!(flagged("pub use crate::domain::Actor;\n// pub use crate::db::x;\n").is_empty());
}

#[test]
fn no_two_modules_of_src_import_each_other() {
    let files = library_files();
    let graph = module_graph(&files);
    assert!(
        graph.get("web").is_some_and(|e| e.contains_key("auth")),
        "the graph sees web → auth: {graph:?}"
    );
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "modules of src/ that import each other ({} groups):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The checker itself, on made-up files: comments and strings never count, code always does.
#[test]
fn the_checker_counts_code_and_ignores_comments_strings_and_unit_tests() {
    let file = src_dir().join("web/users/handlers.rs");
    let quiet = r####"
        //! Never `use crate::db` here; see db::users::by_name(...).
        /* a block comment naming crate::db::x() /* nested crate::db */ still a comment */
        let s = "crate::db::users::by_name(&mut conn)";
        let r = r#"use crate::db; db::audit::page("x")"#;
        let c = '"'; let d = '\''; fn f<'a>(x: &'a str) {}
        let b = b"db::x()";
        let sqldb = my_db::thing(); let sqlx_db = sqlx::db::x;
        #[cfg(test)]
        mod tests { use crate::db; fn t() { db::users::by_name(); } }
        use crate::auth::Caller;
        #[cfg(test)]
        #[allow(clippy::unwrap_used)]
        mod more_tests { fn t() { crate::db::ping(); } }
    "####;
    let refs = references(&file, &code_only(quiet));
    assert_eq!(
        refs,
        [Reference {
            module: "auth".into(),
            line: 11
        }],
        "only the real import counts"
    );
    let loud = "#[cfg(test)]\nmod tests;\nuse crate::{auth::{Caller, Principal}, db};\n\
                fn g() { db::audit::page(); }\n\
                fn h() { super::super::super::db::ping(); }\n\
                fn k() { super::layout::respond(); crate :: db :: x(); }\n";
    let refs: Vec<(String, usize)> = references(&file, &code_only(loud))
        .into_iter()
        .map(|r| (r.module, r.line))
        .collect();
    assert_eq!(
        refs,
        [
            ("auth".to_owned(), 3),
            ("db".to_owned(), 3),
            ("db".to_owned(), 4),
            ("db".to_owned(), 5),
            ("web".to_owned(), 6),
            ("db".to_owned(), 6),
        ]
    );
}

#[test]
fn the_cycle_report_names_each_edge_and_its_files() {
    let mut graph = Graph::new();
    let edge = |g: &mut Graph, a: &str, b: &str, at: &str| {
        g.entry(a.into())
            .or_default()
            .insert(b.into(), vec![at.into()]);
    };
    edge(&mut graph, "http", "state", "src/http/metrics.rs:3");
    edge(&mut graph, "state", "http", "src/state.rs:9");
    edge(&mut graph, "state", "auth", "src/state.rs:12");
    edge(&mut graph, "auth", "state", "src/auth/login.rs:14");
    edge(&mut graph, "web", "auth", "src/web/mod.rs:1");
    edge(&mut graph, "a", "b", "src/a.rs:1");
    edge(&mut graph, "b", "c", "src/b.rs:1");
    edge(&mut graph, "c", "a", "src/c.rs:1");
    let found = cycles(&graph);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(
        found[0],
        "cycle among a, b, c:\n    a → b: src/a.rs:1\n    b → c: src/b.rs:1\n    c → a: src/c.rs:1"
    );
    // Two mutual pairs sharing `state` are one group, and both pairs are named; web, which
    // only imports, is not in it.
    assert_eq!(
        found[1],
        "cycle among auth, http, state:\n    auth → state (mutual): src/auth/login.rs:14\n    \
         http → state (mutual): src/http/metrics.rs:3\n    \
         state → auth (mutual): src/state.rs:12\n    state → http (mutual): src/state.rs:9"
    );
    graph.remove("c");
    graph.remove("state");
    assert!(cycles(&graph).is_empty());
}

/// The 1-based lines of `code` (already `code_only`) that read a row by position:
/// `try_get(<integer>)`, with or without a turbofish (`try_get::<i64, _>(3)`).
fn positional_reads(code: &str) -> Vec<usize> {
    let chars: Vec<char> = code.chars().collect();
    let line_of = |pos: usize| chars[..pos].iter().filter(|&&c| c == '\n').count() + 1;
    let mut out = Vec::new();
    for i in 0..chars.len() {
        let starts_word = i == 0 || !is_ident(chars[i - 1]);
        if !starts_word || ident_at(&chars, i) != "try_get" {
            continue;
        }
        let mut j = skip_space(&chars, i + "try_get".len());
        if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
            j = skip_space(&chars, j + 2);
            if chars.get(j) == Some(&'<') {
                let mut depth = 0;
                while j < chars.len() {
                    match chars[j] {
                        '<' => depth += 1,
                        '>' => depth -= 1,
                        _ => {}
                    }
                    j += 1;
                    if depth == 0 {
                        break;
                    }
                }
                j = skip_space(&chars, j);
            }
        }
        if chars.get(j) == Some(&'(') {
            let k = skip_space(&chars, j + 1);
            if chars.get(k).is_some_and(|c| c.is_ascii_digit()) {
                out.push(line_of(i));
            }
        }
    }
    out
}

/// A reordered SELECT must fail loudly, never shift fields: rows are read by column name
/// (`FromRow`, `try_get("name")`), never by position.
#[test]
fn rows_are_read_by_column_name_never_by_position() {
    let mut found = Vec::new();
    for file in rust_files(&src_dir()) {
        let src = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        for line in positional_reads(&code_only(&src)) {
            found.push(format!(
                "{}:{}: {}",
                display(&file),
                line,
                lines[line - 1].trim()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "rows read by position ({} places); read them by column name:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The positional-read check on made-up code: an index counts however it is spelt; a column
/// name, a comment or a string does not.
#[test]
fn the_positional_read_check_finds_indexes_only() {
    let flagged = |text: &str| positional_reads(&code_only(text));
    assert_eq!(flagged("let id: i64 = r.try_get(0)?;\n"), [1]);
    assert_eq!(
        flagged("let a = r.try_get(\"id\")?;\nlet b = r.try_get::<i64, _>( 3 )?;\n"),
        [2]
    );
    assert_eq!(
        flagged("fn f() {\n    r.try_get::<Option<Vec<u8>>, _>(12)\n}\n"),
        [2]
    );
    assert!(flagged("let id: i64 = r.try_get(\"id\")?;\n").is_empty());
    assert!(flagged("// was r.try_get(0), now by name\nlet s = \"try_get(1)\";\n").is_empty());
    assert!(flagged("let x = row.try_get_unchecked(0);\nlet y = my_try_get(1);\n").is_empty());
    assert!(flagged("#[cfg(test)]\nmod tests { fn t() { r.try_get(0); } }\n").is_empty());
}
