//! The sandboxed template engine. Templates are written by operators and rendered on the
//! server, so they get an explicit allow-list instead of tera's defaults: the project's own
//! escaping filters plus pure built-in string, list and number filters and tests,
//! `if`/`for`/`set`, and one function, a capped `range`. Nothing that reads the environment,
//! the clock or randomness, and no `include`/`import`/`extends`/`macro`/`block`.
//!
//! The allow-list is enforced twice: the parsed template is walked and anything outside the
//! list is refused before rendering (naming the line and the word), and the engine itself has
//! the refused functions replaced by ones that fail, should the walk ever miss one.
//!
//! This module is pure: it parses and renders in the calling thread. Time, memory and stack are
//! bounded by running it in a separate process (`worker`), never on a server thread.

use std::collections::HashMap;
use std::io::Write;

use serde::{Deserialize, Serialize};
use tera::ast::{Expr, ExprVal, FunctionCall, Node};
use tera::Value;

use super::filters::{shell_filter, yaml_filter};

/// Filters a template may use: the escaping filters and tera's pure string, list and number
/// filters (none of them does I/O).
pub const ALLOWED_FILTERS: &[&str] = &[
    "yaml",
    "shell",
    "lower",
    "upper",
    "trim",
    "trim_start",
    "trim_end",
    "trim_start_matches",
    "trim_end_matches",
    "truncate",
    "replace",
    "capitalize",
    "title",
    "wordcount",
    "indent",
    "split",
    "join",
    "first",
    "last",
    "nth",
    "length",
    "reverse",
    "sort",
    "unique",
    "slice",
    "concat",
    "map",
    "filter",
    "get",
    "int",
    "float",
    "abs",
    "round",
    "as_str",
    "default",
];

/// Tests (`x is defined`) a template may use.
pub const ALLOWED_TESTS: &[&str] = &[
    "defined",
    "undefined",
    "string",
    "number",
    "odd",
    "even",
    "divisibleby",
    "iterable",
    "object",
    "starting_with",
    "ending_with",
    "containing",
];

/// Functions a template may call.
pub const ALLOWED_FUNCTIONS: &[&str] = &["range"];

/// The variables a render offers (README.md, "cloud-init templates"). A template may read
/// these, names it binds itself (`set`, `for`) and `loop` inside a `for`; any other identifier
/// is refused, above all the engine's own `__tera_context`, which dumps the whole context.
pub const VARIABLES: &[&str] = &[
    "hostname",
    "machine",
    "mesh_tags_csv",
    "mesh_login_server",
    "now",
    "mesh_preauth_key",
    "tunnel_token",
];

/// Tags a template may use (besides `{{ }}` and comments).
pub const ALLOWED_TAGS: &str = "if, for, set, set_global, break, continue, raw";

/// tera functions that are registered by default and must never run: they read the
/// environment, the clock or randomness, or abort the render on the template's say-so.
const REFUSED_FUNCTIONS: &[&str] = &["get_env", "now", "get_random", "throw"];

/// Engine limits that travel with each job.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct EngineLimits {
    /// Bytes one render may write before it is stopped.
    pub output_bytes: usize,
    /// Most items one `range(…)` call may produce.
    pub range_items: usize,
}

impl Default for EngineLimits {
    fn default() -> Self {
        Self {
            output_bytes: 4 * super::MAX_PAYLOAD_BYTES,
            range_items: 10_000,
        }
    }
}

/// Something outside the allow-list, with the template line where it first appears.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Refusal {
    /// 1-based template line, when the word could be found in a tag.
    pub line: Option<usize>,
    /// The refused word as written (`get_env`, `include`, …).
    pub word: String,
    /// What it is and what is allowed instead.
    pub message: String,
}

impl Refusal {
    /// "line 3: `get_env` is not allowed …" for field errors.
    pub fn describe(&self) -> String {
        match self.line {
            Some(l) => format!("line {l}: {}", self.message),
            None => self.message.clone(),
        }
    }
}

/// A render that did not produce output, with the template line when one is known.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EngineError {
    /// 1-based template line, when tera's message names one or a word can be found.
    pub line: Option<usize>,
    /// tera's innermost message, shortened.
    pub message: String,
    /// True when the output limit stopped it.
    pub over_output_limit: bool,
}

