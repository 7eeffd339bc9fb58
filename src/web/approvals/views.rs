//! Approvals views: the inbox and the badge partial.

use maud::{html, Markup};

use crate::domain::Role;
use crate::provisioning::Provision;
use crate::web::components::{money, time};
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

/// The inbox: what the caller could approve, or why they see nothing.
pub fn inbox(role: Role, me: &str, pending: &[Provision]) -> Markup {
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
                    thead { tr { th scope="col" { "Request" } th scope="col" { "Fleet" } th scope="col" { "Machines" } th scope="col" { "Cost" } th scope="col" { "Requested" } th scope="col" { "Reason" } th scope="col" { "Approvals" } th scope="col" { "Expires" } } }
                    tbody {
                        @for p in pending.iter().filter(|p| p.requester != me) {
                            tr {
                                td { a href=(path_of(paths::PROVISION, p.id)) { "#" (p.id) } " " (state_badge(p.state)) }
                                td { (p.fleet) }
                                td { (p.count) " × " (p.plan.server_type) " (" (p.machine_config) " v" (p.config_version) ")" }
                                td { (money(&p.plan.monthly_cost, &p.plan.currency)) "/month" }
                                td { (time(p.created_at)) " by " (p.requester) }
                                td { (p.reason) }
                                td { (p.approvers.len()) " of " (p.approvals_required) }
                                td { (time(p.expires_at)) }
                            }
                        }
                        @if pending.iter().all(|p| p.requester == me) { tr { td colspan="8" .muted { "Nothing waits for your approval." } } }
                    }
                }
            }
        }
    }
}
