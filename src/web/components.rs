//! Small markup pieces reused across pages.

use maud::{html, Markup};

use crate::domain::FieldErrors;

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
