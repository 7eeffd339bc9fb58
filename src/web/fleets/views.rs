//! Fleet views. Secrets appear only as their sources.

use maud::{html, Markup};

use super::capacity;
use super::forms::FleetForm;
use crate::auth::Principal;
use crate::domain::capacity::{DeficitTimeline, FleetNow, SampleRow};
use crate::domain::fleet::{HeadroomRule, SecretName};
use crate::domain::UnixMillis;
use crate::domain::{FieldErrors, Role};
use crate::fleets::secrets::DeclaredSecret;
use crate::fleets::{Fleet, FleetChange};
use crate::web::components::{csrf_field, error_summary, field, list_heading, time, FieldAttrs};
use crate::web::paths;

fn policy(f: &Fleet) -> String {
    let s = &f.spec;
    format!(
        "{} approval{}, valid {} h",
        s.approvals_required(),
        if s.approvals_required() == 1 { "" } else { "s" },
        s.approval_ttl_hours()
    )
}

/// The list of fleets, each with its state now (`board`, by name; a fleet created since the
/// board was read shows as not scraped yet).
pub fn list(now: UnixMillis, fleets: &[Fleet], board: &[FleetNow], can_edit: bool) -> Markup {
    let by_name: std::collections::HashMap<&str, &FleetNow> =
        board.iter().map(|n| (n.fleet.as_str(), n)).collect();
    html! {
        (list_heading("Fleets", can_edit.then_some((paths::FLEET_NEW, "New fleet"))))
        section.card {
            table.data {
                thead { tr { th { "Name" } th { "Status" } th { "Headroom" } th { "Last scrape" } th { "Endpoints" } th { "Restore config" } th { "Approval policy" } th { "Updated" } } }
                tbody {
                    @for f in fleets {
                        @let state = by_name.get(f.spec.name().as_str());
                        tr {
                            td { a href=(paths::fill(paths::FLEET, &[("name", f.spec.name())])) { strong { (f.spec.name()) } } }
                            @match state {
                                Some(n) => {
                                    td { (capacity::status_badge(n)) }
                                    td.nk { (capacity::n_plus_k(n.spare, n.required)) }
                                    td { (capacity::when(now, n.last_scrape_at)) }
                                }
                                None => { td.muted { "not scraped yet" } td.muted { "—" } td.muted { "never" } }
                            }
                            td { @for e in f.spec.endpoints() { code { (e) } br; } }
                            td { a href=(paths::fill(paths::MACHINE_CONFIG, &[("name", f.spec.restore_machine_config())])) { (f.spec.restore_machine_config()) } }
                            td { (policy(f)) }
                            td { (time(f.updated_at)) " by " (f.updated_by) }
                        }
                    }
                    @if fleets.is_empty() { tr { td colspan="8" .muted { "No fleets yet." } } }
                }
            }
        }
    }
}

/// What the fleet page shows of the fleet's headroom.
pub struct Headroom<'a> {
    /// The time the page was rendered (relative times are computed from it).
    pub now_ms: UnixMillis,
    /// The fleet now.
    pub now: &'a FleetNow,
    /// The `?range=` value given when it named no range (the page shows 1 h and says so).
    pub bad_range: Option<&'a str>,
    /// The chart with its window, its form and any refused custom window.
    pub chart: ChartPanel<'a>,
    /// Recent samples, newest first.
    pub samples: &'a [SampleRow],
    /// Deficits with their restore milestones, newest first.
    pub deficits: &'a [DeficitTimeline],
}

pub use super::capacity::{chart_live, chart_panel, now_section, ChartPanel, Refused};

