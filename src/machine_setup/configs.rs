//! Machine configs: each save is a new immutable version.

use serde_json::json;

use super::catalogue;
use crate::audit::{self, Action};
use crate::auth::Caller;
use crate::cloud_init::DEFAULT_TEMPLATE;
use crate::context::Ctx;
use crate::db;
use crate::db::versions::{self, Family, Version};
use crate::domain::machine::{diff_specs, FieldChange, MachineInput, MachineSpec, ProviderKind};
use crate::domain::{FieldError, FieldErrors, Role, UnixMillis};
use crate::error::OpError;

/// A stored version with its parsed spec.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConfigVersion {
    pub version: i64,
    pub author: String,
    pub created_at: UnixMillis,
    pub spec: MachineSpec,
}

impl TryFrom<Version> for ConfigVersion {
    type Error = OpError;
    fn try_from(v: Version) -> Result<Self, OpError> {
        let spec = serde_json::from_str(&v.content).map_err(|e| {
            OpError::Internal(anyhow::anyhow!(
                "stored spec of {} v{}: {e}",
                v.name,
                v.version
            ))
        })?;
        Ok(ConfigVersion {
            version: v.version,
            author: v.author,
            created_at: v.created_at,
            spec,
        })
    }
}

/// Validates input against the catalogue of the chosen provider and the known templates.
async fn parse(ctx: &Ctx, input: &MachineInput) -> Result<MachineSpec, OpError> {
    let kind = ProviderKind::parse_field("provider", &input.provider).ok();
    let current = match kind {
        Some(k) => Some(catalogue::current(ctx, k).await?),
        None => None,
    };
    let view = current
        .as_ref()
        .map(|c| catalogue::view(&c.catalogue))
        .unwrap_or_default();
    let mut conn = ctx.pool.acquire().await?;
    let templates = versions::names(&mut conn, Family::Template).await?;
    drop(conn);
    let spec = MachineSpec::parse(input, &view, &templates, DEFAULT_TEMPLATE);
    if let (Err(errors), Some(c)) = (&spec, &current) {
        if view.locations.is_empty() && errors.for_field("location").is_some() {
            // Say why nothing could be checked, instead of an empty list of choices.
            let why = if ctx.providers.get(c.provider).is_none() {
                match c.provider {
                    ProviderKind::Hetzner => {
                        "hetzner is not configured here (set HETZNER_API_TOKEN)".to_owned()
                    }
                    ProviderKind::Simulated => {
                        "the simulated provider exists only in the demo".to_owned()
                    }
                }
            } else {
                c.unavailable_message().unwrap_or_else(|| {
                    format!(
                        "the {} catalogue is empty; refresh it on /catalogue",
                        c.provider
                    )
                })
            };
            let mut errors = errors.clone();
            errors.push("provider", why);
            return Err(errors.into());
        }
    }
    Ok(spec?)
}

/// Creates a config (operator and up).
pub async fn create(
    ctx: &Ctx,
    caller: &Caller,
    input: &MachineInput,
) -> Result<ConfigVersion, OpError> {
    caller.require(Role::Operator)?;
    let spec = parse(ctx, input).await?;
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let content = serde_json::to_string(&spec).map_err(anyhow::Error::from)?;
    if !versions::create(
        &mut tx,
        &versions::NewVersion {
            family: Family::MachineConfig,
            name: &spec.name,
            content: &content,
            author: caller.actor.name(),
            now,
        },
    )
    .await?
    {
        return Err(FieldError::new("name", "is already taken").into());
    }
    audit::record(
        &mut tx,
        caller,
        now,
        Action::MachineConfigCreated,
        "machine_config",
        &spec.name,
        json!({ "version": 1 }),
    )
    .await?;
    tx.commit().await?;
    Ok(ConfigVersion {
        version: 1,
        author: caller.actor.name().to_owned(),
        created_at: now,
        spec,
    })
}

/// Saves a new version (operator and up). The name cannot change; an identical spec creates
/// no version (`false`).
pub async fn update(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
    input: &MachineInput,
) -> Result<(ConfigVersion, bool), OpError> {
    caller.require(Role::Operator)?;
    let current = latest(ctx, caller, name).await?;
    let mut input = input.clone();
    if input.name.trim().is_empty() {
        input.name = name.to_owned();
    } else if input.name.trim() != name {
        return Err(
            FieldError::new("name", "cannot be changed; create a new config instead").into(),
        );
    }
    let spec = parse(ctx, &input).await?;
    if spec == current.spec {
        return Ok((current, false));
    }
    let changed: Vec<String> = diff_specs(Some(&current.spec), &spec)
        .into_iter()
        .map(|c| c.field)
        .collect();
    let now = ctx.clock.now();
    let content = serde_json::to_string(&spec).map_err(anyhow::Error::from)?;
    let mut tx = db::begin_write(&ctx.pool).await?;
    let version = versions::append(
        &mut tx,
        &versions::NewVersion {
            family: Family::MachineConfig,
            name,
            content: &content,
            author: caller.actor.name(),
            now,
        },
    )
    .await?
    .ok_or_else(|| OpError::NotFound(format!("machine config {name}")))?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::MachineConfigUpdated,
        "machine_config",
        name,
        json!({ "version": version, "changed": changed }),
    )
    .await?;
    tx.commit().await?;
    Ok((
        ConfigVersion {
            version,
            author: caller.actor.name().to_owned(),
            created_at: now,
            spec,
        },
        true,
    ))
}

