//! Template views: list, show with history, the editor and its live preview.

use maud::{html, Markup};

use crate::auth::Principal;
use crate::cloud_init::{Severity, MAX_PAYLOAD_BYTES};
use crate::domain::textdiff::{diff_lines, has_changes, DiffLine};
use crate::domain::{FieldErrors, Role};
use crate::machine_setup::preview::Preview;
use crate::machine_setup::templates::Version;
use crate::web::components::{count_of, csrf_field, error_summary, list_heading, time};
use crate::web::paths;

/// The list of templates.
pub fn list(all: &[Version], can_edit: bool) -> Markup {
    html! {
        (list_heading("Templates", can_edit.then_some((paths::TEMPLATE_NEW, "New template"))))
        section.card {
            table.data {
                thead { tr { th { "Name" } th { "Version" } th { "Size" } th { "Saved" } } }
                tbody {
                    @for t in all {
                        tr {
                            td { a href=(paths::fill(paths::TEMPLATE, &[("name", &t.name)])) { strong { (t.name) } } }
                            td { "v" (t.version) }
                            td { (t.content.len()) " bytes" }
                            td { (time(t.created_at)) " by " (t.author) }
                        }
                    }
                }
            }
        }
    }
}

/// A line diff as a table.
pub fn line_diff(d: &[DiffLine]) -> Markup {
    html! {
        pre.linediff {
            @for l in d {
                @match l {
                    DiffLine::Same(t) => span.same { "  " (t) "\n" },
                    DiffLine::Added(t) => ins { "+ " (t) "\n" },
                    DiffLine::Removed(t) => del { "- " (t) "\n" },
                }
            }
        }
    }
}

/// One template with its history.
pub fn show(principal: &Principal, history: &[Version]) -> Markup {
    let current = &history[0];
    html! {
        div.heading {
            h1 { (current.name) " " span.muted { "v" (current.version) } }
            @if principal.role.includes(Role::Operator) { a.button href=(paths::fill(paths::TEMPLATE_EDIT, &[("name", &current.name)])) { "Edit with live preview" } }
        }
        section.card { pre.code { code { (current.content) } } }
        section.card #history {
            h2 { "History" }
            @for (i, v) in history.iter().enumerate() {
                details open[i == 0] {
                    summary { "v" (v.version) " — " (time(v.created_at)) " by " (v.author) }
                    @if let Some(prev) = history.get(i + 1) {
                        @let d = diff_lines(&prev.content, &v.content);
                        @if has_changes(&d) { (line_diff(&d)) } @else { p.muted { "identical to v" (prev.version) } }
                    } @else { p.muted { "first version" } }
                }
            }
        }
    }
}

/// The new-template form.
pub fn new_form(principal: &Principal, name: &str, body: &str, errors: &FieldErrors) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    html! {
        h1 { "New template" }
        (error_summary(errors))
        form.card method="post" action=(paths::TEMPLATES) {
            (csrf_field(csrf))
            div.field.invalid[errors.for_field("name").is_some()] {
                label for="f-name" { "Name (RFC 1123 label)" }
                input #f-name name="name" type="text" value=(name) maxlength="63" required;
                @if let Some(e) = errors.for_field("name") { p.field-error { (e) } }
            }
            div.field.invalid[errors.for_field("body").is_some()] {
                label for="f-body" { "Template (tera; insert values with | yaml, build commands with | shell)" }
                textarea #f-body.code name="body" rows="24" spellcheck="false" wrap="off" { (body) }
                @if let Some(e) = errors.for_field("body") { p.field-error { (e) } }
            }
            button.primary type="submit" { "Create template" }
        }
    }
}

