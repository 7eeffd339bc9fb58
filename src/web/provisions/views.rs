//! Provision views: the request form with its live plan, the detail page and its polled
//! progress partial.

use maud::{html, Markup};

use super::forms::RequestForm;
use crate::auth::Principal;
use crate::cloud_init::MAX_PAYLOAD_BYTES;
use crate::domain::plan_check::{first_block, Verdict};
use crate::domain::provision::MachineRecord;
use crate::domain::{FieldErrors, MachineStatus, ProvisionState, Role};
use crate::provisioning::plan::DraftPlan;
use crate::provisioning::requests::COMMENT_MAX;
use crate::provisioning::{Event, Plan, Provision, ProvisionDetail, COUNT_MAX};
use crate::web::components::{
    config_link, count_of, csrf_field, error_summary, fleet_link, money, template_link, time,
};
use crate::web::paths;

/// Seconds between progress polls while a request is not finished.
pub const PROGRESS_POLL: &str = "every 2s";

/// What the request form offers.
#[derive(Debug, Default, Clone)]
pub struct FormChoices {
    /// Fleet name and its restore machine config.
    pub fleets: Vec<(String, String)>,
    pub configs: Vec<String>,
    pub templates: Vec<String>,
}

/// The path of request `id` (or of one of its sub-routes).
pub fn path_of(pattern: &str, id: i64) -> String {
    paths::fill(pattern, &[("id", &id.to_string())])
}

/// A state as a coloured badge.
pub fn state_badge(state: ProvisionState) -> Markup {
    let tone = match state {
        ProvisionState::Succeeded => "good",
        ProvisionState::Failed | ProvisionState::Rejected => "bad",
        ProvisionState::Expired | ProvisionState::Cancelled | ProvisionState::Superseded => "muted",
        _ => "busy",
    };
    html! { span class={ "badge state " (tone) } data-state=(state.as_str()) { (state.words()) } }
}

/// A labelled control wrapper tying its message to the control with `aria-describedby`,
/// as `components::field` does for inputs.
fn control(
    name: &str,
    label: &str,
    errors: &FieldErrors,
    hint: Option<&str>,
    input: impl FnOnce(&str, Option<String>) -> Markup,
) -> Markup {
    let id = format!("f-{name}");
    let error = errors.for_field(name);
    let err_id = format!("{id}-error");
    let hint_id = format!("{id}-hint");
    let described: Vec<&str> = [
        hint.map(|_| hint_id.as_str()),
        error.map(|_| err_id.as_str()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let described = (!described.is_empty()).then(|| described.join(" "));
    html! {
        div.field.invalid[error.is_some()] {
            label for=(id) { (label) }
            (input(&id, described))
            @if let Some(h) = hint { p.hint id=(hint_id) { (h) } }
            @if let Some(e) = error { p.field-error id=(err_id) { (e) } }
        }
    }
}

fn option(value: &str, label: &str, current: &str) -> Markup {
    html! { option value=(value) selected[value == current] { (label) } }
}

/// The request form; the plan below it is filled by `POST /provisions/plan` as fields change.
pub fn form_page(
    principal: &Principal,
    f: &RequestForm,
    errors: &FieldErrors,
    choices: &FormChoices,
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let invalid = |name: &str| errors.for_field(name).map(|_| "true");
    html! {
        h1 { "Request machines" }
        p.muted { "A request is planned now and runs only after another person approves this exact plan." }
        (error_summary(errors))
        @if choices.fleets.is_empty() {
            p.error-text { "No fleet exists yet: an operator creates one before machines can be requested." }
        }
        // `novalidate`: the server names every broken rule beside its field after a submit
        // (the browser's own bubbles would stop the submit and say less); `required` stays
        // on the controls for what it tells a screen reader.
        form #request-form.card method="post" action=(paths::PROVISIONS) novalidate {
            (csrf_field(csrf))
            // The plan is asked for from a wrapper, not the form: htmx validates a form before
            // its own requests. It is asked on load and when a field is left changed (`change`
            // bubbles here), never while typing: the preview shows cost and machines without a
            // reason, and a rule a typed value breaks shows once the person left the field;
            // "is required" only after a submit.
            div #plan-inputs hx-post=(paths::PROVISION_PLAN) hx-include="closest form" hx-target="#plan" hx-swap="innerHTML"
                hx-trigger="load, change" {
            (control("fleet", "Fleet", errors, None, |id, d| html! {
                select id=(id) name="fleet" required aria-invalid=[invalid("fleet")] aria-describedby=[d] {
                    @for (name, restore) in &choices.fleets { (option(name, &format!("{name} (restores with {restore})"), &f.fleet)) }
                }
            }))
            (control("machine_config", "Machine config", errors, Some("Leave on the fleet's restore config unless you need another."), |id, d| html! {
                select id=(id) name="machine_config" aria-invalid=[invalid("machine_config")] aria-describedby=[d] {
                    (option("", "the fleet's restore config", &f.machine_config))
                    @for c in &choices.configs { (option(c, c, &f.machine_config)) }
                }
            }))
            (control("template", "Template (optional)", errors, None, |id, d| html! {
                select id=(id) name="template" aria-invalid=[invalid("template")] aria-describedby=[d] {
                    (option("", "the machine config's own template", &f.template))
                    @for t in &choices.templates { (option(t, t, &f.template)) }
                }
            }))
            (control("count", "Number of machines", errors, Some(&format!("1 to {COUNT_MAX}")), |id, d| html! {
                input id=(id) name="count" type="number" min="1" max=(COUNT_MAX) step="1" value=(f.count) required
                    aria-invalid=[invalid("count")] aria-describedby=[d];
            }))
            (control("reason", "Reason", errors, Some("Why these machines are needed; the approver reads this."), |id, d| html! {
                textarea id=(id) name="reason" rows="3" maxlength=(crate::provisioning::REASON_MAX) required
                    aria-invalid=[invalid("reason")] aria-describedby=[d] { (f.reason) }
            }))
            }
            // The live plan and the submit button: the plan decides whether it may be filed.
            section #plan aria-live="polite" aria-label="Plan" {
                p.muted { "Planning…" }
                (submit(None))
            }
        }
    }
}

