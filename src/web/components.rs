//! Small markup pieces reused across pages.

use maud::{html, Markup};

use crate::domain::FieldErrors;
use crate::web::paths;

/// The hidden CSRF field every form carries.
pub fn csrf_field(token: &str) -> Markup {
    html! { input type="hidden" name="csrf_token" value=(token); }
}

/// A labelled input with its error message, if any.
pub fn field(
    name: &str,
    label: &str,
    kind: &str,
    value: &str,
    errors: &FieldErrors,
    attrs: FieldAttrs,
) -> Markup {
    let error = errors.for_field(name);
    let id = format!("f-{name}");
    let err_id = format!("{id}-error");
    html! {
        div.field.invalid[error.is_some()] {
            label for=(id) { (label) }
            input id=(id) name=(name) type=(kind) value=(value)
                required[attrs.required] autocomplete=[attrs.autocomplete] maxlength=[attrs.maxlength]
                aria-invalid=[error.map(|_| "true")] aria-describedby=[error.map(|_| err_id.as_str())];
            @if let Some(e) = error { p.field-error id=(err_id) { (e) } }
        }
    }
}

/// Extra attributes of [`field`].
#[derive(Default, Clone, Copy)]
pub struct FieldAttrs {
    pub required: bool,
    pub autocomplete: Option<&'static str>,
    pub maxlength: Option<usize>,
}

/// Errors that belong to no single field of the form, or a summary at its top.
pub fn error_summary(errors: &FieldErrors) -> Markup {
    html! {
        @if !errors.is_empty() {
            div.error-summary role="alert" {
                p { "Please correct the following:" }
                ul { @for e in &errors.0 { li { strong { (e.field) } ": " (e.message) } } }
            }
        }
    }
}

/// A role name as a coloured badge.
pub fn role_badge(role: crate::domain::Role) -> Markup {
    html! { span class={ "badge role-" (role) } { (role) } }
}

/// A time as `<time>` with the UTC text.
pub fn time(at: i64) -> Markup {
    let s = crate::domain::clock::format_utc(at);
    html! { time datetime=(s) { (s.replace('T', " ").trim_end_matches('Z')) " UTC" } }
}

/// One text-like input of a list page's filter form, with its message when the filter was
/// refused.
pub fn filter_input(
    name: &str,
    label: &str,
    value: &str,
    kind: &str,
    hint: &str,
    error: Option<&str>,
) -> Markup {
    html! {
        div.field.invalid[error.is_some()] {
            label for={ "f-" (name) } { (label) }
            input id={ "f-" (name) } name=(name) type=(kind) value=(value) placeholder=(hint)
                aria-invalid=[error.map(|_| "true")];
            @if let Some(e) = error { p.field-error { (e) } }
        }
    }
}

/// The query string of a list page's link that keeps its non-empty `filters` (name, value) and
/// optionally pages (`before`) or exports (`format`).
pub fn filter_query(filters: &[(&str, &str)], before: Option<i64>, format: Option<&str>) -> String {
    let mut pairs: Vec<(&str, String)> = filters
        .iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|&(k, v)| (k, v.to_owned()))
        .collect();
    if let Some(b) = before {
        pairs.push(("before", b.to_string()));
    }
    if let Some(f) = format {
        pairs.push(("format", f.to_owned()));
    }
    serde_urlencoded::to_string(pairs).unwrap_or_default()
}

