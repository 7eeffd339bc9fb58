//! Template handlers and the live preview.

use actix_htmx::Htmx;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::auth::Principal;
use crate::cloud_init::Secrets;
use crate::domain::{FieldErrors, Role};
use crate::error::OpError;
use crate::machines::preview::{preview, PreviewRequest};
use crate::machines::{machine_configs, templates};
use crate::state::AppState;
use crate::web::errors::WebError;
use crate::web::layout::{fragment, respond, Frame};
use crate::web::{flash, paths, see_other};

/// GET /templates
pub async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
) -> Result<HttpResponse, WebError> {
    let all = templates::list(&state.ctx, &principal.caller()).await?;
    let frame = Frame::load(&state, &principal, "Templates", "templates").await;
    let body = || views::list(&all, principal.role.includes(Role::Operator));
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

/// The template form as submitted.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TemplateForm {
    pub name: String,
    pub body: String,
}

/// GET /templates/new
pub async fn new(state: web::Data<AppState>, principal: Principal, htmx: Htmx) -> HttpResponse {
    let frame = Frame::load(&state, &principal, "New template", "templates").await;
    let body = || {
        views::new_form(
            &principal,
            "",
            crate::cloud_init::DEFAULT_TEMPLATE_BODY,
            &FieldErrors::default(),
        )
    };
    respond(&htmx, StatusCode::OK, frame, body, body)
}

/// POST /templates
pub async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    form: web::Form<TemplateForm>,
) -> Result<HttpResponse, WebError> {
    match templates::create(&state.ctx, &principal.caller(), &form.name, &form.body).await {
        Ok(v) => {
            flash(&state, &principal, &format!("Template {} created.", v.name)).await;
            Ok(see_other(&paths::fill(
                paths::TEMPLATE,
                &[("name", &v.name)],
            )))
        }
        Err(OpError::Invalid(errors)) => {
            let frame = Frame::load(&state, &principal, "New template", "templates").await;
            let body = || views::new_form(&principal, &form.name, &form.body, &errors);
            Ok(respond(
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                frame,
                body,
                body,
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// GET /templates/{name}
pub async fn show(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let history = templates::history(&state.ctx, &principal.caller(), &name).await?;
    let frame = Frame::load(&state, &principal, name.as_str(), "templates").await;
    let body = || views::show(&principal, &history);
    Ok(respond(&htmx, StatusCode::OK, frame, body, body))
}

/// `?config=` picks the machine config the editor previews with.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct EditQuery {
    pub config: String,
}

/// What the editor shows: the template, its (possibly unsaved) text and the previewed config.
struct Draft<'a> {
    name: &'a str,
    body: &'a str,
    config: &'a str,
}

async fn editor(
    state: &AppState,
    principal: &Principal,
    htmx: &Htmx,
    status: StatusCode,
    draft: Draft<'_>,
    configs: Vec<String>,
    errors: &FieldErrors,
) -> Result<HttpResponse, WebError> {
    let chosen = if configs.iter().any(|c| c == draft.config) {
        draft.config.to_owned()
    } else {
        configs.first().cloned().unwrap_or_default()
    };
    let frame = Frame::load(
        state,
        principal,
        format!("Edit template {}", draft.name),
        "templates",
    )
    .await;
    let page = || views::editor(principal, draft.name, draft.body, &configs, &chosen, errors);
    Ok(respond(htmx, status, frame, page, page))
}

/// GET /templates/{name}/edit
pub async fn edit(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
    query: web::Query<EditQuery>,
) -> Result<HttpResponse, WebError> {
    let opened = templates::editing(&state.ctx, &principal.caller(), &name).await?;
    editor(
        &state,
        &principal,
        &htmx,
        StatusCode::OK,
        Draft {
            name: &name,
            body: &opened.template.content,
            config: &query.config,
        },
        opened.configs,
        &FieldErrors::default(),
    )
    .await
}

/// The editor's save form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SaveForm {
    pub body: String,
    pub config: String,
}

/// POST /templates/{name}: a new version.
pub async fn update(
    state: web::Data<AppState>,
    principal: Principal,
    htmx: Htmx,
    name: web::Path<String>,
    form: web::Form<SaveForm>,
) -> Result<HttpResponse, WebError> {
    match templates::update(&state.ctx, &principal.caller(), &name, &form.body).await {
        Ok((v, changed)) => {
            let msg = if changed {
                format!("Saved {} as version {}.", name, v.version)
            } else {
                "No changes: no new version was made.".to_owned()
            };
            flash(&state, &principal, &msg).await;
            Ok(see_other(&paths::fill(paths::TEMPLATE, &[("name", &name)])))
        }
        Err(OpError::Invalid(errors)) => {
            editor(
                &state,
                &principal,
                &htmx,
                StatusCode::UNPROCESSABLE_ENTITY,
                Draft {
                    name: &name,
                    body: &form.body,
                    config: &form.config,
                },
                machine_configs::names(&state.ctx, &principal.caller()).await?,
                &errors,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// What the live preview posts.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PreviewForm {
    pub body: String,
    pub config: String,
    pub template: String,
    pub mesh_preauth_key: String,
    pub tunnel_token: String,
}

/// POST /preview: the rendered payload, findings, size gauge, sha256 and diff, as a partial.
pub async fn live_preview(
    state: web::Data<AppState>,
    principal: Principal,
    form: web::Form<PreviewForm>,
) -> Result<HttpResponse, WebError> {
    if form.config.trim().is_empty() {
        return Ok(fragment(
            StatusCode::OK,
            views::preview_message("Create a machine config to preview this template with."),
        ));
    }
    let secrets = match Secrets::parse(Some(&form.mesh_preauth_key), Some(&form.tunnel_token)) {
        Ok(s) => s,
        Err(errors) => {
            return Ok(fragment(
                StatusCode::UNPROCESSABLE_ENTITY,
                views::preview_message(&errors.to_string()),
            ))
        }
    };
    if form.body.chars().count() > templates::MAX_TEMPLATE_CHARS {
        return Ok(fragment(
            StatusCode::UNPROCESSABLE_ENTITY,
            views::preview_message("body: too large to preview"),
        ));
    }
    let req = PreviewRequest {
        machine_config: &form.config,
        template: Some(&form.template),
        body: (!form.body.is_empty()).then_some(form.body.as_str()),
        secrets: &secrets,
    };
    // Problems the preview can name are shown in its own pane, not as a whole error page.
    match preview(&state.ctx, &principal.caller(), &req).await {
        Ok(result) => Ok(fragment(StatusCode::OK, views::preview(&result))),
        Err(OpError::Invalid(errors)) => Ok(fragment(
            StatusCode::UNPROCESSABLE_ENTITY,
            views::preview_message(&errors.to_string()),
        )),
        Err(OpError::NotFound(what)) => Ok(fragment(
            StatusCode::NOT_FOUND,
            views::preview_message(&format!("{what} not found")),
        )),
        Err(e) => Err(e.into()),
    }
}
