//! Audit log views.

use maud::{html, Markup};

use super::forms::AuditQuery;
use crate::audit::Entry;
use crate::domain::FieldErrors;
use crate::web::components::{error_summary, filter_input, filter_query, target_link, time};
use crate::web::paths;

/// The page: filter form and results.
pub fn audit_page(q: &AuditQuery, results: Markup) -> Markup {
    let input =
        |name: &'static str,
         label: &'static str,
         value: &str,
         kind: &'static str,
         hint: &'static str| { filter_input(name, label, value, kind, hint, None) };
    html! {
        h1 { "Audit log" }
        section.card {
            form.filters method="get" action=(paths::AUDIT) hx-get=(paths::AUDIT) hx-target="#audit-results" hx-swap="outerHTML" hx-push-url="true"
                hx-trigger="submit, input changed delay:400ms from:find input" {
                (input("actor", "Actor", &q.actor, "text", "alice or system"))
                (input("action", "Action", &q.action, "text", "user. or auth.login_failed"))
                (input("target", "Target", &q.target, "text", "user:alice"))
                (input("from", "From (UTC)", &q.from, "datetime-local", ""))
                (input("to", "To (UTC)", &q.to, "datetime-local", ""))
                div.field.actions { button.primary type="submit" { "Filter" } a href=(paths::AUDIT) { "Clear" } }
            }
        }
        (results)
    }
}

fn query_string(q: &AuditQuery, before: Option<i64>, format: Option<&str>) -> String {
    filter_query(
        &[
            ("actor", &q.actor),
            ("action", &q.action),
            ("target", &q.target),
            ("from", &q.from),
            ("to", &q.to),
        ],
        before,
        format,
    )
}

/// Results table with paging and export links (the htmx swap target).
pub fn results(q: &AuditQuery, rows: Option<(&[Entry], bool)>, errors: &FieldErrors) -> Markup {
    html! {
        section.card #audit-results {
            (error_summary(errors))
            @if let Some((rows, more)) = rows {
                (entries_table(rows))
                nav.pager {
                    @if !q.before.is_empty() { a href={ (paths::AUDIT) "?" (query_string(q, None, None)) } { "← Newest" } }
                    @if more { @if let Some(last) = rows.last() {
                        a href={ (paths::AUDIT) "?" (query_string(q, Some(last.id), None)) } { "Older →" }
                    } }
                    span.spacer {}
                    a href={ (paths::AUDIT_EXPORT) "?" (query_string(q, None, Some("jsonl"))) } download { "Export JSONL" }
                    a href={ (paths::AUDIT_EXPORT) "?" (query_string(q, None, Some("csv"))) } download { "Export CSV" }
                }
            }
        }
    }
}

/// Audit entries as a table.
pub fn entries_table(rows: &[Entry]) -> Markup {
    html! {
        table.data.audit {
            thead { tr { th { "#" } th { "Time" } th { "Actor" } th { "Action" } th { "Target" } th { "Details" } } }
            tbody {
                @for r in rows {
                    tr {
                        td { (r.id) }
                        td { (time(r.at)) }
                        td { (r.actor) }
                        td { code { (r.action) } }
                        td { (target_link(&r.target)) }
                        td { code.details { (r.details) } }
                    }
                }
                @if rows.is_empty() { tr { td colspan="6" .muted { "No entries match." } } }
            }
        }
    }
}
