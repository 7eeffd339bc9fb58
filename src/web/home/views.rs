//! The overview page.

use maud::{html, Markup};

use crate::audit::AuditRow;
use crate::auth::Principal;
use crate::domain::Role;
use crate::web::audit::views::entries_table;
use crate::web::paths;

/// Greeting, what this role can do, and the latest audit entries.
pub fn overview(principal: &Principal, recent: &[AuditRow]) -> Markup {
    html! {
        h1 { "Overview" }
        section.card {
            p { "Signed in as " strong { (principal.username) } " with the " strong { (principal.role) } " role." }
            ul.plain {
                li { a href=(paths::AUDIT) { "Audit log" } " — every change, hash-chained and verifiable." }
                @if principal.role.includes(Role::Admin) {
                    li { a href=(paths::USERS) { "Users" } " — accounts and roles." }
                    li { a href=(paths::TOKENS) { "API tokens" } " — bearer tokens for automation." }
                }
                li { a href=(paths::ACCOUNT) { "Your account" } " — change your password." }
            }
        }
        section.card {
            h2 { "Latest activity" }
            (entries_table(recent))
        }
    }
}