/// `n` and the noun, singular for one: `1 approval`, `2 approvals`.
pub fn count_of(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A money amount as people read it: the provider's decimal text with trailing zeros past the
/// cents dropped (`4.5900` → `4.59`, `0.0071` stays), and its currency.
pub fn money(amount: &str, currency: &str) -> String {
    let shown = match amount.split_once('.') {
        Some((whole, frac)) if whole.bytes().all(|b| b.is_ascii_digit() || b == b'-') => {
            let digits = frac.trim_end_matches('0');
            let digits = if digits.len() < 2 {
                &frac[..2.min(frac.len())]
            } else {
                digits
            };
            if digits.is_empty() {
                whole.to_owned()
            } else {
                format!("{whole}.{digits}")
            }
        }
        _ => amount.to_owned(),
    };
    format!("{shown} {currency}")
}

/// A list page's heading: its title, and the primary action beside it when the caller may
/// take it (`action`: where it goes and what it says).
pub fn list_heading(title: &str, action: Option<(&str, &str)>) -> Markup {
    html! {
        div.heading {
            h1 { (title) }
            @if let Some((href, label)) = action { a.button.primary href=(href) { (label) } }
        }
    }
}

/// A fleet's name, linked to its page.
pub fn fleet_link(name: &str) -> Markup {
    html! { a.fleet-link href=(paths::fill(paths::FLEET, &[("name", name)])) { (name) } }
}

/// A machine config's name and version, linked to the config.
pub fn config_link(name: &str, version: i64) -> Markup {
    html! { a.config-link href=(paths::fill(paths::MACHINE_CONFIG, &[("name", name)])) { (name) " v" (version) } }
}

/// A template's name and version, linked to the template.
pub fn template_link(name: &str, version: i64) -> Markup {
    html! { a.template-link href=(paths::fill(paths::TEMPLATE, &[("name", name)])) { (name) " v" (version) } }
}

/// An audit entry's `kind:id` target, linked to its page where it has one (fleets, configs,
/// templates, requests); other kinds (users, tokens, sessions) read as text.
pub fn target_link(target: &str) -> Markup {
    let Some((kind, id)) = target.split_once(':') else {
        return html! { (target) };
    };
    let page = match kind {
        "fleet" => Some(paths::FLEET),
        "machine_config" => Some(paths::MACHINE_CONFIG),
        "template" => Some(paths::TEMPLATE),
        "provision" if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            Some(paths::PROVISION)
        }
        _ => None,
    };
    match page {
        Some(p) => {
            let key = if kind == "provision" { "id" } else { "name" };
            html! { a href=(paths::fill(p, &[(key, id)])) { (target) } }
        }
        None => html! { (target) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_keep_cents_and_only_the_precision_that_says_something() {
        assert_eq!(money("4.5900", "EUR"), "4.59 EUR");
        assert_eq!(money("4.5000", "EUR"), "4.50 EUR");
        assert_eq!(money("0.0071", "EUR"), "0.0071 EUR");
        assert_eq!(money("12", "EUR"), "12 EUR");
        assert_eq!(money("3.1", "EUR"), "3.1 EUR");
        assert_eq!(money("n/a", "EUR"), "n/a EUR");
    }

    #[test]
    fn audit_targets_link_to_their_pages_and_hostile_ids_stay_inside_the_path() {
        let html = |t: &str| target_link(t).into_string();
        assert_eq!(
            html("fleet:prod"),
            r#"<a href="/fleets/prod">fleet:prod</a>"#
        );
        assert_eq!(
            html("provision:12"),
            r#"<a href="/provisions/12">provision:12</a>"#
        );
        assert_eq!(html("provision:x"), "provision:x");
        assert_eq!(html("user:alice"), "user:alice");
        assert_eq!(html("no-colon"), "no-colon");
        let hostile = html("fleet:../../x\"><script>");
        assert!(!hostile.contains("<script>"), "{hostile}");
        assert!(
            hostile.starts_with(r#"<a href="/fleets/..%2F..%2Fx"#),
            "{hostile}"
        );
    }

    #[test]
    fn counts_take_the_singular_for_one_only() {
        assert_eq!(count_of(1u32, "approval", "approvals"), "1 approval");
        assert_eq!(count_of(0u32, "approval", "approvals"), "0 approvals");
        assert_eq!(count_of(2u32, "spare", "spares"), "2 spares");
    }
}