/// One fleet: headroom now, the chart with its range buttons, recent samples, time to
/// restore, then its settings, secret sources, and links to its provisions.
pub fn show(principal: &Principal, f: &Fleet, h: &Headroom<'_>, changes: &[FleetChange]) -> Markup {
    let s = &f.spec;
    let name = s.name().as_str();
    let can_edit = principal.role.includes(Role::Operator);
    // Deleting takes an approver (the operation checks it too).
    let can_delete = principal.role.includes(Role::Approver);
    let csrf = principal.csrf_token().unwrap_or("");
    let provisions = format!(
        "{}?fleet={}",
        paths::HISTORY,
        crate::http::guard::urlencode(name)
    );
    html! {
        div.heading {
            h1 { (name) }
            a.button href=(provisions) { "Provisions of this fleet" }
            @if can_edit {
                a.button.primary href={ (paths::PROVISION_NEW) "?fleet=" (crate::http::guard::urlencode(name)) } { "Request machines" }
                a.button href=(paths::fill(paths::FLEET_EDIT, &[("name", name)])) { "Edit" }
            }
        }
        (capacity::now_section(h.now_ms, h.now))
        section.card #headroom aria-labelledby="chart-heading" {
            h2 #chart-heading { "Headroom over time" }
            @if let Some(given) = h.bad_range { (capacity::range_notice(given)) }
            (chart_panel(&h.chart))
        }
        (capacity::samples_section(h.samples))
        (capacity::deficits_section(h.deficits))
        section.card #settings aria-labelledby="settings-heading" {
            h2 #settings-heading { "Settings" }
            dl.spec {
                dt { "endpoints" } dd { @for e in s.endpoints() { code { (e) } br; } }
                dt { "restore_machine_config" } dd { a href=(paths::fill(paths::MACHINE_CONFIG, &[("name", s.restore_machine_config())])) { code { (s.restore_machine_config()) } } }
                dt { "approvals_required" } dd { code { (s.approvals_required()) } }
                dt { "approval_ttl_hours" } dd { code { (s.approval_ttl_hours()) } }
                dt { "scrape_interval_secs" } dd { code { (s.scrape_interval_secs()) } }
                dt { "scrape_timeout_secs" } dd { code { (s.scrape_timeout_secs()) } }
                dt { "required_override" } dd { @match s.required_override() { Some(n) => code { (n) }, None => span.muted { "— (N+1, or N+2 across regions)" } } }
                dt { "max_restore_machines" } dd { code { (s.max_restore_machines()) } }
                dt { "headroom_rule" } dd { code { (s.headroom_rule().as_str()) } " " span.muted { (rule_words(s.headroom_rule())) } }
                dt { "monthly_budget" } dd { @match s.monthly_budget() { Some(b) => { code { (b) " " (crate::provider::CURRENCY) } " a month" }, None => span.muted { "none" } } }
                @for n in SecretName::ALL {
                    dt { "secrets." (n.as_str()) }
                    dd { @match s.secrets().get(&n) { Some(src) => code { (src) }, None => span.muted { "none" } } }
                }
            }
            p.muted { "Created " (time(f.created_at)) "; last changed " (time(f.updated_at)) " by " (f.updated_by) "." }
        }
        (history_section(changes))
        @if can_delete {
            section.card #delete {
                h2 { "Delete" }
                p.muted { "Takes an approver. Refused while a request of this fleet is awaiting approval, approved or executing." }
                form method="post" action=(paths::fill(paths::FLEET_DELETE, &[("name", name)])) {
                    (csrf_field(csrf))
                    button.danger type="submit" { "Delete fleet " (name) }
                }
            }
        }
    }
}

/// A value of the history as compact JSON (secrets are references, never values).
fn history_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "—".to_owned(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The fleet's change history: when, who, what changed (before → after), newest first.
fn history_section(changes: &[FleetChange]) -> Markup {
    html! {
        section.card #history aria-labelledby="history-heading" {
            h2 #history-heading { "Change history" }
            table.data {
                caption { "Every change to this fleet's settings, newest first. Approving a restore headroom proposed is refused to whoever last changed a setting it was computed from." }
                thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "Change" } th scope="col" { "What changed" } } }
                tbody {
                    @for c in changes {
                        tr {
                            td { (time(c.at)) }
                            td { (c.actor) }
                            td { (c.kind) }
                            td {
                                ul.plain {
                                    @for (field, change) in &c.changes {
                                        li { code { (field) } ": " (history_value(&change["before"])) " → " (history_value(&change["after"])) }
                                    }
                                }
                            }
                        }
                    }
                    @if changes.is_empty() { tr { td colspan="4" .muted { "No changes recorded." } } }
                }
            }
        }
    }
}

