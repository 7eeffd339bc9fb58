//! The login page.

use maud::{html, Markup};

use crate::domain::FieldErrors;
use crate::web::components::{csrf_field, field, FieldAttrs};
use crate::web::layout::{page, Frame};
use crate::web::paths;

/// The sign-in form.
pub fn login_page(
    csrf: &str,
    username: &str,
    next: &str,
    message: Option<&str>,
    errors: &FieldErrors,
) -> Markup {
    let content = html! {
        section.card.narrow {
            h1 { "Sign in" }
            p.muted { "headroom keeps yubaba fleets' warm spares restored." }
            @if let Some(m) = message { p.error-text role="alert" { (m) } }
            form method="post" action=(paths::LOGIN) {
                (csrf_field(csrf))
                input type="hidden" name="next" value=(next);
                (field("username", "Username", "text", username, errors, FieldAttrs { required: true, autocomplete: Some("username"), maxlength: Some(64) }))
                (field("password", "Password", "password", "", errors, FieldAttrs { required: true, autocomplete: Some("current-password"), maxlength: Some(1024) }))
                button.primary type="submit" { "Sign in" }
            }
        }
    };
    page(&Frame::anonymous("Sign in"), content)
}