/// The submit button, disabled with the reason when the plan cannot be filed.
fn submit(blocked: Option<&str>) -> Markup {
    html! {
        div.field.actions {
            button #file-request.primary type="submit" disabled[blocked.is_some()] aria-describedby=[blocked.map(|_| "blocked-why")] { "File request" }
            @if let Some(why) = blocked { p #blocked-why.error-text { (why) } }
        }
    }
}

/// A plan's cost line, the same figures the approval page and the API show.
pub fn cost(plan: &Plan, count: u32) -> Markup {
    html! {
        p #cost.cost {
            "Cost: " strong #hourly-cost { (money(&plan.hourly_cost, &plan.currency)) "/hour" }
            ", " strong #monthly-cost { (money(&plan.monthly_cost, &plan.currency)) "/month" }
            span.muted { " (" (count) " × " (plan.hourly_price) " " (plan.currency) "/hour, " (plan.monthly_price) " " (plan.currency) "/month per "
                (plan.server_type) " in " (plan.location) ")" }
        }
    }
}

/// The per-machine plan: name, what it is and where, its cost, payload size against 32 KiB,
/// sha256, findings.
pub fn plan_table(plan: &Plan) -> Markup {
    html! {
        table.data.wrapping #plan-machines {
            caption.visually-hidden { "Planned machines" }
            thead { tr {
                th scope="col" { "Name" } th scope="col" { "Server type" } th scope="col" { "Image" }
                th scope="col" { "Location" } th scope="col" { "Cost" } th scope="col" { "Payload size" }
                th scope="col" { "sha256" } th scope="col" { "Findings" }
            } }
            tbody {
                @for m in &plan.machines {
                    tr {
                        td { code { (m.name) } }
                        td.server-type { (plan.server_type) }
                        td.image { (plan.image) }
                        td.location { (plan.location) }
                        td.machine-cost { (money(&plan.monthly_price, &plan.currency)) "/month" }
                        td { meter min="0" max=(MAX_PAYLOAD_BYTES) high=(MAX_PAYLOAD_BYTES * 9 / 10) value=(m.size_bytes) aria-label={ (m.name) " payload size" } {} " " (m.size_bytes) " of " (MAX_PAYLOAD_BYTES) " bytes" }
                        td { code.hash { (m.sha256) } }
                        td {
                            @if m.findings.is_empty() { span.muted { "none" } }
                            ul.findings { @for f in &m.findings {
                                li class={ "finding " (f.severity) } { strong { (f.severity) } " " @if let Some(l) = f.line { "line " (l) ": " } (f.message) }
                            } }
                        }
                    }
                }
            }
        }
    }
}

