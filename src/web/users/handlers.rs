//! User administration handlers.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::auth::users::{self, NewUserInput};
use crate::auth::Principal;
use crate::domain::FieldErrors;
use crate::error::OpError;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{after_write, fragment, respond, wants_partial, Frame};
use crate::web::reply::{submitted, Reply};
use crate::web::{flash, paths, see_other};

/// The users page (its htmx partial is the create form), `draft` and `errors` filling the form.
async fn page(
    Reply {
        state,
        principal,
        htmx,
    }: Reply<'_>,
    status: StatusCode,
    draft: &NewUserInput,
    errors: &FieldErrors,
) -> Result<HttpResponse, WebError> {
    let users = users::list_users(&state.ctx, &principal.caller()).await?;
    let frame = Frame::load(state, principal, "Users", "users").await;
    let full = || views::users_page(principal, &users, draft, errors);
    let partial = || views::create_form(principal, draft, errors);
    Ok(respond(htmx, status, frame, full, partial))
}

/// GET /users
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let reply = Reply::new(&state, &principal, &htmx);
    page(
        reply,
        StatusCode::OK,
        &NewUserInput::default(),
        &FieldErrors::default(),
    )
    .await
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
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<CreateForm>,
) -> Result<HttpResponse, WebError> {
    let input = NewUserInput {
        username: form.username.clone(),
        role: form.role.clone(),
        password: form.password.clone(),
    };
    let reply = Reply::new(&state, &principal, &htmx);
    submitted(
        users::create_user(&state.ctx, &principal.caller(), &input).await,
        async |user| {
            let msg = format!(
                "User {} created with the {} role.",
                user.username, user.role
            );
            reply.done(&msg, after_write(&htmx, paths::USERS)).await
        },
        async |errors| {
            // The password is never sent back into the page.
            let draft = NewUserInput {
                password: String::new(),
                ..input
            };
            page(reply, StatusCode::UNPROCESSABLE_ENTITY, &draft, &errors).await
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
    state: &AppState,
    principal: &Principal,
    htmx: &Htmx,
    username: &str,
    result: Result<crate::auth::users::User, OpError>,
    done: String,
) -> Result<HttpResponse, WebError> {
    match result {
        Ok(user) => {
            if wants_partial(htmx) {
                let row = views::user_row(principal, &user, None);
                return Ok(fragment(StatusCode::OK, row));
            }
            flash(state, principal, &done).await;
            Ok(see_other(paths::USERS))
        }
        Err(OpError::Invalid(errors)) => {
            let user = users::get(&state.ctx, &principal.caller(), username).await?;
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
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    path: web::Path<String>,
    form: web::Form<RoleForm>,
) -> Result<HttpResponse, WebError> {
    let result = users::set_role(&state.ctx, &principal.caller(), &path, &form.role).await;
    let done = format!("{} is now {}.", path, form.role.trim());
    row_result(&state, &principal, &htmx, &path, result, done).await
}

/// POST /users/{username}/disable
pub async fn disable(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let result = users::set_disabled(&state.ctx, &principal.caller(), &path, true).await;
    let done = format!("{} is disabled; their sessions ended.", path);
    row_result(&state, &principal, &htmx, &path, result, done).await
}

/// POST /users/{username}/enable
pub async fn enable(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let result = users::set_disabled(&state.ctx, &principal.caller(), &path, false).await;
    let done = format!("{} is enabled again.", path);
    row_result(&state, &principal, &htmx, &path, result, done).await
}