fn described(
    name: &str,
    errors: &FieldErrors,
    help: Option<&str>,
) -> (Option<String>, Option<String>) {
    let id = format!("f-{name}");
    let error = errors.for_field(name).map(|_| format!("{id}-error"));
    let help = help.map(|_| format!("{id}-help"));
    let both: Vec<&str> = [error.as_deref(), help.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    ((!both.is_empty()).then(|| both.join(" ")), error)
}

fn area(name: &str, label: &str, value: &str, errors: &FieldErrors, help: &str) -> Markup {
    let id = format!("f-{name}");
    let (describedby, err_id) = described(name, errors, Some(help));
    html! {
        div.field.invalid[err_id.is_some()] {
            label for=(id) { (label) }
            textarea id=(id) name=(name) rows="3" required
                aria-invalid=[err_id.as_ref().map(|_| "true")] aria-describedby=[describedby] { (value) }
            p.help id={ (id) "-help" } { (help) }
            @if let (Some(e), Some(eid)) = (errors.for_field(name), err_id.as_deref()) { p.field-error id=(eid) { (e) } }
        }
    }
}

/// The optional monthly budget: free decimal text (a number input would drop what the
/// browser cannot parse before the server could name the rule), with a hint.
fn budget(value: &str, errors: &FieldErrors) -> Markup {
    let name = "monthly_budget";
    let id = format!("f-{name}");
    let (describedby, err_id) = described(name, errors, Some("help"));
    let currency = crate::provider::CURRENCY;
    html! {
        div.field.invalid[err_id.is_some()] {
            label for=(id) { "Monthly budget (" (currency) ", optional)" }
            input id=(id) name=(name) type="text" inputmode="decimal" value=(value) autocomplete="off" maxlength="32"
                aria-invalid=[err_id.as_ref().map(|_| "true")] aria-describedby=[describedby];
            p.help id={ (id) "-help" } { "What this fleet's machines may cost a month, e.g. 250 or 249.50 (at most 2 decimal places). Approvers see a request's cost plus the machines already running for the fleet checked against it. Empty sets no budget." }
            @if let (Some(e), Some(eid)) = (errors.for_field(name), err_id.as_deref()) { p.field-error id=(eid) { (e) } }
        }
    }
}

/// What a headroom rule means, in the words the form and the fleet page use.
fn rule_words(r: HeadroomRule) -> &'static str {
    match r {
        HeadroomRule::SpareCount => "(yubaba's count: a deficit while fewer nodes carry no tenant than required)",
        HeadroomRule::Absorption => "(a deficit while losing the worst node or region would leave workloads without room; proposals ask for the restore machines that cover it)",
    }
}

/// The headroom rule: a select of the two names, each option saying what it means, and a
/// hint on what changes.
fn rule_choice(current: &str, errors: &FieldErrors) -> Markup {
    let name = "headroom_rule";
    let id = format!("f-{name}");
    let (describedby, err_id) = described(name, errors, Some("help"));
    let known = HeadroomRule::ALL
        .iter()
        .any(|r| r.as_str() == current.trim());
    html! {
        div.field.invalid[err_id.is_some()] {
            label for=(id) { "Headroom rule" }
            select id=(id) name=(name)
                aria-invalid=[err_id.as_ref().map(|_| "true")] aria-describedby=[describedby] {
                @for r in HeadroomRule::ALL {
                    option value=(r.as_str()) selected[current.trim() == r.as_str()] { (r.as_str()) }
                }
                // A submitted value that is no rule stays visible, so its error names it.
                @if !known && !current.trim().is_empty() { option value=(current) selected { (current) " (not a rule)" } }
            }
            p.help id={ (id) "-help" } {
                "Which answer decides deficits and proposals. spare_count " (rule_words(HeadroomRule::SpareCount))
                "; absorption " (rule_words(HeadroomRule::Absorption)) ". Both are shown either way."
            }
            @if let (Some(e), Some(eid)) = (errors.for_field(name), err_id.as_deref()) { p.field-error id=(eid) { (e) } }
        }
    }
}

fn choose(
    name: &str,
    label: &str,
    current: &str,
    errors: &FieldErrors,
    options: &[String],
) -> Markup {
    let id = format!("f-{name}");
    let (describedby, err_id) = described(name, errors, None);
    html! {
        div.field.invalid[err_id.is_some()] {
            label for=(id) { (label) }
            select id=(id) name=(name) required
                aria-invalid=[err_id.as_ref().map(|_| "true")] aria-describedby=[describedby] {
                option value="" { "— choose —" }
                @for o in options { option value=(o) selected[o == current] { (o) } }
                // A submitted name that is not (or no longer) a config stays visible.
                @if !current.is_empty() && !options.iter().any(|o| o == current) {
                    option value=(current) selected { (current) " (not a machine config)" }
                }
            }
            @if let (Some(e), Some(eid)) = (errors.for_field(name), err_id.as_deref()) { p.field-error id=(eid) { (e) } }
        }
    }
}