/// The live plan under the form: machines, cost, and the submit button.
pub fn plan_preview(d: &DraftPlan) -> Markup {
    let errors = d.errors().len();
    let blocked = (errors > 0).then(|| format!("This plan cannot be filed: {errors} error finding(s) above must be fixed in the machine config or template first."));
    html! {
        h2 { "Plan" }
        p { (d.count) " × " (d.plan.server_type) " (" (d.plan.image) ") in " (d.plan.location) " on " (d.plan.provider)
            ", config " (d.machine_config) " v" (d.config_version) ", template " (d.template) " v" (d.template_version)
            "; needs " (count_of(d.approvals_required, "approval", "approvals")) " within " (d.approval_ttl_hours) " h." }
        (cost(&d.plan, d.count))
        (plan_table(&d.plan))
        (submit(blocked.as_deref()))
    }
}

/// A plan that could not be made (bad input): the messages, and the submit button disabled.
pub fn plan_problem(errors: &FieldErrors) -> Markup {
    html! {
        h2 { "Plan" }
        ul.plan-problems { @for e in &errors.0 { li.error-text { strong { (e.field) } ": " (e.message) } } }
        (submit(Some("Fix the fields named above to see the plan.")))
    }
}

/// The timeline line recording `name`'s approval: an `approval` line while more are needed,
/// the `state` line of the move to approved for the last one.
fn approval_event<'a>(events: &'a [Event], name: &str) -> Option<&'a Event> {
    let by = format!("approved by {name}");
    events
        .iter()
        .filter(|e| e.kind == "approval" || (e.kind == "state" && e.details["to"] == "approved"))
        .find(|e| e.message.contains(&by))
}

/// What the caller may do now, as the page shows it (the operations check again).
pub struct Allowed {
    pub approve: bool,
    /// The caller is an approver looking at their own request.
    pub own_request: bool,
    pub reject: bool,
    pub cancel: bool,
    pub destroy: bool,
}

impl Allowed {
    /// Decides from the role, the request's state and who filed and approved it.
    pub fn for_caller(principal: &Principal, p: &Provision) -> Allowed {
        let approver = principal.role.includes(Role::Approver);
        let mine = p.requester == principal.username;
        let pending = p.state == ProvisionState::PendingApproval;
        let already = p.approvers.iter().any(|a| a == &principal.username);
        Allowed {
            approve: approver && pending && !mine && !already,
            own_request: approver && pending && mine,
            reject: approver && pending && !mine,
            cancel: matches!(
                p.state,
                ProvisionState::PendingApproval | ProvisionState::Approved
            ) && ((mine && principal.role.includes(Role::Operator)) || approver),
            destroy: approver
                && matches!(p.state, ProvisionState::Failed | ProvisionState::Succeeded),
        }
    }
}

/// Where an approver is in approving: the first form (with what they typed), or the
/// confirmation that repeats the count and the cost.
#[derive(Debug, Default, Clone)]
pub struct ApproveDraft {
    /// The comment as typed (first form) or as parsed (confirmation).
    pub comment: String,
    /// Show the confirmation instead of the first form.
    pub confirming: bool,
}

