//! Fleets: the yubaba clusters headroom watches and restores. Operations check the caller's
//! role, validate, and write the change with its audit entry in one transaction.

pub mod secrets;

use serde_json::{json, Map, Value};

use crate::audit::{self, Action, NewEntry};
use crate::context::Ctx;
use crate::db;
use crate::db::fleets::{FleetRow, FleetWrite};
use crate::db::versions::{self, Family};
use crate::domain::fleet::{FleetInput, FleetSpec};
use crate::domain::{Caller, FieldError, FieldErrors, Forbidden, Role, UnixMillis};

/// A stored fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    /// Every field already valid; secrets only as sources.
    pub spec: FleetSpec,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// Who created or last changed it.
    pub updated_by: String,
}

/// Why a fleet operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum FleetsError {
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    #[error("{0}")]
    Invalid(FieldErrors),
    #[error("{0} not found")]
    NotFound(String),
    /// Refused because of the fleet's current state (open requests).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for FleetsError {
    fn from(e: sqlx::Error) -> Self {
        FleetsError::Internal(e.into())
    }
}

impl From<FieldError> for FleetsError {
    fn from(e: FieldError) -> Self {
        FleetsError::Invalid(e.into())
    }
}

impl From<FieldErrors> for FleetsError {
    fn from(e: FieldErrors) -> Self {
        FleetsError::Invalid(e)
    }
}

impl TryFrom<FleetRow> for Fleet {
    type Error = FleetsError;
    fn try_from(r: FleetRow) -> Result<Self, FleetsError> {
        let spec = serde_json::from_str(&r.spec).map_err(|e| {
            FleetsError::Internal(anyhow::anyhow!("stored spec of fleet {}: {e}", r.name))
        })?;
        Ok(Fleet {
            spec,
            created_at: r.created_at,
            updated_at: r.updated_at,
            updated_by: r.updated_by,
        })
    }
}

/// Every fleet, by name (viewer and up).
#[tracing::instrument(skip_all, err)]
pub async fn list(ctx: &Ctx, caller: &Caller) -> Result<Vec<Fleet>, FleetsError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    db::fleets::list(&mut conn)
        .await?
        .into_iter()
        .map(Fleet::try_from)
        .collect()
}

/// One fleet (viewer and up).
#[tracing::instrument(skip_all, fields(fleet.name = %name), err)]
pub async fn get(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Fleet, FleetsError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    db::fleets::get(&mut conn, name)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {name}")))?
        .try_into()
}

/// Refuses a restore config that does not exist (inside the write, so it cannot vanish
/// between the check and the save).
async fn check_restore_config(
    conn: &mut sqlx::SqliteConnection,
    spec: &FleetSpec,
) -> Result<(), FleetsError> {
    if versions::latest(conn, Family::MachineConfig, &spec.restore_machine_config)
        .await?
        .is_none()
    {
        return Err(FieldError::new(
            "restore_machine_config",
            "is not a machine config: create it first on /machine-configs",
        )
        .into());
    }
    Ok(())
}

fn spec_json(spec: &FleetSpec) -> Result<String, FleetsError> {
    serde_json::to_string(spec).map_err(|e| FleetsError::Internal(e.into()))
}

async fn write_audit(
    conn: &mut sqlx::SqliteConnection,
    caller: &Caller,
    now: UnixMillis,
    action: Action,
    name: &str,
    details: Value,
) -> sqlx::Result<()> {
    audit::append(
        conn,
        now,
        NewEntry {
            actor: &caller.actor,
            action,
            target_kind: "fleet",
            target_id: name,
            details,
        },
    )
    .await
    .map(|_| ())
}

/// Creates a fleet (operator and up). The demo seeding calls this too.
#[tracing::instrument(skip_all, fields(fleet.name = %input.name.trim()), err)]
pub async fn create(ctx: &Ctx, caller: &Caller, input: &FleetInput) -> Result<Fleet, FleetsError> {
    caller.require(Role::Operator)?;
    let spec = FleetSpec::parse(input, &ctx.settings.secrets)?;
    let content = spec_json(&spec)?;
    let now = ctx.clock.now();
    let by = caller.actor.name();
    let mut tx = db::begin_write(&ctx.pool).await?;
    check_restore_config(&mut tx, &spec).await?;
    let write = FleetWrite {
        name: &spec.name,
        spec: &content,
        restore_machine_config: &spec.restore_machine_config,
        at: now,
        by,
    };
    if !db::fleets::insert(&mut tx, write).await? {
        return Err(FieldError::new("name", "is already taken by another fleet").into());
    }
    // The spec holds secret sources, never values, so it can be recorded whole.
    let details = serde_json::to_value(&spec).map_err(anyhow::Error::from)?;
    write_audit(
        &mut tx,
        caller,
        now,
        Action::FleetCreated,
        &spec.name,
        details,
    )
    .await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(Fleet {
        spec,
        created_at: now,
        updated_at: now,
        updated_by: by.to_owned(),
    })
}

