//! API token views.

use maud::{html, Markup};

use crate::auth::tokens::NewTokenInput;
use crate::auth::tokens::Token;
use crate::auth::users::User;
use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::web::components::{csrf_field, error_summary, field, time, FieldAttrs};
use crate::web::paths;

/// The token list, the create form, and a just-created token (shown once).
pub fn tokens_page(
    principal: &Principal,
    tokens: &[Token],
    users: &[User],
    created: Option<&str>,
    draft: &NewTokenInput,
    errors: &FieldErrors,
) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    html! {
        h1 { "API tokens" }
        @if let Some(t) = created {
            section.card.secret-once role="status" {
                h2 { "New token" }
                p { "Copy it now: it is shown only this once and stored only as a hash." }
                pre.token { code #new-token { (t) } }
                p.muted { "Use it as " code { "Authorization: Bearer <token>" } " on " code { "/api/v1" } "." }
            }
        }
        section.card {
            table.data {
                thead { tr { th { "Id" } th { "User" } th { "Label" } th { "Created" } th { "Last used" } th { "State" } th {} } }
                tbody {
                    @for t in tokens {
                        tr {
                            td { (t.id) }
                            td { (t.username) }
                            td { (t.label) }
                            td { (time(t.created_at)) " by " (t.created_by) }
                            td { @if let Some(at) = t.last_used_at { (time(at)) } @else { span.muted { "never" } } }
                            td { @if t.revoked_at.is_some() { span.badge.bad { "revoked" } } @else { span.badge.good { "active" } } }
                            td {
                                @if t.revoked_at.is_none() {
                                    form method="post" action=(paths::fill(paths::TOKEN_REVOKE, &[("id", &t.id.to_string())])) {
                                        (csrf_field(csrf))
                                        button.danger type="submit" { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                    @if tokens.is_empty() { tr { td colspan="7" .muted { "No tokens yet." } } }
                }
            }
        }
        section.card {
            h2 { "Create a token" }
            p.muted { "A token acts with its user's role. Revoke it when its job ends." }
            (error_summary(errors))
            form method="post" action=(paths::TOKENS) {
                (csrf_field(csrf))
                div.field.invalid[errors.for_field("username").is_some()] {
                    label for="f-username" { "User" }
                    select id="f-username" name="username" {
                        @for u in users.iter().filter(|u| !u.disabled) {
                            option value=(u.username) selected[draft.username == u.username] { (u.username) " (" (u.role) ")" }
                        }
                    }
                    @if let Some(e) = errors.for_field("username") { p.field-error { (e) } }
                }
                (field("label", "What is it for?", "text", &draft.label, errors, FieldAttrs { required: true, autocomplete: Some("off"), maxlength: Some(100) }))
                button.primary type="submit" { "Create token" }
            }
        }
    }
}