/// The detail page, in the order an approver decides: why, what, the checks, then the
/// decision; then progress and the audit entries.
pub fn detail(
    principal: &Principal,
    d: &ProvisionDetail,
    form_errors: &FieldErrors,
    draft: &ApproveDraft,
) -> Markup {
    let p = &d.provision;
    let csrf = principal.csrf_token().unwrap_or("");
    let can = Allowed::for_caller(principal, p);
    html! {
        div.heading {
            h1 { "Provision #" (p.id) " " (state_badge(p.state)) }
        }
        @if !p.state_reason.is_empty() { p #state-reason.state-reason { (p.state_reason) } }
        (why(d))
        (what(d))
        (checks(d))
        section.card #approvals aria-labelledby="approvals-heading" {
            h2 #approvals-heading { "Approvals" }
            p #approval-count { (p.approvers.len()) " of " (p.approvals_required) " approvals" }
            ul #approvers { @for name in &p.approvers {
                li { (name) @if let Some(e) = approval_event(&d.events, name) { " — " (time(e.at)) } }
            } }
            @if can.approve {
                @if draft.confirming { (approve_confirmation(csrf, p, &draft.comment)) }
                @else { (approve_form(csrf, d, form_errors, &draft.comment)) }
            }
            @if can.own_request {
                p #four-eyes.notice { "Four-eyes rule: you filed this request, so another approver must approve it." }
            }
            @if can.reject {
                form #reject-form method="post" action=(path_of(paths::PROVISION_REJECT, p.id)) {
                    (csrf_field(csrf))
                    (control("reason", "Reason for rejecting", form_errors, None, |id, desc| html! {
                        textarea id=(id) name="reason" rows="2" required aria-invalid=[form_errors.for_field("reason").map(|_| "true")] aria-describedby=[desc] {}
                    }))
                    button #reject.danger type="submit" { "Reject" }
                }
            }
            @if can.cancel {
                form #cancel-form method="post" action=(path_of(paths::PROVISION_CANCEL, p.id)) {
                    (csrf_field(csrf))
                    button #cancel type="submit" { "Cancel request" }
                }
            }
        }
        (progress(principal, d))
        section.card #audit-entries {
            h2 { "Audit entries" }
            table.data.wrapping {
                thead { tr { th scope="col" { "#" } th scope="col" { "When" } th scope="col" { "Actor" } th scope="col" { "Action" } th scope="col" { "Details" } } }
                tbody { @for a in &d.audit {
                    tr { td { (a.id) } td { (time(a.at)) } td { (a.actor) } td { code { (a.action) } } td { code { (a.details) } } }
                } }
            }
        }
    }
}

/// Why the machines are asked for: the deficit with its evidence when headroom filed the
/// request (its timeline's `evidence` line), and the reason as filed.
fn why(d: &ProvisionDetail) -> Markup {
    let p = &d.provision;
    let evidence = d.events.iter().find(|e| e.kind == "evidence");
    html! {
        section.card #why aria-labelledby="why-heading" {
            h2 #why-heading { "Why" }
            @if let Some(e) = evidence {
                p #why-deficit { (e.message) }
                details #evidence {
                    summary { "Evidence: yubaba's status and the samples that entered the deficit" }
                    pre.code tabindex="0" aria-label="Evidence" { code { (serde_json::to_string_pretty(&e.details["evidence"]).unwrap_or_default()) } }
                }
            }
            p #reason-line {
                @if p.requester == crate::domain::Actor::System.name() { "headroom's reason: " }
                @else { "Reason given by the requester: " }
                span #reason { (p.reason) }
            }
            dl.spec {
                dt { "Requested by" } dd #requester { (p.requester) }
                dt { "Filed" } dd { (time(p.created_at)) }
                @if p.state == ProvisionState::PendingApproval { dt { "Expires" } dd { (time(p.expires_at)) } }
                @if let Some(at) = p.finished_at { dt { "Finished" } dd { (time(at)) } }
            }
        }
    }
}

/// What would be created: the documents, the cost, each machine and each machine's payload
/// as shown (stand-ins where secrets go, never a value), collapsible.
fn what(d: &ProvisionDetail) -> Markup {
    let p = &d.provision;
    let plan = &p.plan;
    html! {
        section.card #what aria-labelledby="what-heading" {
            h2 #what-heading { "What" }
            p #what-summary { (count_of(p.count, "machine", "machines")) " of " (plan.server_type) " with " (plan.image)
                " in " (plan.location) " on " (plan.provider) }
            dl.spec {
                dt { "Fleet" } dd { (fleet_link(p.fleet.as_str())) }
                dt { "Machine config" } dd { (config_link(p.machine_config.as_str(), p.config_version)) }
                dt { "Template" } dd { (template_link(p.template.as_str(), p.template_version)) }
                dt { "Plan hash" } dd { code #plan-hash { (p.plan_hash) } }
            }
            (cost(plan, p.count))
            (plan_table(plan))
            h3 #payload-heading { "Payload (each «secret:NAME» is where that secret's value goes)" }
            @for (i, (m, payload)) in plan.machines.iter().zip(&d.redacted_payloads).enumerate() {
                details.payload open[i == 0] {
                    summary #{ "payload-" (i) "-name" } { "Payload of " code { (m.name) } " (" (m.size_bytes) " bytes)" }
                    pre.code #{ "payload-" (i) } tabindex="0" aria-labelledby={ "payload-" (i) "-name" } { code { (payload) } }
                }
            }
        }
    }
}

/// The verdict as the page words it, and its badge tone.
fn verdict_words(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::Pass => ("passed", "good"),
        Verdict::Warn => ("warning", "warn"),
        Verdict::Block => ("blocks approval", "bad"),
    }
}

