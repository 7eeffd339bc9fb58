//! Rendering a template for a config, for the live preview and `POST /api/v1/render`.

use super::configs;
use crate::auth::Caller;
use crate::cloud_init::{RenderRequest, Rendered, Secrets};
use crate::context::Ctx;
use crate::db::versions::{self, Family};
use crate::domain::machine::document_name;
use crate::domain::{FieldErrors, Role};
use crate::error::OpError;

/// What to render: a config, a template (stored, or an unsaved body from the editor) and the
/// render-time secrets.
pub struct PreviewRequest<'a> {
    pub machine_config: &'a str,
    /// A stored template's name; `None` means the config's own template.
    pub template: Option<&'a str>,
    /// Unsaved template text (the editor), overriding `template`.
    pub body: Option<&'a str>,
    pub secrets: &'a Secrets,
}

/// A render plus what it is compared against.
pub struct Preview {
    pub rendered: Rendered,
    pub template_name: String,
    /// The redacted payload of the config's last successful provision, when there is one.
    pub last_provisioned: Option<String>,
}

/// Renders and validates (operator and up: previews take secrets).
pub async fn preview(
    ctx: &Ctx,
    caller: &Caller,
    req: &PreviewRequest<'_>,
) -> Result<Preview, OpError> {
    caller.require(Role::Operator)?;
    // Names that could never exist are field errors, not lookups.
    let mut errors = FieldErrors::default();
    errors.check(document_name("machine_config", req.machine_config));
    if let Some(t) = req.template.filter(|t| !t.trim().is_empty()) {
        errors.check(document_name("template", t));
    }
    if !errors.is_empty() {
        return Err(errors.into());
    }
    let config = configs::latest(ctx, caller, req.machine_config).await?;
    let template_name = req
        .template
        .filter(|t| !t.trim().is_empty())
        .unwrap_or(&config.spec.template)
        .to_owned();
    let body = match req.body {
        Some(b) => b.to_owned(),
        None => {
            let mut conn = ctx.pool.acquire().await?;
            versions::one(
                &mut conn,
                Family::Template,
                &template_name,
                versions::Pick::Latest,
            )
            .await?
            .ok_or_else(|| OpError::NotFound(format!("template {template_name}")))?
            .content
        }
    };
    let rendered = ctx
        .renderer
        .render(&RenderRequest {
            template_body: &body,
            spec: &config.spec,
            hostname: &config.spec.name,
            secrets: req.secrets,
            now: ctx.clock.now(),
            requested_by: caller.actor.name(),
        })
        .await;
    // What the config's last successful provision booted with (redacted), to diff against.
    let last_provisioned = {
        let mut conn = ctx.pool.acquire().await?;
        crate::db::provisions::last_succeeded_payload(&mut conn, config.spec.name.as_str()).await?
    };
    Ok(Preview {
        rendered,
        template_name,
        last_provisioned,
    })
}
