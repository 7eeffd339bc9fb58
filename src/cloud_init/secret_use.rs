//! How templates may use render-time secrets. A template sees only a secret's stand-in
//! (`«secret:NAME»`, see `stand_in`), so no transform can reveal a value; but a transformed
//! stand-in (`truncate`, `upper`, slicing in a loop) would no longer be replaced by the value
//! and would send changed text. A secret may therefore only be inserted whole — alone or
//! joined with `~` — through `| yaml` or `| shell`, or tested for presence with a plain `if`.
//! Variables `set` from a secret are secrets too.

use std::collections::HashSet;

use tera::ast::{Expr, ExprVal, LogicOperator, Node};

/// The secrets a template receives.
pub const SECRET_NAMES: [&str; 2] = ["mesh_preauth_key", "tunnel_token"];

/// Filters that keep a secret whole (escaping only).
const WHOLE_FILTERS: [&str; 2] = ["yaml", "shell"];

/// Every use of a secret (or of a variable set from one) that could reveal part of it, as
/// `(word, message)` in template order.
pub fn refusals(ast: &[Node]) -> Vec<(String, String)> {
    let mut tainted: HashSet<String> = SECRET_NAMES.iter().map(|s| (*s).to_owned()).collect();
    // A fixpoint: a `set` late in a loop body taints uses earlier in the same body.
    loop {
        let before = tainted.len();
        collect_taint(ast, &mut tainted);
        if tainted.len() == before {
            break;
        }
    }
    let mut found = Vec::new();
    check_nodes(ast, &tainted, &mut found);
    found
}

/// The variable an identifier reads (`a.b[0]` reads `a`).
fn root(ident: &str) -> &str {
    ident.split(['.', '[']).next().unwrap_or(ident)
}

fn mentions(expr: &Expr, t: &HashSet<String>) -> bool {
    mentions_val(&expr.val, t)
        || expr
            .filters
            .iter()
            .any(|f| f.args.values().any(|a| mentions(a, t)))
}

fn mentions_val(val: &ExprVal, t: &HashSet<String>) -> bool {
    match val {
        ExprVal::Ident(i) => t.contains(root(i)),
        ExprVal::String(_) | ExprVal::Int(_) | ExprVal::Float(_) | ExprVal::Bool(_) => false,
        ExprVal::Math(m) => mentions(&m.lhs, t) || mentions(&m.rhs, t),
        ExprVal::Logic(l) => mentions(&l.lhs, t) || mentions(&l.rhs, t),
        ExprVal::In(i) => mentions(&i.lhs, t) || mentions(&i.rhs, t),
        ExprVal::Test(x) => t.contains(root(&x.ident)) || x.args.iter().any(|a| mentions(a, t)),
        ExprVal::FunctionCall(c) => c.args.values().any(|a| mentions(a, t)),
        ExprVal::MacroCall(c) => c.args.values().any(|a| mentions(a, t)),
        ExprVal::Array(items) => items.iter().any(|e| mentions(e, t)),
        ExprVal::StringConcat(c) => c.values.iter().any(|v| mentions_val(v, t)),
    }
}

fn collect_taint(nodes: &[Node], t: &mut HashSet<String>) {
    for node in nodes {
        match node {
            Node::Set(_, set) if mentions(&set.value, t) => {
                t.insert(set.key.clone());
            }
            Node::If(if_node, _) => {
                for (_, _, body) in &if_node.conditions {
                    collect_taint(body, t);
                }
                if let Some((_, body)) = &if_node.otherwise {
                    collect_taint(body, t);
                }
            }
            Node::Forloop(_, for_loop, _) => {
                if mentions(&for_loop.container, t) {
                    t.insert(for_loop.value.clone());
                    if let Some(k) = &for_loop.key {
                        t.insert(k.clone());
                    }
                }
                collect_taint(&for_loop.body, t);
                if let Some(body) = &for_loop.empty_body {
                    collect_taint(body, t);
                }
            }
            _ => {}
        }
    }
}

fn refuse(found: &mut Vec<(String, String)>, word: &str) {
    found.push((
        word.to_owned(),
        format!(
            "`{word}` holds a secret: it may only be inserted whole (alone or joined with `~`) \
             through `| yaml` or `| shell`, or tested with a plain `if`; other filters, tests, \
             comparisons and loops could reveal part of it"
        ),
    ));
}

/// The first tainted variable an expression reads, for the refusal's word.
fn first_mention(val: &ExprVal, t: &HashSet<String>) -> String {
    let mut word = SECRET_NAMES[0].to_owned();
    let mut visit = |v: &ExprVal| {
        if let ExprVal::Ident(i) = v {
            if t.contains(root(i)) {
                word = root(i).to_owned();
                return true;
            }
        }
        false
    };
    match val {
        ExprVal::StringConcat(c) => {
            c.values.iter().any(&mut visit);
        }
        ExprVal::Test(x) if t.contains(root(&x.ident)) => word = root(&x.ident).to_owned(),
        other => {
            visit(other);
        }
    }
    word
}