/// The plan checks, next to the decision.
fn checks(d: &ProvisionDetail) -> Markup {
    html! {
        section.card #checks aria-labelledby="checks-heading" {
            h2 #checks-heading { "Checks" }
            @if d.checks.is_empty() {
                p.muted { "Checks are made while a request awaits approval." }
            } @else {
                ul.checks {
                    @for c in &d.checks {
                        @let (word, tone) = verdict_words(c.verdict);
                        li.check data-check=(c.name) data-verdict=(c.verdict.as_str()) {
                            span class={ "badge " (tone) } { (word) } " " strong { (c.name) } ": " (c.detail)
                        }
                    }
                }
            }
        }
    }
}

/// The first step of approving: an optional comment, and a button that asks for
/// confirmation (disabled, with the reason, while a check blocks).
fn approve_form(csrf: &str, d: &ProvisionDetail, errors: &FieldErrors, comment: &str) -> Markup {
    let p = &d.provision;
    let blocked = first_block(&d.checks);
    html! {
        form #approve-form method="post" action=(path_of(paths::PROVISION_APPROVE, p.id)) {
            (csrf_field(csrf))
            input type="hidden" name="plan_hash" value=(p.plan_hash);
            @if let Some(m) = errors.for_field("plan_hash") {
                p.error-text #plan_hash-error role="alert" { "plan_hash " (m) }
            }
            (control("comment", "Comment (optional)", errors, Some("Up to 500 characters; it goes into the audit log and the timeline."), |id, desc| html! {
                textarea id=(id) name="comment" rows="2" maxlength=(COMMENT_MAX)
                    aria-invalid=[errors.for_field("comment").map(|_| "true")] aria-describedby=[desc] { (comment) }
            }))
            @if let Some(c) = blocked {
                p #approve-blocked.error-text { "The check " strong { (c.name) } " blocks approval: " (c.detail) }
            }
            button #approve.primary type="submit" disabled[blocked.is_some()] aria-describedby=[blocked.map(|_| "approve-blocked")] {
                "Approve this plan…"
            }
        }
    }
}

/// The second step: the count and the cost repeated, the same plan hash and comment, and
/// `confirm=yes`; only this submit approves.
fn approve_confirmation(csrf: &str, p: &Provision, comment: &str) -> Markup {
    let plan = &p.plan;
    html! {
        form #approve-confirm method="post" action=(path_of(paths::PROVISION_APPROVE, p.id)) aria-labelledby="confirm-question" {
            (csrf_field(csrf))
            input type="hidden" name="plan_hash" value=(p.plan_hash);
            input type="hidden" name="comment" value=(comment);
            input type="hidden" name="confirm" value="yes";
            h3 #confirm-question { "Approve " (count_of(p.count, "machine", "machines")) " for "
                (money(&plan.monthly_cost, &plan.currency)) "/month?" }
            @if !comment.is_empty() { p { "Your comment: " q #confirm-comment { (comment) } } }
            div.field.actions {
                button #confirm-approve.primary type="submit" autofocus { "Yes, approve" }
                " "
                a #confirm-back href=(path_of(paths::PROVISION, p.id)) { "No, go back" }
            }
        }
    }
}

/// The request's timeline, oldest first.
fn timeline(events: &[Event]) -> Markup {
    html! {
        section.card #timeline {
            h2 { "Timeline" }
            table.data.wrapping {
                thead { tr { th scope="col" { "When" } th scope="col" { "Kind" } th scope="col" { "Machine" } th scope="col" { "What" } } }
                tbody { @for e in events {
                    tr { td { (time(e.at)) } td { code { (e.kind) } } td { (e.machine.as_deref().unwrap_or("")) } td { (e.message) } }
                } }
            }
        }
    }
}

/// The provider's answers (timeline events of kind `provider.*`, details without secrets).
fn provider_answers(events: &[Event]) -> Markup {
    html! {
        section.card #provider-answers {
            h2 { "Provider answers" }
            @let answers: Vec<&Event> = events.iter().filter(|e| e.kind.starts_with("provider.")).collect();
            @if answers.is_empty() { p.muted { "The provider has not been called for this request." } }
            @for e in answers {
                details {
                    summary { (time(e.at)) " " code { (e.kind) } " " (e.machine.as_deref().unwrap_or("")) " — " (e.message) }
                    pre.code tabindex="0" aria-label={ (e.kind) " details" } { (serde_json::to_string_pretty(&e.details).unwrap_or_default()) }
                }
            }
        }
    }
}

