//! Fleet handlers: parse, call one operation, render.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::forms::FleetForm;
use super::views;
use crate::auth::Principal;
use crate::domain::fleet::FleetInput;
use crate::domain::{FieldErrors, Role};
use crate::fleets::{self, FleetsError};
use crate::machines::machine_configs;
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};
use crate::web::{flash, paths, see_other};

/// GET /fleets
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let all = fleets::list(&state.ctx, &principal.caller()).await?;
    let frame = Frame::load(&state, &principal, "Fleets", "fleets").await;
    let body = || views::list(&all, principal.role.includes(Role::Operator));
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

async fn form_page(
    state: &AppState,
    principal: &Principal,
    htmx: &Htmx,
    status: StatusCode,
    editing: Option<&str>,
    form: &FleetForm,
    errors: &FieldErrors,
) -> Result<HttpResponse, WebError> {
    let configs = machine_configs::names(&state.ctx, &principal.caller()).await?;
    let title = editing.map_or_else(|| "New fleet".to_owned(), |n| format!("Edit fleet {n}"));
    let frame = Frame::load(state, principal, title, "fleets").await;
    let body = || views::form_page(principal, editing, form, errors, &configs);
    Ok(respond(htmx, status, frame, body, body))
}

/// GET /fleets/new
pub async fn new(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let form = FleetForm::defaults();
    let none = FieldErrors::default();
    form_page(
        &state,
        &principal,
        &htmx,
        StatusCode::OK,
        None,
        &form,
        &none,
    )
    .await
}

/// POST /fleets
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<FleetForm>,
) -> Result<HttpResponse, WebError> {
    let input = FleetInput::from(&*form);
    match fleets::create(&state.ctx, &principal.caller(), &input).await {
        Ok(f) => {
            let msg = format!("Fleet {} created.", f.spec.name);
            flash(&state, &principal, &msg).await;
            Ok(see_other(&paths::fill(
                paths::FLEET,
                &[("name", &f.spec.name)],
            )))
        }
        Err(FleetsError::Invalid(errors)) => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            form_page(&state, &principal, &htmx, status, None, &form, &errors).await
        }
        Err(e) => Err(e.into()),
    }
}

/// GET /fleets/{name}
pub async fn show(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let fleet = fleets::get(&state.ctx, &principal.caller(), &name).await?;
    let frame = Frame::load(&state, &principal, name.as_str(), "fleets").await;
    let body = || views::show(&principal, &fleet);
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

/// GET /fleets/{name}/edit
pub async fn edit(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let fleet = fleets::get(&state.ctx, &principal.caller(), &name).await?;
    let form = FleetForm::from_input(&fleet.spec.to_input());
    let none = FieldErrors::default();
    form_page(
        &state,
        &principal,
        &htmx,
        StatusCode::OK,
        Some(&name),
        &form,
        &none,
    )
    .await
}

/// POST /fleets/{name}
pub async fn update(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
    form: web::Form<FleetForm>,
) -> Result<HttpResponse, WebError> {
    let input = FleetInput::from(&*form);
    match fleets::update(&state.ctx, &principal.caller(), &name, &input).await {
        Ok(_) => {
            flash(&state, &principal, &format!("Fleet {name} saved.")).await;
            Ok(see_other(&paths::fill(paths::FLEET, &[("name", &name)])))
        }
        Err(FleetsError::Invalid(errors)) => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            form_page(
                &state,
                &principal,
                &htmx,
                status,
                Some(&name),
                &form,
                &errors,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// POST /fleets/{name}/delete
pub async fn delete(
    state: web::Data<AppState>,
    principal: Principal,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    fleets::delete(&state.ctx, &principal.caller(), &name).await?;
    flash(&state, &principal, &format!("Fleet {name} deleted.")).await;
    Ok(see_other(paths::FLEETS))
}
