//! The account page.

use maud::{html, Markup};

use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::web::components::{csrf_field, error_summary, field, role_badge, FieldAttrs};
use crate::web::paths;

/// Who you are and the password form, with an optional message above it (throttled, busy).
pub fn account(principal: &Principal, errors: &FieldErrors, message: Option<&str>) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let pw = |name: &'static str, label: &'static str, ac: &'static str| {
        field(
            name,
            label,
            "password",
            "",
            errors,
            FieldAttrs {
                required: true,
                autocomplete: Some(ac),
                maxlength: Some(1024),
            },
        )
    };
    html! {
        div #account {
            h1 { "Your account" }
            section.card {
                p { "Username: " strong { (principal.username) } " · role " (role_badge(principal.role)) }
            }
            section.card {
                h2 { "Change password" }
                p.muted { "At least 12 characters. Changing it signs out your other sessions." }
                @if let Some(m) = message { p.error-text role="alert" { (m) } }
                (error_summary(errors))
                form method="post" action=(paths::ACCOUNT_PASSWORD) hx-post=(paths::ACCOUNT_PASSWORD) hx-target="#account" hx-swap="outerHTML" {
                    (csrf_field(csrf))
                    (pw("current_password", "Current password", "current-password"))
                    (pw("new_password", "New password", "new-password"))
                    (pw("confirm_password", "Repeat new password", "new-password"))
                    button.primary type="submit" { "Change password" }
                }
            }
        }
    }
}
