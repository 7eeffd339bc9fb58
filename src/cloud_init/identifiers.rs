//! Which variables a template may read: the documented ones (`sandbox::VARIABLES`), names it
//! binds itself with `set`/`set_global`/`for`, and `loop` (tera's loop state). Anything else is
//! refused before rendering. An allow-list, not a deny-list: the engine defines names of its
//! own (`__tera_context` dumps the whole render context as JSON), and a list of bad names
//! would miss the next one. Names starting with `__` are refused even when the template binds
//! them, since tera resolves its own before the template's.

use std::collections::HashSet;

use tera::ast::{Expr, ExprVal, Node};

use super::sandbox::VARIABLES;

/// Every identifier read that is neither documented nor bound by the template, and every
/// reserved name bound, as `(word, message)` in template order.
pub fn refusals(ast: &[Node]) -> Vec<(String, String)> {
    let mut bound = HashSet::new();
    let mut found = Vec::new();
    bind_nodes(ast, &mut bound, &mut found);
    let allowed = |name: &str| {
        !is_reserved(name) && (VARIABLES.contains(&name) || name == "loop" || bound.contains(name))
    };
    let mut used = Vec::new();
    read_nodes(ast, &mut used);
    for name in used {
        if !allowed(&name) {
            let message = format!(
                "`{name}` is not a variable templates may read (variables: {}; or a name the \
                 template sets itself)",
                VARIABLES.join(", ")
            );
            found.push((name, message));
        }
    }
    found
}

fn is_reserved(name: &str) -> bool {
    name.starts_with("__")
}

fn bind(name: &str, bound: &mut HashSet<String>, found: &mut Vec<(String, String)>) {
    if is_reserved(name) {
        found.push((
            name.to_owned(),
            format!("`{name}` is reserved by the template engine (names starting with __)"),
        ));
    } else {
        bound.insert(name.to_owned());
    }
}

fn bind_nodes(nodes: &[Node], bound: &mut HashSet<String>, found: &mut Vec<(String, String)>) {
    for node in nodes {
        match node {
            Node::Set(_, set) => bind(&set.key, bound, found),
            Node::If(if_node, _) => {
                for (_, _, body) in &if_node.conditions {
                    bind_nodes(body, bound, found);
                }
                if let Some((_, body)) = &if_node.otherwise {
                    bind_nodes(body, bound, found);
                }
            }
            Node::Forloop(_, for_loop, _) => {
                bind(&for_loop.value, bound, found);
                if let Some(k) = &for_loop.key {
                    bind(k, bound, found);
                }
                bind_nodes(&for_loop.body, bound, found);
                if let Some(body) = &for_loop.empty_body {
                    bind_nodes(body, bound, found);
                }
            }
            _ => {}
        }
    }
}

fn read_nodes(nodes: &[Node], used: &mut Vec<String>) {
    for node in nodes {
        match node {
            Node::VariableBlock(_, expr) => read_expr(expr, used),
            Node::Set(_, set) => read_expr(&set.value, used),
            Node::If(if_node, _) => {
                for (_, cond, body) in &if_node.conditions {
                    read_expr(cond, used);
                    read_nodes(body, used);
                }
                if let Some((_, body)) = &if_node.otherwise {
                    read_nodes(body, used);
                }
            }
            Node::Forloop(_, for_loop, _) => {
                read_expr(&for_loop.container, used);
                read_nodes(&for_loop.body, used);
                if let Some(body) = &for_loop.empty_body {
                    read_nodes(body, used);
                }
            }
            // Everything else is text or refused by the sandbox's own walk.
            _ => {}
        }
    }
}

fn read_expr(expr: &Expr, used: &mut Vec<String>) {
    read_val(&expr.val, used);
    for filter in &expr.filters {
        for arg in filter.args.values() {
            read_expr(arg, used);
        }
    }
}

fn read_val(val: &ExprVal, used: &mut Vec<String>) {
    match val {
        ExprVal::Ident(i) => read_ident(i, used),
        ExprVal::String(_) | ExprVal::Int(_) | ExprVal::Float(_) | ExprVal::Bool(_) => {}
        ExprVal::Math(m) => {
            read_expr(&m.lhs, used);
            read_expr(&m.rhs, used);
        }
        ExprVal::Logic(l) => {
            read_expr(&l.lhs, used);
            read_expr(&l.rhs, used);
        }
        ExprVal::In(i) => {
            read_expr(&i.lhs, used);
            read_expr(&i.rhs, used);
        }
        ExprVal::Test(t) => {
            read_ident(&t.ident, used);
            t.args.iter().for_each(|a| read_expr(a, used));
        }
        ExprVal::FunctionCall(c) => c.args.values().for_each(|a| read_expr(a, used)),
        ExprVal::MacroCall(c) => c.args.values().for_each(|a| read_expr(a, used)),
        ExprVal::Array(items) => items.iter().for_each(|e| read_expr(e, used)),
        ExprVal::StringConcat(c) => c.values.iter().for_each(|v| read_val(v, used)),
    }
}

/// The variables an identifier path reads: its root, and the root of every bracket index that
/// is itself a variable (`machine[key]` reads `machine` and `key`).
fn read_ident(ident: &str, used: &mut Vec<String>) {
    let root_end = ident.find(['.', '[']).unwrap_or(ident.len());
    used.push(ident[..root_end].trim().to_owned());
    let mut rest = &ident[root_end..];
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        let index = rest[open + 1..open + close].trim();
        let literal = index.starts_with(['"', '\'', '`']) || index.parse::<i64>().is_ok();
        if !literal && !index.is_empty() {
            read_ident(index, used);
        }
        rest = &rest[open + close + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(body: &str) -> Vec<String> {
        let t = tera::Template::new("t", None, body).unwrap();
        refusals(&t.ast).into_iter().map(|(w, _)| w).collect()
    }

    #[test]
    fn the_engines_own_context_dump_is_refused_wherever_it_is_read() {
        for body in [
            "{{ __tera_context | yaml }}",
            "{% set x = __tera_context %}",
            "{% if __tera_context is containing(\"«\") %}{% endif %}",
            "{% for c in __tera_context %}{% endfor %}",
            "{{ machine[__tera_context] | yaml }}",
            "{{ \"a\" ~ __tera_context | yaml }}",
            "{{ hostname | replace(from=__tera_context, to=\"\") | yaml }}",
        ] {
            assert_eq!(words(body), ["__tera_context"], "{body}");
        }
    }

    #[test]
    fn reserved_names_cannot_be_bound_either() {
        assert_eq!(
            words("{% set __tera_context = 1 %}{{ __tera_context | yaml }}"),
            ["__tera_context", "__tera_context"]
        );
    }

    #[test]
    fn documented_bound_and_loop_names_pass_and_others_do_not() {
        assert!(words(
            "{% set w = hostname | shell %}{% for t in machine.mesh_tags %}{{ loop.index ~ t ~ w | yaml }}{% endfor %}{{ machine[\"image\"] | yaml }}{{ machine.ssh_keys[0] | yaml }}"
        )
        .is_empty());
        assert_eq!(
            words("{{ secrets | yaml }}{{ env.HOME | yaml }}"),
            ["secrets", "env"]
        );
        assert_eq!(
            words("{% if undefined_thing is defined %}{% endif %}"),
            ["undefined_thing"]
        );
    }
}