/// The fields that differ, each with its value before and after (secrets as sources).
pub fn changed_fields(before: &FleetSpec, after: &FleetSpec) -> Map<String, Value> {
    let (Ok(Value::Object(b)), Ok(Value::Object(a))) =
        (serde_json::to_value(before), serde_json::to_value(after))
    else {
        return Map::new();
    };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, v)| {
            let was = b.get(k).cloned().unwrap_or(Value::Null);
            (k.clone(), json!({ "before": was, "after": v }))
        })
        .collect()
}

/// Replaces a fleet's settings (operator and up). The name cannot change: the body's must
/// equal `name` or be empty. An identical spec changes nothing and records nothing.
#[tracing::instrument(skip_all, fields(fleet.name = %name), err)]
pub async fn update(
    ctx: &Ctx,
    caller: &Caller,
    name: &str,
    input: &FleetInput,
) -> Result<Fleet, FleetsError> {
    caller.require(Role::Operator)?;
    let mut input = input.clone();
    if input.name.trim().is_empty() {
        input.name = name.to_owned();
    } else if input.name.trim() != name {
        return Err(FieldError::new(
            "name",
            "cannot be changed; create a new fleet and delete this one instead",
        )
        .into());
    }
    // Rules first, so a refused body says why whether or not the fleet exists.
    let spec = FleetSpec::parse(&input, &ctx.settings.secrets)?;
    let content = spec_json(&spec)?;
    let now = ctx.clock.now();
    let by = caller.actor.name();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let current: Fleet = db::fleets::get(&mut tx, name)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {name}")))?
        .try_into()?;
    check_restore_config(&mut tx, &spec).await?;
    // The approval policy binds operators: an operator may tighten it, but loosening it
    // (fewer approvals, a longer window) is an approver's decision, or an operator could
    // lower the bar just before filing.
    if spec.approvals_required < current.spec.approvals_required
        || spec.approval_ttl_hours > current.spec.approval_ttl_hours
    {
        caller.require(Role::Approver)?;
    }
    let changed = changed_fields(&current.spec, &spec);
    if changed.is_empty() {
        return Ok(current);
    }
    let write = FleetWrite {
        name,
        spec: &content,
        restore_machine_config: &spec.restore_machine_config,
        at: now,
        by,
    };
    if !db::fleets::update(&mut tx, write).await? {
        return Err(FleetsError::NotFound(format!("fleet {name}")));
    }
    write_audit(
        &mut tx,
        caller,
        now,
        Action::FleetUpdated,
        name,
        json!({ "changed": changed }),
    )
    .await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(Fleet {
        spec,
        created_at: current.created_at,
        updated_at: now,
        updated_by: by.to_owned(),
    })
}

/// Deletes a fleet (operator and up), refused while any of its requests is awaiting
/// approval, approved or executing: those still need the fleet's policy and secrets.
#[tracing::instrument(skip_all, fields(fleet.name = %name), err)]
pub async fn delete(ctx: &Ctx, caller: &Caller, name: &str) -> Result<(), FleetsError> {
    caller.require(Role::Operator)?;
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let current: Fleet = db::fleets::get(&mut tx, name)
        .await?
        .ok_or_else(|| FleetsError::NotFound(format!("fleet {name}")))?
        .try_into()?;
    let open = db::fleets::open_provisions(&mut tx, name).await?;
    if open > 0 {
        return Err(FleetsError::Conflict(format!(
            "fleet {name} has {open} open provision request(s) (pending approval, approved or \
             executing); wait for them to finish, or reject or cancel them, before deleting it"
        )));
    }
    db::fleets::delete(&mut tx, name).await?;
    let details = serde_json::to_value(&current.spec).map_err(anyhow::Error::from)?;
    write_audit(&mut tx, caller, now, Action::FleetDeleted, name, details).await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(())
}
