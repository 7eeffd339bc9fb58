//! Provision history views.

use maud::{html, Markup};

use super::handlers::HistoryQuery;
use crate::domain::{FieldErrors, ProvisionState};
use crate::provisioning::Provision;
use crate::web::components::{
    config_link, error_summary, filter_input, filter_query, fleet_link, list_heading, money, time,
};
use crate::web::paths;

/// The page: filter form and results.
/// `can_request`: the caller may file a request (operator and up), so the page offers it.
pub fn history_page(
    q: &HistoryQuery,
    errors: &FieldErrors,
    can_request: bool,
    results: Markup,
) -> Markup {
    let input = |name: &'static str,
                 label: &'static str,
                 value: &str,
                 kind: &'static str,
                 hint: &'static str| {
        filter_input(name, label, value, kind, hint, errors.for_field(name))
    };
    html! {
        (list_heading("Provision history", can_request.then_some((paths::PROVISION_NEW, "Request machines"))))
        section.card {
            form.filters method="get" action=(paths::HISTORY) hx-get=(paths::HISTORY) hx-target="#history-results" hx-swap="outerHTML" hx-push-url="true"
                hx-trigger="submit, change from:find select, input changed delay:400ms from:find input" {
                (input("fleet", "Fleet", &q.filter.fleet, "text", "prod-eu"))
                (input("machine_config", "Machine config", &q.filter.machine_config, "text", "spare-fsn1"))
                div.field {
                    label for="f-state" { "State" }
                    select id="f-state" name="state" {
                        option value="" selected[q.filter.state.is_empty()] { "any" }
                        @for s in ProvisionState::ALL {
                            option value=(s.as_str()) selected[q.filter.state == s.as_str()] { (s.words()) }
                        }
                    }
                    @if let Some(e) = errors.for_field("state") { p.field-error { (e) } }
                }
                (input("requester", "Requester", &q.filter.requester, "text", "alice"))
                (input("approver", "Approver", &q.filter.approver, "text", "bob"))
                (input("from", "From (UTC)", &q.filter.from, "datetime-local", ""))
                (input("to", "To (UTC)", &q.filter.to, "datetime-local", ""))
                div.field.actions { button.primary type="submit" { "Filter" } a href=(paths::HISTORY) { "Clear" } }
            }
        }
        (results)
    }
}

/// The query string of a link that keeps the filters (and optionally pages or exports).
fn query_string(q: &HistoryQuery, before: Option<i64>, format: Option<&str>) -> String {
    filter_query(
        &[
            ("fleet", &q.filter.fleet),
            ("machine_config", &q.filter.machine_config),
            ("state", &q.filter.state),
            ("requester", &q.filter.requester),
            ("approver", &q.filter.approver),
            ("from", &q.filter.from),
            ("to", &q.filter.to),
        ],
        before,
        format,
    )
}

/// Results table with paging and export links (the htmx swap target); `rows` is `None` when
/// the filters were refused.
pub fn results(
    q: &HistoryQuery,
    rows: Option<(&[Provision], Option<i64>)>,
    errors: &FieldErrors,
) -> Markup {
    html! {
        section.card #history-results {
            (error_summary(errors))
            @if let Some((rows, next)) = rows {
                (table(rows))
                nav.pager {
                    @if !q.before.is_empty() { a href={ (paths::HISTORY) "?" (query_string(q, None, None)) } { "← Newest" } }
                    @if let Some(next) = next {
                        a rel="next" href={ (paths::HISTORY) "?" (query_string(q, Some(next), None)) } { "Older →" }
                    }
                    span.spacer {}
                    a.export href={ (paths::HISTORY_EXPORT) "?" (query_string(q, None, Some("csv"))) } download { "Export CSV" }
                    a.export href={ (paths::HISTORY_EXPORT) "?" (query_string(q, None, Some("jsonl"))) } download { "Export JSONL" }
                }
            }
        }
    }
}

/// Requests as a table, newest first.
pub fn table(rows: &[Provision]) -> Markup {
    html! {
        table.data.provisions {
            thead { tr {
                th { "#" } th { "State" } th { "Fleet" } th { "Config" } th { "Count" }
                th { "Requester" } th { "Approvers" } th { "Created" } th { "Monthly cost" }
            } }
            tbody {
                @for p in rows {
                    tr data-id=(p.id) {
                        td { a href={ (paths::HISTORY) "/" (p.id) } { (p.id) } }
                        td { span class={ "badge state-" (p.state.as_str()) } data-state=(p.state.as_str()) { (p.state.words()) } }
                        td { (fleet_link(p.fleet.as_str())) }
                        td { (config_link(p.machine_config.as_str(), p.config_version)) }
                        td { (p.count) }
                        td { (p.requester) }
                        td { (p.approvers.join(", ")) }
                        td { (time(p.created_at)) }
                        td { (money(&p.plan.monthly_cost, &p.plan.currency)) }
                    }
                }
                @if rows.is_empty() { tr { td colspan="9" .muted { "No requests match." } } }
            }
        }
    }
}
