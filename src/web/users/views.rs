//! User administration views.

use maud::{html, Markup};

use crate::auth::users::NewUserInput;
use crate::auth::users::User;
use crate::auth::Principal;
use crate::domain::{FieldErrors, Role};
use crate::web::components::{csrf_field, error_summary, field, role_badge, time, FieldAttrs};
use crate::web::paths;

/// The whole users page.
pub fn users_page(
    principal: &Principal,
    users: &[User],
    draft: &NewUserInput,
    errors: &FieldErrors,
) -> Markup {
    html! {
        h1 { "Users" }
        section.card {
            table.data {
                thead { tr { th { "User" } th { "Role" } th { "Status" } th { "Created" } th { "Actions" } } }
                tbody { @for u in users { (user_row(principal, u, None)) } }
            }
        }
        section.card {
            h2 { "Add a user" }
            (create_form(principal, draft, errors))
        }
    }
}

/// One user's row; `error` shows a refused change inline.
pub fn user_row(principal: &Principal, user: &User, error: Option<&str>) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let name = user.username.as_str();
    let role_path = paths::fill(paths::USER_ROLE, &[("username", name)]);
    let toggle_path = if user.disabled {
        paths::fill(paths::USER_ENABLE, &[("username", name)])
    } else {
        paths::fill(paths::USER_DISABLE, &[("username", name)])
    };
    let row_id = format!("user-{}", user.id);
    html! {
        tr id=(row_id) .disabled[user.disabled] {
            td { strong { (name) } }
            td {
                form method="post" action=(role_path) hx-post=(role_path) hx-target={ "#" (row_id) } hx-swap="outerHTML" hx-trigger="change" {
                    (csrf_field(csrf))
                    label.visually-hidden for={ "role-" (user.id) } { "Role of " (name) }
                    select id={ "role-" (user.id) } name="role" {
                        @for r in Role::ALL { option value=(r) selected[r == user.role] { (r) } }
                    }
                    noscript { button type="submit" { "Save" } }
                }
                @if let Some(e) = error { p.field-error role="alert" { (e) } }
            }
            td { @if user.disabled { span.badge.bad { "disabled" } } @else { span.badge.good { "active" } } }
            td { (time(user.created_at)) }
            td {
                form method="post" action=(toggle_path) hx-post=(toggle_path) hx-target={ "#" (row_id) } hx-swap="outerHTML" {
                    (csrf_field(csrf))
                    @if user.disabled { button type="submit" { "Enable" } }
                    @else { button.danger type="submit" hx-confirm={ "Disable " (name) "? Their sessions end at once." } { "Disable" } }
                }
            }
        }
    }
}

/// The create-user form (also the htmx partial for its validation errors).
pub fn create_form(principal: &Principal, draft: &NewUserInput, errors: &FieldErrors) -> Markup {
    let csrf = principal.csrf_token().unwrap_or("");
    let role_error = errors.for_field("role");
    html! {
        form #create-user method="post" action=(paths::USERS) hx-post=(paths::USERS) hx-target="this" hx-swap="outerHTML" {
            (error_summary(errors))
            (csrf_field(csrf))
            (field("username", "Username", "text", &draft.username, errors, FieldAttrs { required: true, autocomplete: Some("off"), maxlength: Some(64) }))
            div.field.invalid[role_error.is_some()] {
                label for="f-role" { "Role" }
                select id="f-role" name="role" {
                    @for r in Role::ALL { option value=(r) selected[draft.role == r.as_str()] { (r) } }
                }
                @if let Some(e) = role_error { p.field-error { (e) } }
            }
            (field("password", "Initial password (12+ characters)", "password", "", errors, FieldAttrs { required: true, autocomplete: Some("new-password"), maxlength: Some(1024) }))
            button.primary type="submit" { "Add user" }
            p.muted { "Roles: " (role_badge(Role::Viewer)) " reads · " (role_badge(Role::Operator)) " edits and requests · " (role_badge(Role::Approver)) " approves · " (role_badge(Role::Admin)) " manages users and tokens." }
        }
    }
}
