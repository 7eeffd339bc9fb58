//! Machine-config handlers.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};

use super::forms::MachineForm;
use super::views::{self};
use crate::domain::machine::MachineInput;
use crate::domain::Role;
use crate::error::OpError;
use crate::machine_setup::{configs, pins};
use crate::web::errors::WebError;
use crate::web::reply::{saved_message, submitted, Reply, Shown};
use crate::web::{paths, see_other};

/// GET /machine-configs
pub async fn list(reply: Reply) -> Result<HttpResponse, WebError> {
    let configs = configs::list(reply.ctx(), &reply.caller()).await?;
    let can_edit = reply.principal.role.includes(Role::Operator);
    let body = || views::list(&configs, can_edit);
    Ok(reply
        .page(StatusCode::OK, "Machine configs", "machines", body)
        .await)
}

/// The create or edit form (`editing` names the config), `shown` fresh or with its errors.
async fn form_page(
    reply: &Reply,
    editing: Option<&str>,
    form: &MachineForm,
    shown: Shown<'_>,
) -> Result<HttpResponse, WebError> {
    let errors = shown.errors();
    let principal = &reply.principal;
    let choices = configs::form_choices(&reply.state.ctx, &principal.caller()).await?;
    let title = editing.map_or_else(|| "New machine config".to_owned(), |n| format!("Edit {n}"));
    let body = || views::form_page(principal, editing, form, errors, &choices);
    Ok(reply.page(shown.status(), title, "machines", body).await)
}

/// The form as the operations' input; a rule it breaks is shown like the operation's own.
fn parsed(form: &MachineForm) -> Result<MachineInput, OpError> {
    MachineInput::try_from(form).map_err(OpError::Invalid)
}

/// Where a config's page is.
fn config_path(name: &str) -> String {
    paths::fill(paths::MACHINE_CONFIG, &[("name", name)])
}

/// GET /machine-configs/new
pub async fn new(reply: Reply) -> Result<HttpResponse, WebError> {
    let form = MachineForm {
        provider: configs::default_provider(reply.ctx())
            .map(|k| k.as_str().to_owned())
            .unwrap_or_default(),
        image: "debian-12".into(),
        yubaba_channel: "stable".into(),
        template: crate::cloud_init::DEFAULT_TEMPLATE.into(),
        ..MachineForm::default()
    };
    form_page(&reply, None, &form, Shown::Fresh).await
}

/// POST /machine-configs
pub async fn create(reply: Reply, form: web::Form<MachineForm>) -> Result<HttpResponse, WebError> {
    let result = match parsed(&form) {
        Ok(input) => configs::create(reply.ctx(), &reply.caller(), &input).await,
        Err(e) => Err(e),
    };
    submitted(
        result,
        async |v| {
            let name = &v.spec.name;
            let msg = format!("Machine config {name} created (version 1).");
            reply.done(&msg, see_other(&config_path(name))).await
        },
        async |errors| form_page(&reply, None, &form, Shown::Refused(&errors)).await,
    )
    .await
}

/// GET /machine-configs/{name}
pub async fn show(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let detail = configs::detail(reply.ctx(), &reply.caller(), &name).await?;
    let body = || views::show(&reply.principal, &detail.history, detail.pin.as_ref());
    Ok(reply
        .page(StatusCode::OK, name.as_str(), "machines", body)
        .await)
}

/// GET /machine-configs/{name}/edit
pub async fn edit(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let current = configs::latest(reply.ctx(), &reply.caller(), &name).await?;
    let form = MachineForm::from_input(&current.spec.to_input());
    form_page(&reply, Some(&name), &form, Shown::Fresh).await
}

/// POST /machine-configs/{name}: a new version.
pub async fn update(
    reply: Reply,
    name: web::Path<String>,
    form: web::Form<MachineForm>,
) -> Result<HttpResponse, WebError> {
    let result = match parsed(&form) {
        Ok(input) => configs::update(reply.ctx(), &reply.caller(), &name, &input).await,
        Err(e) => Err(e),
    };
    submitted(
        result,
        async |(v, changed)| {
            let msg = saved_message(&name, v.version, changed);
            reply.done(&msg, see_other(&config_path(&name))).await
        },
        async |errors| form_page(&reply, Some(&name), &form, Shown::Refused(&errors)).await,
    )
    .await
}

/// POST /machine-configs/{name}/pin-check
pub async fn pin_check(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let result = pins::check(reply.ctx(), &reply.caller(), &name).await?;
    let msg = format!("Pin pre-flight: {}", result.check.message);
    reply.done(&msg, see_other(&config_path(&name))).await
}