/// A job for the engine: one template, rendered once per context (none = only check it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// Who asked (a user name): a worker's kept parse serves only the same person's later jobs,
    /// so how fast a job comes back tells nobody whether someone else rendered that text.
    #[serde(default)]
    pub owner: String,
    /// The template text.
    pub body: String,
    /// One JSON object per render; empty to only check the template.
    pub contexts: Vec<Value>,
    /// Output and `range` limits.
    pub limits: EngineLimits,
}

/// What the engine made of a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum Outcome {
    /// The template does not parse.
    Syntax(EngineError),
    /// The template parses but uses something outside the allow-list; nothing was rendered.
    Refused(Vec<Refusal>),
    /// One result per context, in order.
    Rendered(Vec<Result<String, EngineError>>),
}

/// Parses, checks against the allow-list and renders each context.
pub fn run(job: &Job) -> Outcome {
    run_parsed(job, &mut Parsed::default())
}

/// Templates a worker has parsed, kept between its jobs: parsing is most of a render (about
/// 0.5 ms of 0.55 for the default template). An entry is who sent it, the full text and what
/// tera's parser made of it, which the render only reads. Every job still gets a fresh engine,
/// context and output; a hit only skips the parse, and only for the same owner (a hit is
/// faster: shared, it would tell one user that another rendered a guessed text lately).
#[derive(Default)]
pub struct Parsed(Vec<(String, String, tera::Template)>);

impl Parsed {
    /// Bodies kept: the few templates in use at a time, not a memory.
    const KEEP: usize = 4;

    /// The parse of `body` for `owner`, from their last few or freshly made.
    fn template(&mut self, owner: &str, body: &str) -> tera::Result<tera::Template> {
        if let Some(i) = self
            .0
            .iter()
            .position(|(who, text, _)| who == owner && text == body)
        {
            let entry = self.0.remove(i);
            let template = entry.2.clone();
            self.0.push(entry);
            return Ok(template);
        }
        let template = tera::Template::new("payload", None, body)?;
        if self.0.len() == Self::KEEP {
            self.0.remove(0);
        }
        self.0
            .push((owner.to_owned(), body.to_owned(), template.clone()));
        Ok(template)
    }
}

/// [`run`] with the worker's parsed templates. Runs in the worker process.
pub fn run_parsed(job: &Job, parsed: &mut Parsed) -> Outcome {
    // Adding a template to the engine only parses it (and resolves `extends`/`import`, which
    // fail here since there is nothing to resolve them against): nothing runs before the walk.
    let tera = match parsed
        .template(&job.owner, &job.body)
        .and_then(|template| engine(template, job.limits))
    {
        Ok(t) => t,
        Err(e) => {
            // A template that parses but names another template is refused, not "broken".
            let refused = tera::Template::new("payload", None, &job.body)
                .map(|t| refusals(&job.body, &t.ast))
                .unwrap_or_default();
            return if refused.is_empty() {
                Outcome::Syntax(engine_error(&job.body, &e))
            } else {
                Outcome::Refused(refused)
            };
        }
    };
    let ast = match tera.get_template("payload") {
        Ok(t) => &t.ast,
        Err(e) => return Outcome::Syntax(engine_error(&job.body, &e)),
    };
    let refusals = refusals(&job.body, ast);
    if !refusals.is_empty() {
        return Outcome::Refused(refusals);
    }
    Outcome::Rendered(
        job.contexts
            .iter()
            .map(|ctx| render_one(&tera, &job.body, ctx, job.limits))
            .collect(),
    )
}

fn render_one(
    tera: &tera::Tera,
    body: &str,
    ctx: &Value,
    limits: EngineLimits,
) -> Result<String, EngineError> {
    let context = tera::Context::from_value(ctx.clone()).map_err(|e| EngineError {
        line: None,
        message: format!("the render context is not an object: {e}"),
        over_output_limit: false,
    })?;
    let mut out = CappedWriter {
        buf: Vec::new(),
        cap: limits.output_bytes,
        over: false,
    };
    match tera.render_to("payload", &context, &mut out) {
        Ok(()) => String::from_utf8(out.buf).map_err(|_| EngineError {
            line: None,
            message: "the template produced bytes that are not UTF-8".into(),
            over_output_limit: false,
        }),
        Err(_) if out.over => Err(EngineError {
            line: None,
            message: format!(
                "the template writes more than {} bytes; the render was stopped",
                limits.output_bytes
            ),
            over_output_limit: true,
        }),
        Err(e) => Err(engine_error(body, &e)),
    }
}

