//! Cloud-init templates: versioned tera documents.

use serde_json::json;

use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::cloud_init::{Renderer, DEFAULT_TEMPLATE, DEFAULT_TEMPLATE_BODY};
use crate::context::Ctx;
use crate::db;
use crate::db::versions::{self, Family};
use crate::domain::digest::sha256_hex;
use crate::domain::machine::document_name;
use crate::domain::machine::TemplateName;
use crate::domain::{parse_stored, FieldErrors, Role, UnixMillis};
use crate::error::OpError;

/// One version of a template, as the editor, its history and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Version {
    pub name: TemplateName,
    pub version: i64,
    /// The tera source.
    pub content: String,
    pub author: String,
    pub created_at: UnixMillis,
}

impl TryFrom<versions::Version> for Version {
    type Error = OpError;
    fn try_from(v: versions::Version) -> Result<Self, OpError> {
        Ok(Version {
            name: parse_stored("template_versions.name", &v.name, TemplateName::parse)?,
            version: v.version,
            content: v.content,
            author: v.author,
            created_at: v.created_at,
        })
    }
}

/// Longest template accepted, in characters (as JSON Schema's maxLength counts them; the
/// rendered payload must still fit in 32 KiB).
pub const MAX_TEMPLATE_CHARS: usize = 128 * 1024;

/// Checks a template body: size, then (in the sandbox) syntax and the allow-list, so a template
/// that could read the server's environment or include itself is never saved.
async fn check_body(errors: &mut FieldErrors, renderer: &Renderer, who: &str, body: &str) {
    if body.trim().is_empty() {
        errors.push("body", "is required");
    } else if body.chars().count() > MAX_TEMPLATE_CHARS {
        errors.push(
            "body",
            format!("must be at most {MAX_TEMPLATE_CHARS} characters"),
        );
    } else if body.contains('\0') {
        errors.push("body", "must not contain NUL characters");
    } else if let Err(why) = renderer.check(who, body).await {
        errors.push("body", why);
    }
}

async fn audit_version(
    conn: &mut sqlx::AnyConnection,
    caller: &Caller,
    now: UnixMillis,
    action: Action,
    name: &str,
    version: i64,
    body: &str,
) -> sqlx::Result<()> {
    let details =
        json!({ "version": version, "sha256": sha256_hex(body.as_bytes()), "bytes": body.len() });
    audit::record(conn, caller, now, action, "template", name, details).await
}

/// Loads the shipped default template on first start (no-op afterwards).
pub async fn ensure_default(ctx: &Ctx) -> Result<(), OpError> {
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    if versions::create(
        &mut tx,
        &versions::NewVersion {
            family: Family::Template,
            name: DEFAULT_TEMPLATE,
            content: DEFAULT_TEMPLATE_BODY,
            author: "system",
            now,
        },
    )
    .await?
    {
        audit_version(
            &mut tx,
            &Caller::system(),
            now,
            Action::TemplateCreated,
            DEFAULT_TEMPLATE,
            1,
            DEFAULT_TEMPLATE_BODY,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Browsers submit textarea text with CRLF line endings; payloads and diffs want LF.
fn normalise(body: &str) -> String {
    body.replace("\r\n", "\n")
}

/// Creates a template (operator and up).
pub async fn create(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
    body: &str,
) -> Result<Version, OpError> {
    caller.require(Role::Operator)?;
    let body = &normalise(body);
    let mut errors = FieldErrors::default();
    let name = errors.check(document_name("name", name));
    if name.is_some() {
        check_body(&mut errors, &ctx.renderer, caller.actor.name(), body).await;
    }
    let Some(name) = name.filter(|_| errors.is_empty()) else {
        return Err(errors.into());
    };
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    if !versions::create(
        &mut tx,
        &versions::NewVersion {
            family: Family::Template,
            name: &name,
            content: body,
            author: caller.actor.name(),
            now,
        },
    )
    .await?
    {
        return Err(crate::domain::FieldError::new("name", "is already taken").into());
    }
    audit_version(
        &mut tx,
        caller,
        now,
        Action::TemplateCreated,
        &name,
        1,
        body,
    )
    .await?;
    let v = versions::one(&mut tx, Family::Template, &name, versions::Pick::Latest)
        .await?
        .ok_or_else(|| OpError::NotFound(name.clone()))?;
    tx.commit().await?;
    v.try_into()
}

/// Saves a new version (operator and up); an unchanged body creates none.
pub async fn update(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
    body: &str,
) -> Result<(Version, bool), OpError> {
    caller.require(Role::Operator)?;
    let body = &normalise(body);
    let mut errors = FieldErrors::default();
    check_body(&mut errors, &ctx.renderer, caller.actor.name(), body).await;
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let current = versions::one(&mut tx, Family::Template, name, versions::Pick::Latest)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("template {name}")))?;
    if !errors.is_empty() {
        return Err(errors.into());
    }
    if current.content == *body {
        return Ok((current.try_into()?, false));
    }
    let version = versions::append(
        &mut tx,
        &versions::NewVersion {
            family: Family::Template,
            name,
            content: body,
            author: caller.actor.name(),
            now,
        },
    )
    .await?
    .ok_or_else(|| OpError::NotFound(name.to_owned()))?;
    audit_version(
        &mut tx,
        caller,
        now,
        Action::TemplateUpdated,
        name,
        version,
        body,
    )
    .await?;
    let v = versions::one(
        &mut tx,
        Family::Template,
        name,
        versions::Pick::Exact(version),
    )
    .await?
    .ok_or_else(|| OpError::NotFound(name.to_owned()))?;
    tx.commit().await?;
    Ok((v.try_into()?, true))
}

/// Logs every stored template (latest version) that the sandbox refuses, and returns their
/// names with the reason. Run once at start: such templates are kept as they are, and each
/// render of them carries a blocking finding until someone edits them.
pub async fn report_refused(ctx: &Ctx) -> Vec<(String, String)> {
    let templates = match list(ctx, &Caller::system()).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list templates to check them against the sandbox");
            return Vec::new();
        }
    };
    let mut refused = Vec::new();
    for t in templates {
        if let Err(why) = ctx.renderer.check("system", &t.content).await {
            tracing::warn!(
                template.name = %t.name,
                template.version = t.version,
                problem = %why,
                "stored template is refused by the sandbox: it will not render until edited"
            );
            refused.push((t.name.as_str().to_owned(), why));
        }
    }
    refused
}

/// The latest version of one template (viewer and up).
pub async fn latest(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Version, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    versions::one(&mut conn, Family::Template, name, versions::Pick::Latest)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("template {name}")))?
        .try_into()
}

/// What the template editor opens with: the latest version and the configs to preview it for.
pub struct Editing {
    /// The template's latest version.
    pub template: Version,
    /// Names of the configs it can be previewed for.
    pub configs: Vec<String>,
}

/// Opens the editor on a template (viewer and up; saving needs operator).
pub async fn editing(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Editing, OpError> {
    Ok(Editing {
        template: latest(ctx, caller, name).await?,
        configs: super::configs::names(ctx, caller).await?,
    })
}

/// The latest version of every template.
pub async fn list(ctx: &Ctx, caller: &Caller) -> Result<Vec<Version>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let latest = versions::latest_all(&mut conn, Family::Template).await?;
    latest.into_iter().map(Version::try_from).collect()
}

/// Every version of one template, newest first.
pub async fn history(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Vec<Version>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let h = versions::history(&mut conn, Family::Template, name).await?;
    if h.is_empty() {
        return Err(OpError::NotFound(format!("template {name}")));
    }
    h.into_iter().map(Version::try_from).collect()
}
