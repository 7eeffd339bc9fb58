//! Approvals views: the inbox and the badge partial.

use maud::{html, Markup};

use std::collections::HashMap;

use crate::domain::capacity::{FleetNow, Health, PendingToward};
use crate::domain::Role;
use crate::provisioning::Provision;
use crate::web::components::{config_link, fleet_link, money, time};
use crate::web::fleets::capacity::{n_plus_k, status_badge};
use crate::web::paths;
use crate::web::provisions::views::{path_of, state_badge};

/// The badge's accessible text.
pub fn badge_label(count: u64) -> String {
    match count {
        1 => "1 request awaiting approval".to_owned(),
        n => format!("{n} requests awaiting approval"),
    }
}

/// The count inside the navigation link: the number for the eye, a sentence for a screen
/// reader; empty when nothing waits.
pub fn badge(count: u64) -> Markup {
    html! {
        @if count > 0 {
            span.nav-count aria-hidden="true" { (count) }
        }
        span.visually-hidden data-count=(count) { (badge_label(count)) }
    }
}

/// The navigation's placeholder that loads the badge and refreshes it.
pub fn badge_slot() -> Markup {
    html! {
        span #approvals-badge hx-get=(paths::APPROVALS_BADGE) hx-trigger="load, every 15s" hx-swap="innerHTML" {}
    }
}

/// A request in the inbox with its fleet's state now (`None`: the fleet is gone).
pub type InboxRow<'a> = (&'a Provision, Option<&'a FleetNow>);

/// The inbox's order for an on-call: live restores first (their fleet is in deficit, or
/// entering one), then whatever expires soonest, then the oldest id.
pub fn triage<'a>(pending: &'a [Provision], board: &'a [FleetNow]) -> Vec<InboxRow<'a>> {
    let by_name: HashMap<&str, &FleetNow> = board.iter().map(|f| (f.fleet.as_str(), f)).collect();
    let mut rows: Vec<InboxRow<'a>> = pending
        .iter()
        .map(|p| (p, by_name.get(p.fleet.as_str()).copied()))
        .collect();
    let live = |f: Option<&FleetNow>| {
        f.is_some_and(|f| {
            f.status == Health::Deficit
                || f.pending
                    .is_some_and(|p| p.toward == PendingToward::Deficit)
                || f.deficit_since.is_some()
        })
    };
    rows.sort_by_key(|(p, f)| (!live(*f), p.expires_at, p.id));
    rows
}

/// The inbox: what the caller could approve, or why they see nothing.
pub fn inbox(role: Role, me: &str, pending: &[InboxRow<'_>]) -> Markup {
    html! {
        div.heading {
            h1 { "Approvals" }
            @if role.includes(Role::Operator) { a.button href=(paths::PROVISION_NEW) { "Request machines" } }
        }
        @if !role.includes(Role::Approver) {
            p #inbox-explanation { "Approving provision requests needs the approver role; yours is " (role) ". "
                "Requests you file wait here for someone who has it." }
        } @else {
            p.muted { "Requests waiting for your approval. You never see your own here: the four-eyes rule needs another approver for them." }
            section.card {
                table.data #inbox {
                    caption.visually-hidden { "Requests awaiting your approval" }
                    thead { tr { th scope="col" { "Request" } th scope="col" { "Fleet" } th scope="col" { "Fleet now" } th scope="col" { "Machines" } th scope="col" { "Cost" } th scope="col" { "Requested" } th scope="col" { "Reason" } th scope="col" { "Approvals" } th scope="col" { "Expires" } } }
                    tbody {
                        @for (p, fleet) in pending.iter().filter(|(p, _)| p.requester != me) {
                            tr data-id=(p.id) {
                                td { a href=(path_of(paths::PROVISION, p.id)) { "#" (p.id) } " " (state_badge(p.state)) }
                                td { (fleet_link(p.fleet.as_str())) }
                                td.fleet-now {
                                    @match fleet {
                                        Some(f) => { (status_badge(f)) " " span.nk { (n_plus_k(f.spare, f.required)) } }
                                        None => span.muted { "fleet removed" },
                                    }
                                }
                                td { (p.count) " × " (p.plan.server_type) " (" (config_link(p.machine_config.as_str(), p.config_version)) ")" }
                                td { (money(&p.plan.monthly_cost, &p.plan.currency)) "/month" }
                                td { (time(p.created_at)) " by " (p.requester) }
                                td { (p.reason) }
                                td { (p.approvers.len()) " of " (p.approvals_required) }
                                td { (time(p.expires_at)) }
                            }
                        }
                        @if pending.iter().all(|(p, _)| p.requester == me) { tr { td colspan="9" .muted { "Nothing waits for your approval." } } }
                    }
                }
            }
        }
    }
}