/// A writer that refuses to grow past `cap`, which stops tera mid-render.
struct CappedWriter {
    buf: Vec<u8>,
    cap: usize,
    over: bool,
}

impl Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            self.over = true;
            return Err(std::io::Error::other("output limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The engine: tera with the escaping filters, the capped `range`, and every refused
/// function replaced by one that fails.
fn engine(template: tera::Template, limits: EngineLimits) -> tera::Result<tera::Tera> {
    let mut tera = tera::Tera::default();
    tera.register_filter("yaml", yaml_filter);
    tera.register_filter("shell", shell_filter);
    let cap = limits.range_items;
    tera.register_function("range", move |args: &HashMap<String, Value>| {
        capped_range(args, cap)
    });
    for name in REFUSED_FUNCTIONS {
        tera.register_function(name, move |_: &HashMap<String, Value>| {
            Err(tera::Error::msg(format!(
                "`{name}` is not available in templates"
            )))
        });
    }
    // What `add_raw_template` does after parsing. Not an .html name, so tera does no HTML
    // escaping: the yaml filter is the escaping.
    tera.templates.insert("payload".into(), template);
    tera.build_inheritance_chains()?;
    tera.check_macro_files()?;
    Ok(tera)
}

/// tera's `range` (start, end, step_by), refusing to build more than `cap` items.
fn capped_range(args: &HashMap<String, Value>, cap: usize) -> tera::Result<Value> {
    let arg = |name: &str, default: Option<u64>| -> tera::Result<u64> {
        match args.get(name) {
            Some(v) => v.as_u64().ok_or_else(|| {
                tera::Error::msg(format!(
                    "`range` needs `{name}` to be a whole number ≥ 0, not {v}"
                ))
            }),
            None => default.ok_or_else(|| tera::Error::msg(format!("`range` needs `{name}`"))),
        }
    };
    let start = arg("start", Some(0))?;
    let end = arg("end", None)?;
    let step = arg("step_by", Some(1))?;
    if step == 0 {
        return Err(tera::Error::msg("`range` needs `step_by` of at least 1"));
    }
    let items = end.saturating_sub(start).div_ceil(step);
    if items > cap as u64 {
        return Err(tera::Error::msg(format!(
            "`range` would make {items} items; templates may make at most {cap}"
        )));
    }
    Ok(Value::Array(
        (start..end)
            .step_by(usize::try_from(step).unwrap_or(usize::MAX))
            .map(Value::from)
            .collect(),
    ))
}

/// Every construct of `ast` outside the allow-list, in template order, first use of each word.
fn refusals(body: &str, ast: &[Node]) -> Vec<Refusal> {
    let mut found: Vec<(String, String)> = Vec::new();
    walk_nodes(ast, &mut found);
    found.extend(super::identifiers::refusals(ast));
    found.extend(super::secret_use::refusals(ast));
    let mut seen = std::collections::HashSet::new();
    found.retain(|(word, _)| seen.insert(word.clone()));
    let unlisted = found.len().saturating_sub(MAX_REFUSALS_LISTED);
    found.truncate(MAX_REFUSALS_LISTED);
    let tags = tags_with_lines(body);
    let lines = first_lines(&tags);
    let mut refused: Vec<Refusal> = found
        .into_iter()
        .map(|(word, message)| Refusal {
            line: if !word.is_empty() && word.chars().all(is_ident) {
                lines.get(word.as_str()).copied()
            } else {
                first_line_with(&tags, &word)
            },
            word,
            message,
        })
        .collect();
    if unlisted > 0 {
        refused.push(Refusal {
            line: None,
            word: "…".into(),
            message: format!(
                "{unlisted} more uses outside the allow-list are not listed; fix these first"
            ),
        });
    }
    refused
}

/// Refusals a check lists at most: a person fixes a few at a time, and a template of thousands
/// of refused names must not make an answer larger than a worker may send.
const MAX_REFUSALS_LISTED: usize = 100;

fn refuse_tag(found: &mut Vec<(String, String)>, tag: &str) {
    found.push((
        tag.to_owned(),
        format!("`{tag}` is not allowed in templates (tags allowed: {ALLOWED_TAGS})"),
    ));
}

fn walk_nodes(nodes: &[Node], found: &mut Vec<(String, String)>) {
    for node in nodes {
        match node {
            Node::Text(_) | Node::Raw(..) | Node::Comment(..) | Node::Break(_) => {}
            Node::Continue(_) => {}
            Node::VariableBlock(_, expr) => walk_expr(expr, found),
            Node::Set(_, set) => walk_expr(&set.value, found),
            Node::If(if_node, _) => {
                for (_, cond, body) in &if_node.conditions {
                    walk_expr(cond, found);
                    walk_nodes(body, found);
                }
                if let Some((_, body)) = &if_node.otherwise {
                    walk_nodes(body, found);
                }
            }
            Node::Forloop(_, for_loop, _) => {
                walk_expr(&for_loop.container, found);
                walk_nodes(&for_loop.body, found);
                if let Some(body) = &for_loop.empty_body {
                    walk_nodes(body, found);
                }
            }
            Node::Include(..) => refuse_tag(found, "include"),
            Node::ImportMacro(..) => refuse_tag(found, "import"),
            Node::Extends(..) => refuse_tag(found, "extends"),
            Node::MacroDefinition(..) => refuse_tag(found, "macro"),
            Node::Block(..) => refuse_tag(found, "block"),
            Node::Super => refuse_tag(found, "super"),
            Node::FilterSection(..) => refuse_tag(found, "filter"),
        }
    }
}

fn walk_call(call: &FunctionCall, kind: &str, allowed: &[&str], found: &mut Vec<(String, String)>) {
    if !allowed.contains(&call.name.as_str()) {
        found.push((
            call.name.clone(),
            format!(
                "the {kind} `{}` is not allowed in templates ({kind}s allowed: {})",
                call.name,
                allowed.join(", ")
            ),
        ));
    }
    for arg in call.args.values() {
        walk_expr(arg, found);
    }
}

fn walk_expr(expr: &Expr, found: &mut Vec<(String, String)>) {
    walk_val(&expr.val, found);
    for filter in &expr.filters {
        walk_call(filter, "filter", ALLOWED_FILTERS, found);
    }
}

fn walk_val(val: &ExprVal, found: &mut Vec<(String, String)>) {
    match val {
        ExprVal::String(_)
        | ExprVal::Int(_)
        | ExprVal::Float(_)
        | ExprVal::Bool(_)
        | ExprVal::Ident(_) => {}
        ExprVal::Math(m) => {
            walk_expr(&m.lhs, found);
            walk_expr(&m.rhs, found);
        }
        ExprVal::Logic(l) => {
            walk_expr(&l.lhs, found);
            walk_expr(&l.rhs, found);
        }
        ExprVal::In(i) => {
            walk_expr(&i.lhs, found);
            walk_expr(&i.rhs, found);
        }
        ExprVal::Test(t) => {
            if !ALLOWED_TESTS.contains(&t.name.as_str()) {
                found.push((
                    t.name.clone(),
                    format!(
                        "the test `{}` is not allowed in templates (tests allowed: {})",
                        t.name,
                        ALLOWED_TESTS.join(", ")
                    ),
                ));
            }
            for arg in &t.args {
                walk_expr(arg, found);
            }
        }
        ExprVal::FunctionCall(call) => walk_call(call, "function", ALLOWED_FUNCTIONS, found),
        ExprVal::MacroCall(call) => {
            let word = format!("{}::{}", call.namespace, call.name);
            found.push((
                word.clone(),
                format!("`{word}` calls a macro; macros are not allowed in templates"),
            ));
        }
        ExprVal::Array(items) => items.iter().for_each(|e| walk_expr(e, found)),
        ExprVal::StringConcat(concat) => concat.values.iter().for_each(|v| walk_val(v, found)),
    }
}

/// The first line where `word` appears as a whole word inside a `{{ }}` or `{% %}` tag.
fn line_of_word(body: &str, word: &str) -> Option<usize> {
    first_line_with(&tags_with_lines(body), word)
}

/// Of `tags` (from [`tags_with_lines`]), the line of the first that holds `word`.
fn first_line_with(tags: &[(usize, &str)], word: &str) -> Option<usize> {
    tags.iter()
        .find(|(_, tag)| contains_word(tag, word))
        .map(|(line, _)| *line)
}

/// The line each identifier of `tags` first appears on, in one pass: a word made of
/// identifier characters is "in a tag as a whole word" exactly when it is one of the tag's
/// maximal runs of them, so thousands of refused names are looked up, not searched for.
fn first_lines<'a>(tags: &[(usize, &'a str)]) -> std::collections::HashMap<&'a str, usize> {
    let mut lines = std::collections::HashMap::new();
    for (line, tag) in tags {
        for word in tag.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()) {
            lines.entry(word).or_insert(*line);
        }
    }
    lines
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every `{{ }}` and `{% %}` tag of `body` (an unclosed one runs to the end) with the line it
/// starts on, in one pass: a check names a line for each refused word, and searching the body
/// afresh for each word (and the rest of it for each tag) made a template of many refused
/// names cost its whole check deadline (found by attacking the render pool).
fn tags_with_lines(body: &str) -> Vec<(usize, &str)> {
    let mut tags = Vec::new();
    let (mut line, mut counted_to, mut at) = (1, 0, 0);
    while let Some(found) = body[at..].find('{') {
        let start = at + found;
        let close = match body.as_bytes().get(start + 1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            _ => {
                at = start + 1;
                continue;
            }
        };
        let len = body[start..]
            .find(close)
            .map_or(body.len() - start, |l| l + 2);
        line += body[counted_to..start].matches('\n').count();
        counted_to = start;
        tags.push((line, &body[start..start + len]));
        at = start + len;
    }
    tags
}

fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The innermost message of a tera error, with the template line when one can be found.
fn engine_error(body: &str, err: &tera::Error) -> EngineError {
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        msg = s.to_string();
        source = s.source();
    }
    let line = line_in_message(&msg).or_else(|| {
        // "Variable `x.y` not found …": point at the first tag using it.
        let var = msg.split('`').nth(1)?;
        line_of_word(body, var).or_else(|| {
            body.lines()
                .position(|l| l.contains(var) && (l.contains("{{") || l.contains("{%")))
                .map(|i| i + 1)
        })
    });
    EngineError {
        line,
        message: shorten(msg.trim()),
        over_output_limit: false,
    }
}

/// tera's parse errors quote the offending line, which for a hostile template can be 100 KiB:
/// keep each quoted line and the whole message short enough to read.
fn shorten(msg: &str) -> String {
    const LINE: usize = 160;
    const TOTAL: usize = 1000;
    let mut out = String::new();
    for line in msg.lines() {
        if !out.is_empty() {
            out.push('\n');
        }
        if line.chars().count() > LINE {
            out.extend(line.chars().take(LINE));
            out.push('…');
        } else {
            out.push_str(line);
        }
    }
    if out.chars().count() > TOTAL {
        out = out.chars().take(TOTAL).collect::<String>() + "…";
    }
    out
}

