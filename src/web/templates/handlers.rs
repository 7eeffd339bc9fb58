//! Template handlers and the live preview.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::views;
use crate::cloud_init::Secrets;
use crate::domain::Role;
use crate::error::OpError;
use crate::machine_setup::preview::{preview, PreviewRequest};
use crate::machine_setup::{configs, templates};
use crate::web::errors::WebError;
use crate::web::layout::fragment;
use crate::web::reply::{saved_message, submitted, Reply, Shown};
use crate::web::{paths, see_other};

/// GET /templates
pub async fn list(reply: Reply) -> Result<HttpResponse, WebError> {
    let all = templates::list(reply.ctx(), &reply.caller()).await?;
    let can_edit = reply.principal.role.includes(Role::Operator);
    let body = || views::list(&all, can_edit);
    Ok(reply
        .page(StatusCode::OK, "Templates", "templates", body)
        .await)
}

/// Where a template's page is.
fn template_path(name: &str) -> String {
    paths::fill(paths::TEMPLATE, &[("name", name)])
}

/// The template form as submitted.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TemplateForm {
    pub name: String,
    pub body: String,
}

/// The new-template form, `shown` fresh or with its errors.
async fn new_form(reply: &Reply, name: &str, body: &str, shown: Shown<'_>) -> HttpResponse {
    let errors = shown.errors();
    let form = || views::new_form(&reply.principal, name, body, errors);
    reply
        .page(shown.status(), "New template", "templates", form)
        .await
}

/// GET /templates/new
pub async fn new(reply: Reply) -> HttpResponse {
    let body = crate::cloud_init::DEFAULT_TEMPLATE_BODY;
    new_form(&reply, "", body, Shown::Fresh).await
}

/// POST /templates
pub async fn create(reply: Reply, form: web::Form<TemplateForm>) -> Result<HttpResponse, WebError> {
    submitted(
        templates::create(reply.ctx(), &reply.caller(), &form.name, &form.body).await,
        async |v| {
            let msg = format!("Template {} created.", v.name);
            reply.done(&msg, see_other(&template_path(&v.name))).await
        },
        async |errors| Ok(new_form(&reply, &form.name, &form.body, Shown::Refused(&errors)).await),
    )
    .await
}

/// GET /templates/{name}
pub async fn show(reply: Reply, name: web::Path<String>) -> Result<HttpResponse, WebError> {
    let history = templates::history(reply.ctx(), &reply.caller(), &name).await?;
    let body = || views::show(&reply.principal, &history);
    Ok(reply
        .page(StatusCode::OK, name.as_str(), "templates", body)
        .await)
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

/// The editor, `shown` fresh or with its errors, previewing with `draft.config` when it is one
/// of `configs` (else the first).
async fn editor(
    reply: &Reply,
    draft: Draft<'_>,
    configs: Vec<String>,
    shown: Shown<'_>,
) -> Result<HttpResponse, WebError> {
    let errors = shown.errors();
    let chosen = if configs.iter().any(|c| c == draft.config) {
        draft.config.to_owned()
    } else {
        configs.first().cloned().unwrap_or_default()
    };
    let title = format!("Edit template {}", draft.name);
    let page = || {
        views::editor(
            &reply.principal,
            draft.name,
            draft.body,
            &configs,
            &chosen,
            errors,
        )
    };
    Ok(reply.page(shown.status(), title, "templates", page).await)
}

/// GET /templates/{name}/edit
pub async fn edit(
    reply: Reply,
    name: web::Path<String>,
    query: web::Query<EditQuery>,
) -> Result<HttpResponse, WebError> {
    let opened = templates::editing(reply.ctx(), &reply.caller(), &name).await?;
    let draft = Draft {
        name: &name,
        body: &opened.template.content,
        config: &query.config,
    };
    editor(&reply, draft, opened.configs, Shown::Fresh).await
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
    reply: Reply,
    name: web::Path<String>,
    form: web::Form<SaveForm>,
) -> Result<HttpResponse, WebError> {
    submitted(
        templates::update(reply.ctx(), &reply.caller(), &name, &form.body).await,
        async |(v, changed)| {
            let msg = saved_message(&name, v.version, changed);
            reply.done(&msg, see_other(&template_path(&name))).await
        },
        async |errors| {
            let configs = configs::names(reply.ctx(), &reply.caller()).await?;
            let draft = Draft {
                name: &name,
                body: &form.body,
                config: &form.config,
            };
            editor(&reply, draft, configs, Shown::Refused(&errors)).await
        },
    )
    .await
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
    reply: Reply,
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
    match preview(reply.ctx(), &reply.caller(), &req).await {
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