/// What the config form offers: each enabled provider's cached catalogue and the templates.
pub struct FormChoices {
    /// Locations, server types and images per provider.
    pub catalogues: Vec<(
        crate::domain::machine::ProviderKind,
        crate::provider::Catalogue,
    )>,
    /// Template names.
    pub templates: Vec<String>,
}

/// The choices the config form offers (viewer and up: the form is shown read-only to viewers).
pub async fn form_choices(ctx: &Ctx, caller: &Caller) -> Result<FormChoices, OpError> {
    caller.require(Role::Viewer)?;
    // As validation sees them: an empty or stale cache is fetched on the way.
    let catalogues = catalogue::list(ctx, caller)
        .await?
        .into_iter()
        .map(|c| (c.provider, c.catalogue))
        .collect();
    let templates = super::templates::list(ctx, caller)
        .await?
        .into_iter()
        .map(|t| t.name.as_str().to_owned())
        .collect();
    Ok(FormChoices {
        catalogues,
        templates,
    })
}

/// A config's page: every version with its changes, and the remembered verdict of its
/// current pin.
pub struct ConfigDetail {
    /// Newest first, each with its changes against the one before.
    pub history: Vec<(ConfigVersion, Vec<FieldChange>)>,
    /// The last pre-flight of the current tarball URL and sha256, if any.
    pub pin: Option<super::pins::PinCheck>,
}

/// What a config's page shows (viewer and up).
pub async fn detail(ctx: &Ctx, caller: &Caller, name: &str) -> Result<ConfigDetail, OpError> {
    let history = history(ctx, caller, name).await?;
    let spec = &history[0].0.spec;
    let pin = super::pins::latest_for(ctx, caller, &spec.yubaba_url, &spec.yubaba_sha256).await?;
    Ok(ConfigDetail { history, pin })
}

/// The provider a new config starts with: the first enabled one.
pub fn default_provider(ctx: &Ctx) -> Option<crate::domain::machine::ProviderKind> {
    ctx.providers.enabled().first().copied()
}

/// The names of every config (viewer and up), for pickers.
pub async fn names(ctx: &Ctx, caller: &Caller) -> Result<Vec<String>, OpError> {
    Ok(list(ctx, caller)
        .await?
        .into_iter()
        .map(|c| c.spec.name.into())
        .collect())
}

/// The latest version of a config.
pub async fn latest(ctx: &Ctx, caller: &Caller, name: &str) -> Result<ConfigVersion, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    versions::one(
        &mut conn,
        Family::MachineConfig,
        name,
        versions::Pick::Latest,
    )
    .await?
    .ok_or_else(|| OpError::NotFound(format!("machine config {name}")))?
    .try_into()
}

/// The latest version of every config.
pub async fn list(ctx: &Ctx, caller: &Caller) -> Result<Vec<ConfigVersion>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    versions::latest_all(&mut conn, Family::MachineConfig)
        .await?
        .into_iter()
        .map(ConfigVersion::try_from)
        .collect()
}

/// Every version, newest first, each with its changes against the one before.
pub async fn history(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
) -> Result<Vec<(ConfigVersion, Vec<FieldChange>)>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let all: Vec<ConfigVersion> = versions::history(&mut conn, Family::MachineConfig, name)
        .await?
        .into_iter()
        .map(ConfigVersion::try_from)
        .collect::<Result<_, _>>()?;
    if all.is_empty() {
        return Err(OpError::NotFound(format!("machine config {name}")));
    }
    Ok(all
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                v.clone(),
                diff_specs(all.get(i + 1).map(|p| &p.spec), &v.spec),
            )
        })
        .collect())
}

/// Splits form text into list items (commas or newlines), dropping empties.
pub fn split_list(raw: &str) -> Vec<String> {
    raw.split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses `key=value` lines into labels, naming the field for a line without `=`.
pub fn parse_labels(raw: &str) -> Result<std::collections::BTreeMap<String, String>, FieldErrors> {
    let mut out = std::collections::BTreeMap::new();
    let mut errors = FieldErrors::default();
    for line in raw.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_once('=') {
            Some((k, v)) => {
                out.insert(k.trim().to_owned(), v.trim().to_owned());
            }
            None => errors.push("labels", format!("{line:?} must look like key=value")),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}