fn machine_row(
    principal: &Principal,
    p: &Provision,
    m: &MachineRecord,
    can_destroy: bool,
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let destroy = can_destroy && m.status == MachineStatus::Failed && m.server_id.is_some();
    let destroy_path = paths::fill(
        paths::PROVISION_MACHINE_DESTROY,
        &[("id", &p.id.to_string()), ("idx", &m.idx.to_string())],
    );
    html! {
        tr data-machine=(m.name) {
            td { code { (m.name) } }
            td.machine-status data-status=(m.status.as_str()) { (m.status.as_str()) }
            td { @if let Some(s) = m.server_id { (s) } @else { span.muted { "—" } } }
            td { @if let Some(ip) = &m.ipv4 { code { (ip) } } @else { span.muted { "—" } } }
            td { (m.provider_status.as_deref().unwrap_or("—")) }
            td.machine-joined {
                @match (m.joined_at, m.member_id) {
                    (Some(at), Some(id)) => { (time(at)) " as member " (id) }
                    (Some(at), None) => (time(at)),
                    _ => span.muted { "not yet" },
                }
            }
            td { @if let Some(e) = &m.error { span.error-text { (e) } } }
            td {
                @if destroy {
                    form method="post" action=(destroy_path) {
                        (csrf_field(csrf))
                        button.danger type="submit" hx-post=(destroy_path) hx-target="#progress" hx-swap="outerHTML"
                            hx-confirm={ "Destroy server " (m.server_id.unwrap_or_default()) " (" (m.name) ")? This cannot be undone." } {
                            "Destroy server"
                        }
                    }
                }
            }
        }
    }
}

/// The progress partial (machines, timeline, provider answers): it polls itself while the
/// request is not finished and carries no trigger once it is, so polling stops with the last
/// answer.
pub fn progress(principal: &Principal, d: &ProvisionDetail) -> Markup {
    let p = &d.provision;
    let live = !p.state.is_terminal();
    let can = Allowed::for_caller(principal, p);
    html! {
        div #progress data-state=(p.state.as_str())
            hx-get=[live.then(|| path_of(paths::PROVISION_PROGRESS, p.id))]
            hx-trigger=[live.then_some(PROGRESS_POLL)] hx-swap=[live.then_some("outerHTML")] {
            section.card {
                h2 { "Progress" }
                p { "State: " (state_badge(p.state))
                    @if live { span.muted { " (updates every 2 seconds)" } } }
                // Eight columns scroll inside their own pane on a narrow window, never the page.
                div.scroll-pane tabindex="0" role="region" aria-label="Machines of this request" {
                    table.data.wrapping #machines {
                        caption.visually-hidden { "Machines of this request" }
                        thead { tr { th scope="col" { "Machine" } th scope="col" { "Status" } th scope="col" { "Server id" } th scope="col" { "IPv4" } th scope="col" { "Provider status" } th scope="col" { "Joined fleet" } th scope="col" { "Error" } th scope="col" { "Action" } } }
                        tbody {
                            @for m in &d.machines { (machine_row(principal, p, m, can.destroy)) }
                            @if d.machines.is_empty() { tr { td colspan="8" .muted { "Nothing has run yet." } } }
                        }
                    }
                }
            }
            (timeline(&d.events))
            (provider_answers(&d.events))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_digit_only_placeholders_are_filled_like_plain_ones() {
        assert_eq!(path_of(paths::PROVISION, 7), "/provisions/7");
        assert_eq!(
            path_of(paths::PROVISION_PROGRESS, 42),
            "/provisions/42/progress"
        );
        assert_eq!(
            paths::fill(
                paths::PROVISION_MACHINE_DESTROY,
                &[("id", "3"), ("idx", "0")]
            ),
            "/provisions/3/machines/0/destroy"
        );
    }

    #[test]
    fn every_state_has_a_badge_naming_it_in_words() {
        for s in ProvisionState::ALL {
            let html = state_badge(s).into_string();
            assert!(html.contains(&format!(">{}</span>", s.words())), "{html}");
            assert!(!s.words().contains('_'), "{html}");
            assert!(
                html.contains(&format!("data-state=\"{}\"", s.as_str())),
                "{html}"
            );
        }
    }
}