/// A choice among the secrets the server declares. A stored value that is not one of them (a
/// raw source from before declarations, or a name since removed) stays selected and marked, so
/// saving says what to fix instead of silently dropping it.
fn secret(
    name: SecretName,
    label: &str,
    value: &str,
    errors: &FieldErrors,
    declared: &[DeclaredSecret],
) -> Markup {
    let field_name = format!("secrets.{}", name.as_str());
    let id = format!("f-{field_name}");
    let (describedby, err_id) = described(&field_name, errors, Some("help"));
    let known = value.is_empty() || declared.iter().any(|d| d.name == value);
    html! {
        div.field.invalid[err_id.is_some()] {
            label for=(id) { (label) }
            select id=(id) name=(field_name)
                aria-invalid=[err_id.as_ref().map(|_| "true")] aria-describedby=[describedby] {
                option value="" selected[value.is_empty()] { "none" }
                @for d in declared {
                    option value=(d.name) selected[d.name == value] {
                        (d.name) " (" (d.source_kind) @if !d.readable { ", not readable now" } ")"
                    }
                }
                @if !known { option value=(value) selected { (value) " (not declared by the server)" } }
            }
            p.help id={ (id) "-help" } { "A secret the server declares (its secrets setting). Its value is put into the payload after rendering, where the template shows «secret:NAME», and is never stored or shown." }
            @if let (Some(e), Some(eid)) = (errors.for_field(&field_name), err_id.as_deref()) { p.field-error id=(eid) { (e) } }
        }
    }
}

/// The create/edit form.
pub fn form_page(
    principal: &Principal,
    editing: Option<&str>,
    f: &FleetForm,
    errors: &FieldErrors,
    configs: &[String],
    declared: &[DeclaredSecret],
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let action = editing.map_or_else(
        || paths::FLEETS.to_owned(),
        |n| paths::fill(paths::FLEET, &[("name", n)]),
    );
    let num = |name: &str, label: &str, value: &str| {
        field(name, label, "number", value, errors, FieldAttrs::default())
    };
    html! {
        h1 { @if let Some(n) = editing { "Edit fleet " (n) } @else { "New fleet" } }
        (error_summary(errors))
        form.card.config-form method="post" action=(action) {
            (csrf_field(csrf))
            @if editing.is_none() {
                (field("name", "Name (RFC 1123 label, ≤ 63)", "text", &f.name, errors, FieldAttrs { required: true, autocomplete: Some("off"), maxlength: Some(63) }))
            }
            (area("endpoints", "yubaba base URLs (one per line)", &f.endpoints, errors, "1 to 16 http(s) URLs with a host; no credentials, query or fragment. headroom scrapes /raft/status under them."))
            (choose("restore_machine_config", "Restore machine config", &f.restore_machine_config, errors, configs))
            (num("approvals_required", "Approvals required (1–5)", &f.approvals_required))
            (num("approval_ttl_hours", "Approval window (hours, 1–168)", &f.approval_ttl_hours))
            (num("scrape_interval_secs", "Scrape interval (seconds, 5–3600)", &f.scrape_interval_secs))
            (num("scrape_timeout_secs", "Scrape timeout (seconds, 1–60, below the interval)", &f.scrape_timeout_secs))
            (num("required_override", "Required spares override (0–100, empty derives N+1 / N+2)", &f.required_override))
            (num("max_restore_machines", "Most machines one restore proposal asks for (1–20)", &f.max_restore_machines))
            (budget(&f.monthly_budget, errors))
            (rule_choice(&f.headroom_rule, errors))
            (secret(SecretName::MeshPreauthKey, "Mesh pre-auth key", &f.mesh_preauth_key, errors, declared))
            (secret(SecretName::TunnelToken, "Tunnel token", &f.tunnel_token, errors, declared))
            div.field.actions { button.primary type="submit" { @if editing.is_some() { "Save fleet" } @else { "Create fleet" } } }
        }
    }
}
