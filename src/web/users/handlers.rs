//! User administration handlers.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::auth::users::{self, NewUserInput};
use crate::error::OpError;
use crate::web::errors::WebError;
use crate::web::layout::{after_write, fragment, respond, wants_partial, Frame};
use crate::web::reply::{submitted, Reply, Shown};
use crate::web::{paths, see_other};

/// The users page (its htmx partial is the create form), `draft` and `shown` filling the form.
async fn page(
    reply: &Reply,
    draft: &NewUserInput,
    shown: Shown<'_>,
) -> Result<HttpResponse, WebError> {
    let errors = shown.errors();
    let principal = &reply.principal;
    let users = users::list_users(reply.ctx(), &reply.caller()).await?;
    let frame = Frame::load(&reply.state, principal, "Users", "users").await;
    let full = || views::users_page(principal, &users, draft, errors);
    let partial = || views::create_form(principal, draft, errors);
    Ok(respond(&reply.htmx, shown.status(), frame, full, partial))
}

/// GET /users
pub async fn list(reply: Reply) -> Result<HttpResponse, WebError> {
    page(&reply, &NewUserInput::default(), Shown::Fresh).await
}

/// The create-user form as submitted (missing fields arrive empty and are named).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreateForm {
    username: String,
    role: String,
    password: String,
}

/// POST /users
pub async fn create(reply: Reply, form: web::Form<CreateForm>) -> Result<HttpResponse, WebError> {
    let input = NewUserInput {
        username: form.username.clone(),
        role: form.role.clone(),
        password: form.password.clone(),
    };
    submitted(
        users::create_user(reply.ctx(), &reply.caller(), &input).await,
        async |user| {
            let msg = format!(
                "User {} created with the {} role.",
                user.username, user.role
            );
            reply
                .done(&msg, after_write(&reply.htmx, paths::USERS))
                .await
        },
        async |errors| {
            // The password is never sent back into the page.
            let draft = NewUserInput {
                password: String::new(),
                ..input
            };
            page(&reply, &draft, Shown::Refused(&errors)).await
        },
    )
    .await
}

/// The role form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RoleForm {
    role: String,
}

/// Answers a row action: the updated row for htmx, a redirect with a flash otherwise; a
/// refused change re-renders the row with its message (422).
async fn row_result(
    reply: &Reply,
    username: &str,
    result: Result<crate::auth::users::User, OpError>,
    done: String,
) -> Result<HttpResponse, WebError> {
    let (principal, htmx) = (&reply.principal, &reply.htmx);
    match result {
        Ok(user) => {
            if wants_partial(htmx) {
                let row = views::user_row(principal, &user, None);
                return Ok(fragment(StatusCode::OK, row));
            }
            reply.done(&done, see_other(paths::USERS)).await
        }
        Err(OpError::Invalid(errors)) => {
            let user = users::get(reply.ctx(), &reply.caller(), username).await?;
            if wants_partial(htmx) {
                let row = views::user_row(principal, &user, Some(&errors.to_string()));
                return Ok(fragment(StatusCode::UNPROCESSABLE_ENTITY, row));
            }
            Err(errors.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// POST /users/{username}/role
pub async fn set_role(
    reply: Reply,
    path: web::Path<String>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, WebError> {
    let result = users::set_role(reply.ctx(), &reply.caller(), &path, &form.role).await;
    let done = format!("{} is now {}.", path, form.role.trim());
    row_result(&reply, &path, result, done).await
}

/// POST /users/{username}/disable
pub async fn disable(reply: Reply, path: web::Path<String>) -> Result<HttpResponse, WebError> {
    let result = users::set_disabled(reply.ctx(), &reply.caller(), &path, true).await;
    let done = format!("{} is disabled; their sessions ended.", path);
    row_result(&reply, &path, result, done).await
}

/// POST /users/{username}/enable
pub async fn enable(reply: Reply, path: web::Path<String>) -> Result<HttpResponse, WebError> {
    let result = users::set_disabled(reply.ctx(), &reply.caller(), &path, false).await;
    let done = format!("{} is enabled again.", path);
    row_result(&reply, &path, result, done).await
}