fn check_nodes(nodes: &[Node], t: &HashSet<String>, found: &mut Vec<(String, String)>) {
    for node in nodes {
        match node {
            Node::VariableBlock(_, expr) => check_output(expr, t, found),
            Node::Set(_, set) => check_output(&set.value, t, found),
            Node::If(if_node, _) => {
                for (_, cond, body) in &if_node.conditions {
                    check_condition(cond, t, found);
                    check_nodes(body, t, found);
                }
                if let Some((_, body)) = &if_node.otherwise {
                    check_nodes(body, t, found);
                }
            }
            Node::Forloop(_, for_loop, _) => {
                if mentions(&for_loop.container, t) {
                    refuse(found, &first_mention(&for_loop.container.val, t));
                }
                check_nodes(&for_loop.body, t, found);
                if let Some(body) = &for_loop.empty_body {
                    check_nodes(body, t, found);
                }
            }
            _ => {}
        }
    }
}

/// Output (`{{ }}`) and `set` values: whole inclusion through escaping filters only.
fn check_output(expr: &Expr, t: &HashSet<String>, found: &mut Vec<(String, String)>) {
    if !mentions(expr, t) {
        return;
    }
    let filters_keep_it_whole = expr.filters.iter().all(|f| {
        WHOLE_FILTERS.contains(&f.name.as_str()) && !f.args.values().any(|a| mentions(a, t))
    });
    let whole = |v: &ExprVal| match v {
        ExprVal::Ident(i) => !t.contains(root(i)) || t.contains(i.as_str()),
        other => !mentions_val(other, t),
    };
    let value_is_whole = match &expr.val {
        ExprVal::StringConcat(c) => c.values.iter().all(whole),
        other => whole(other),
    };
    if !(filters_keep_it_whole && value_is_whole && !expr.negated) {
        refuse(found, &first_mention(&expr.val, t));
    }
}

/// `if` conditions: presence only (`if key`, `if not key`, joined with `and`/`or`).
fn check_condition(expr: &Expr, t: &HashSet<String>, found: &mut Vec<(String, String)>) {
    if !mentions(expr, t) {
        return;
    }
    if expr.filters.is_empty() {
        match &expr.val {
            ExprVal::Ident(i) if t.contains(i.as_str()) || !t.contains(root(i)) => return,
            ExprVal::Logic(l) if matches!(l.operator, LogicOperator::And | LogicOperator::Or) => {
                check_condition(&l.lhs, t, found);
                check_condition(&l.rhs, t, found);
                return;
            }
            _ => {}
        }
    }
    refuse(found, &first_mention(&expr.val, t));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(body: &str) -> Vec<String> {
        let mut tera = tera::Tera::default();
        tera.add_raw_template("t", body).unwrap();
        let ast = &tera.get_template("t").unwrap().ast;
        refusals(ast).into_iter().map(|(w, _)| w).collect()
    }

    #[test]
    fn whole_insertions_and_presence_tests_are_allowed() {
        for body in [
            "{{ mesh_preauth_key | yaml }}",
            "{{ tunnel_token | shell | yaml }}",
            "{% set k = mesh_preauth_key | shell %}{{ \"up --auth-key=\" ~ k ~ \" x\" | yaml }}",
            "{% if mesh_preauth_key %}a{% endif %}{% if not tunnel_token and x %}b{% endif %}",
            "{{ hostname | truncate(length=3) }}",
        ] {
            assert!(words(body).is_empty(), "{body}: {:?}", words(body));
        }
    }

    #[test]
    fn every_partial_use_of_a_secret_is_refused_even_through_a_set() {
        for body in [
            "{{ mesh_preauth_key | truncate(length=3, end=\"\") }}",
            "{{ mesh_preauth_key | yaml | length }}",
            "{% if mesh_preauth_key is starting_with(\"a\") %}x{% endif %}",
            "{% if mesh_preauth_key == \"a\" %}x{% endif %}",
            "{% if \"a\" in tunnel_token %}x{% endif %}",
            "{% set k = mesh_preauth_key | shell %}{{ k | truncate(length=3) }}",
            "{% set k = mesh_preauth_key %}{% set j = k %}{{ j | upper }}",
            "{% for c in mesh_preauth_key %}{{ c }}{% endfor %}",
            "{{ hostname | replace(from=\"a\", to=mesh_preauth_key) }}",
            "{{ mesh_preauth_key | yaml }}{{ tunnel_token | lower }}",
        ] {
            assert!(!words(body).is_empty(), "{body} was allowed");
        }
    }
}