/// The editor with its live preview.
pub fn editor(
    principal: &Principal,
    name: &str,
    body: &str,
    configs: &[String],
    chosen: &str,
    errors: &FieldErrors,
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let save = paths::fill(paths::TEMPLATE, &[("name", name)]);
    html! {
        h1 { "Edit template " (name) }
        (error_summary(errors))
        div.editor-grid {
            form #editor.card method="post" action=(save) data-warn-unsaved
                hx-post=(paths::PREVIEW) hx-target="#preview" hx-swap="innerHTML"
                hx-trigger="load, input from:#f-body delay:400ms, change from:.preview-input, input from:.preview-input delay:400ms" {
                (csrf_field(csrf))
                input type="hidden" name="template" value=(name);
                div.field.invalid[errors.for_field("body").is_some()] {
                    label for="f-body" { "Template" }
                    // `app.js` numbers its lines (findings cite them) and warns before unsaved
                    // edits are left behind.
                    textarea #f-body.code name="body" rows="30" spellcheck="false" wrap="off" data-line-numbers { (body) }
                    @if let Some(e) = errors.for_field("body") { p.field-error { (e) } }
                }
                div.field {
                    label for="f-config" { "Preview with machine config" }
                    select #f-config.preview-input name="config" {
                        @for c in configs { option value=(c) selected[c == chosen] { (c) } }
                    }
                }
                details {
                    summary { "Render-time secrets (never stored)" }
                    div.field { label for="f-mesh" { "Mesh pre-auth key" } input #f-mesh.preview-input name="mesh_preauth_key" type="password" autocomplete="off"; }
                    div.field { label for="f-tunnel" { "Tunnel token" } input #f-tunnel.preview-input name="tunnel_token" type="password" autocomplete="off"; }
                }
                // A plain submit: the form's hx-trigger lists no submit, so saving is an ordinary
                // post/redirect/get that lands on the template page with its flash message.
                button.primary type="submit" { "Save new version" }
            }
            section #preview.card aria-live="polite" { p.muted { "Rendering…" } }
        }
    }
}

/// A preview that could not run.
pub fn preview_message(text: &str) -> Markup {
    html! { p.error-text { (text) } }
}

/// The rendered payload with line numbers, findings, size gauge, sha256 and diff.
pub fn preview(p: &Preview) -> Markup {
    let r = &p.rendered;
    let percent = (r.size_bytes as f64 / MAX_PAYLOAD_BYTES as f64 * 100.0).min(999.0);
    let errors = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    html! {
        div.preview-head {
            @if r.ok { span.badge.good #verdict { "valid" } } @else { span.badge.bad #verdict { "blocked" } }
            " " span #finding-counts { (count_of(errors as u64, "error", "errors")) ", " (count_of(warnings as u64, "warning", "warnings")) }
        }
        div.gauge {
            label for="size-gauge" { "Size " span #size-bytes { (r.size_bytes) } " of " (MAX_PAYLOAD_BYTES) " bytes (" (format!("{percent:.1}")) " %)" }
            meter #size-gauge min="0" max=(MAX_PAYLOAD_BYTES) low=(MAX_PAYLOAD_BYTES * 9 / 10) high=(MAX_PAYLOAD_BYTES) optimum="0" value=(r.size_bytes) {}
        }
        @if r.sha256.is_empty() {
            p { "sha256 " span #payload-sha256.muted { "none: a finding blocks this payload" } }
        } @else {
            p { "sha256 " code #payload-sha256 { (r.sha256) } }
        }
        ul #findings.findings {
            @for f in &r.findings {
                li class={ "finding " (f.severity.as_str()) } {
                    strong { (f.severity.as_str()) } " "
                    @if let Some(l) = f.line { span.line { @if f.in_template { "template " } "line " (l) } ": " }
                    (f.message)
                }
            }
            @if r.findings.is_empty() { li.finding.info { "All checks passed." } }
        }
        h3 #payload-heading { "Payload (each «secret:NAME» is where that secret's value goes)" }
        // A long line scrolls inside the pane, which the keyboard can therefore reach.
        div.payload-pane tabindex="0" role="region" aria-labelledby="payload-heading" {
            ol #payload.payload { @for line in r.shown.lines() { li { code { (line) } } } }
        }
        h3 { "Against the last successful provision" }
        @match &p.last_provisioned {
            Some(prev) => (line_diff(&diff_lines(prev, &r.shown))),
            None => p.muted #last-provision { "No successful provision of this config yet." },
        }
    }
}
