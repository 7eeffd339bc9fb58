//! Machine-config handlers.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::forms::MachineForm;
use super::views::{self};
use crate::auth::Principal;
use crate::domain::machine::MachineInput;
use crate::domain::{FieldErrors, Role};
use crate::error::OpError;
use crate::machines::{machine_configs, pins};
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{respond, Frame};
use crate::web::{flash, paths, see_other};

/// GET /machine-configs
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let configs = machine_configs::list(&state.ctx, &principal.caller()).await?;
    let frame = Frame::load(&state, &principal, "Machine configs", "machines").await;
    let body = || views::list(&configs, principal.role.includes(Role::Operator));
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

async fn form_page(
    state: &AppState,
    principal: &Principal,
    htmx: &Htmx,
    status: StatusCode,
    editing: Option<&str>,
    form: &MachineForm,
    errors: &FieldErrors,
) -> Result<HttpResponse, WebError> {
    let choices = machine_configs::form_choices(&state.ctx, &principal.caller()).await?;
    let title = editing.map_or_else(|| "New machine config".to_owned(), |n| format!("Edit {n}"));
    let frame = Frame::load(state, principal, title, "machines").await;
    let body = || views::form_page(principal, editing, form, errors, &choices);
    Ok(respond(htmx, status, frame, body, body))
}

/// GET /machine-configs/new
pub async fn new(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let form = MachineForm {
        provider: machine_configs::default_provider(&state.ctx)
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
        image: "debian-12".into(),
        yubaba_channel: "stable".into(),
        template: crate::cloud_init::DEFAULT_TEMPLATE.into(),
        ..MachineForm::default()
    };
    form_page(
        &state,
        &principal,
        &htmx,
        StatusCode::OK,
        None,
        &form,
        &FieldErrors::default(),
    )
    .await
}

/// POST /machine-configs
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<MachineForm>,
) -> Result<HttpResponse, WebError> {
    let result = match MachineInput::try_from(&*form) {
        Ok(input) => machine_configs::create(&state.ctx, &principal.caller(), &input).await,
        Err(errors) => Err(OpError::Invalid(errors)),
    };
    match result {
        Ok(v) => {
            flash(
                &state,
                &principal,
                &format!("Machine config {} created (version 1).", v.spec.name),
            )
            .await;
            Ok(see_other(&paths::fill(
                paths::MACHINE_CONFIG,
                &[("name", &v.spec.name)],
            )))
        }
        Err(OpError::Invalid(errors)) => {
            form_page(
                &state,
                &principal,
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                None,
                &form,
                &errors,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// GET /machine-configs/{name}
pub async fn show(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let detail = machine_configs::detail(&state.ctx, &principal.caller(), &name).await?;
    let frame = Frame::load(&state, &principal, name.as_str(), "machines").await;
    let body = || views::show(&principal, &detail.history, detail.pin.as_ref());
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

/// GET /machine-configs/{name}/edit
pub async fn edit(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let current = machine_configs::latest(&state.ctx, &principal.caller(), &name).await?;
    let form = MachineForm::from_input(&current.spec.to_input());
    form_page(
        &state,
        &principal,
        &htmx,
        StatusCode::OK,
        Some(&name),
        &form,
        &FieldErrors::default(),
    )
    .await
}

/// POST /machine-configs/{name}: a new version.
pub async fn update(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
    form: web::Form<MachineForm>,
) -> Result<HttpResponse, WebError> {
    let result = match MachineInput::try_from(&*form) {
        Ok(input) => machine_configs::update(&state.ctx, &principal.caller(), &name, &input).await,
        Err(errors) => Err(OpError::Invalid(errors)),
    };
    match result {
        Ok((v, changed)) => {
            let msg = if changed {
                format!("Saved {} as version {}.", name, v.version)
            } else {
                "No changes: no new version was made.".to_owned()
            };
            flash(&state, &principal, &msg).await;
            Ok(see_other(&paths::fill(
                paths::MACHINE_CONFIG,
                &[("name", &name)],
            )))
        }
        Err(OpError::Invalid(errors)) => {
            form_page(
                &state,
                &principal,
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                Some(&name),
                &form,
                &errors,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// POST /machine-configs/{name}/pin-check
pub async fn pin_check(
    state: web::Data<AppState>,
    principal: Principal,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let result = pins::check(&state.ctx, &principal.caller(), &name).await?;
    flash(
        &state,
        &principal,
        &format!("Pin pre-flight: {}", result.check.message),
    )
    .await;
    Ok(see_other(&paths::fill(
        paths::MACHINE_CONFIG,
        &[("name", &name)],
    )))
}