fn line_in_message(msg: &str) -> Option<usize> {
    // tera parse errors carry " --> LINE:COL".
    let after = msg.split("--> ").nth(1)?;
    after.split(':').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(body: &str, contexts: Vec<Value>) -> Job {
        Job {
            owner: "alice".into(),
            body: body.into(),
            contexts,
            limits: EngineLimits::default(),
        }
    }

    fn refused(body: &str) -> Vec<Refusal> {
        match run(&job(body, vec![json!({})])) {
            Outcome::Refused(r) => r,
            other => panic!("expected a refusal for {body:?}, got {other:?}"),
        }
    }

    #[test]
    fn every_impure_or_escaping_construct_is_refused_naming_its_line() {
        let cases = [
            (
                "#cloud-config\na: {{ get_env(name=\"HOME\") | yaml }}\n",
                "get_env",
                2,
            ),
            ("#cloud-config\n\na: {{ now() | yaml }}\n", "now", 3),
            (
                "#cloud-config\na: {{ get_random(end=9) | yaml }}\n",
                "get_random",
                2,
            ),
            ("#cloud-config\n{% include \"payload\" %}\n", "include", 2),
            ("{% import \"m\" as m %}\n#cloud-config\n", "import", 1),
            ("{% extends \"base\" %}\n", "extends", 1),
            (
                "#cloud-config\n{% macro m() %}x{% endmacro m %}\n",
                "macro",
                2,
            ),
            (
                "#cloud-config\n{% filter upper %}a: b{% endfilter %}\n",
                "filter",
                2,
            ),
            (
                "#cloud-config\na: {{ x | filesizeformat | yaml }}\n",
                "filesizeformat",
                2,
            ),
            (
                "#cloud-config\n{% if x is matching(\"a\") %}{% endif %}\n",
                "matching",
                2,
            ),
        ];
        for (body, word, line) in cases {
            let r = refused(body);
            assert_eq!(r[0].word, word, "{body}");
            assert_eq!(r[0].line, Some(line), "{body}");
            assert!(r[0].describe().starts_with(&format!("line {line}: ")));
            assert!(r[0].message.contains(word));
        }
    }

    #[test]
    fn a_refused_function_nested_in_an_allowed_one_is_still_found() {
        let r = refused("{% for i in range(end=get_env(name=\"N\") | int) %}{% endfor %}");
        assert_eq!(r[0].word, "get_env");
    }

    #[test]
    fn a_word_inside_a_string_or_text_does_not_move_the_line() {
        let body = "#cloud-config\n# get_env in a comment line\na: {{ \"x\" | yaml }}\nb: {{ get_env(name=\"A\") | yaml }}\n";
        assert_eq!(refused(body)[0].line, Some(4));
    }

    #[test]
    fn the_engine_itself_refuses_impure_functions() {
        // Defence in depth: even past the walk, the functions are not tera's.
        let template = tera::Template::new("payload", None, "{{ get_env(name=\"HOME\") }}");
        let tera = engine(template.unwrap(), EngineLimits::default()).unwrap();
        let err = tera.render("payload", &tera::Context::new()).unwrap_err();
        let mut msg = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            msg = s.to_string();
            source = s.source();
        }
        assert!(msg.contains("not available"), "{msg}");
    }

    #[test]
    fn a_kept_parse_renders_like_a_fresh_one_and_keeps_nothing_of_the_last_job() {
        let mut parsed = Parsed::default();
        let body = "{% if hostname is defined %}{% set_global machine = hostname %}{% endif %}\
                    {{ machine | default(value=\"unset\") }}";
        let first = job(body, vec![json!({"hostname": "first"})]);
        let second = job(body, vec![json!({})]);
        for _ in 0..2 {
            assert_eq!(run_parsed(&first, &mut parsed), run(&first));
            assert_eq!(run_parsed(&second, &mut parsed), run(&second));
        }
        assert_eq!(
            run_parsed(&second, &mut parsed),
            Outcome::Rendered(vec![Ok("unset".into())])
        );
        // Refusals and syntax errors come out the same from a kept parse.
        for body in [
            "{{ get_env(name=\"A\") }}",
            "{% extends \"x\" %}",
            "{{ a | yaml }",
        ] {
            let j = job(body, vec![json!({})]);
            assert_eq!(run_parsed(&j, &mut parsed), run(&j), "{body}");
            assert_eq!(run_parsed(&j, &mut parsed), run(&j), "{body}");
        }
        assert!(parsed.0.len() <= Parsed::KEEP);
    }

    #[test]
    fn range_is_capped_and_otherwise_works() {
        let out = run(&job(
            "{% for i in range(start=1, end=4) %}{{ i }}{% endfor %}",
            vec![json!({})],
        ));
        assert_eq!(out, Outcome::Rendered(vec![Ok("123".into())]));
        let Outcome::Rendered(r) = run(&job(
            "#cloud-config\n{% for i in range(end=100000000) %}x{% endfor %}",
            vec![json!({})],
        )) else {
            panic!()
        };
        let err = r[0].clone().unwrap_err();
        assert!(err.message.contains("at most 10000"), "{}", err.message);
        assert_eq!(err.line, Some(2));
    }

    #[test]
    fn output_over_the_limit_stops_the_render() {
        let mut j = job(
            "{% for i in range(end=10000) %}{% for k in range(end=10000) %}xxxxxxxx{% endfor %}{% endfor %}",
            vec![json!({})],
        );
        j.limits.output_bytes = 1000;
        let Outcome::Rendered(r) = run(&j) else {
            panic!()
        };
        assert!(r[0].as_ref().unwrap_err().over_output_limit);
    }

    #[test]
    fn syntax_errors_and_undefined_variables_name_their_line() {
        let Outcome::Syntax(e) = run(&job("#cloud-config\nx: {{ a | yaml }\n", vec![])) else {
            panic!()
        };
        assert_eq!(e.line, Some(2));
        let Outcome::Rendered(r) = run(&job(
            "#cloud-config\nh: {{ hostname | yaml }}\nf: {{ machine.fqdn | yaml }}\n",
            vec![json!({"hostname": "a", "machine": {}})],
        )) else {
            panic!()
        };
        let e = r[0].clone().unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("machine.fqdn"), "{}", e.message);
    }

    #[test]
    fn a_parse_error_on_a_huge_line_is_reported_briefly() {
        let body = format!(
            "#cloud-config\nx: {{{{ {}1{} | yaml }}}}\n",
            "(".repeat(40_000),
            ")".repeat(40_000)
        );
        let Outcome::Syntax(e) = run(&job(&body, vec![])) else {
            panic!()
        };
        assert_eq!(e.line, Some(2));
        assert!(e.message.chars().count() <= 1001, "{}", e.message.len());
    }

    #[test]
    fn the_default_template_uses_only_allowed_constructs() {
        let template =
            tera::Template::new("t", None, crate::cloud_init::DEFAULT_TEMPLATE_BODY).unwrap();
        assert_eq!(
            refusals(crate::cloud_init::DEFAULT_TEMPLATE_BODY, &template.ast),
            []
        );
    }

    /// The search `tags_with_lines` replaced: from the start for every word, the rest of the
    /// body for every tag. Kept as the oracle of the one-pass version.
    fn line_of_word_by_search(body: &str, word: &str) -> Option<usize> {
        let mut rest = body;
        let mut offset = 0;
        loop {
            let start = ["{{", "{%"].iter().filter_map(|m| rest.find(m)).min()?;
            let close = if rest[start..].starts_with("{{") {
                "}}"
            } else {
                "%}"
            };
            let len = rest[start..]
                .find(close)
                .map_or(rest.len() - start, |l| l + 2);
            if contains_word(&rest[start..start + len], word) {
                return Some(body[..offset + start].matches('\n').count() + 1);
            }
            offset += start + len;
            rest = &rest[start + len..];
        }
    }

    proptest::proptest! {
        /// Over bodies made of braces, percent signs, newlines and two names, in any order:
        /// the one-pass lines (searched per word, or looked up) are the old search's.
        #[test]
        fn one_pass_tag_lines_equal_the_search_they_replaced(
            body in "[{}% \nab]{0,60}",
        ) {
            let tags = tags_with_lines(&body);
            let lines = first_lines(&tags);
            for word in ["a", "b", "ab"] {
                let searched = line_of_word_by_search(&body, word);
                proptest::prop_assert_eq!(line_of_word(&body, word), searched, "{:?} in {:?}", word, body);
                proptest::prop_assert_eq!(lines.get(word).copied(), searched, "{:?} in {:?}", word, body);
            }
        }
    }

    #[test]
    fn a_check_of_thousands_of_refused_names_is_quick() {
        let body: String = (0..2000).map(|i| format!("{{{{ v{i} }}}}\n")).collect();
        let started = std::time::Instant::now();
        let outcome = run(&Job {
            owner: "alice".into(),
            body,
            contexts: Vec::new(),
            limits: EngineLimits::default(),
        });
        let Outcome::Refused(refused) = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(refused.len(), MAX_REFUSALS_LISTED + 1);
        assert_eq!(refused[99].line, Some(100));
        assert!(
            refused[100].message.starts_with("1900 more uses"),
            "{refused:?}"
        );
        // Was seconds (the deadline) with a search per word; the walk is milliseconds.
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
