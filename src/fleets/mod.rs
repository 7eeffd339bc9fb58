//! Fleets: the yubaba clusters headroom watches and restores. Operations check the caller's
//! role, validate, and write the change with its audit entry in one transaction.

pub mod secrets;

use serde_json::{json, Map, Value};

use crate::audit::{self, Action};
use crate::context::Ctx;
use crate::db;
use crate::db::fleets::{FleetRow, FleetWrite};
use crate::db::versions::{self, Family};
use crate::domain::fleet::{endpoint_identity, FleetInput, FleetSpec};
use crate::domain::{Caller, FieldError, FieldErrors, Role, UnixMillis};
use crate::error::OpError;

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

impl TryFrom<FleetRow> for Fleet {
    type Error = OpError;
    fn try_from(r: FleetRow) -> Result<Self, OpError> {
        let spec = FleetSpec::from_stored(&r.name, &r.spec).map_err(anyhow::Error::from)?;
        Ok(Fleet {
            spec,
            created_at: r.created_at,
            updated_at: r.updated_at,
            updated_by: r.updated_by,
        })
    }
}

/// One entry of a fleet's change history.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetChange {
    pub at: UnixMillis,
    /// Who made the change (`system` for the console itself).
    pub actor: String,
    /// `created`, `updated`, `deleted`, or `baseline` (a fleet stored before the history was
    /// kept: its last changer, taken to have set every field).
    pub kind: String,
    /// Field → `{"before": …, "after": …}`; secrets appear as references, never values.
    pub changes: Map<String, Value>,
}

/// Changes a fleet's history shows, at most (newest first).
pub const HISTORY_SHOWN_MAX: i64 = 200;

/// Every fleet, by name (viewer and up).
#[tracing::instrument(skip_all, err)]
pub async fn list(ctx: &Ctx, caller: &Caller) -> Result<Vec<Fleet>, OpError> {
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
pub async fn get(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Fleet, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    db::fleets::get(&mut conn, name)
        .await?
        .ok_or_else(|| not_found(name))?
        .try_into()
}

/// A fleet's change history, newest first, at most [`HISTORY_SHOWN_MAX`] entries (viewer and
/// up). The history outlives a delete, so a deleted fleet's name still answers; a name that
/// never had a fleet is not found.
#[tracing::instrument(skip_all, fields(fleet.name = %name), err)]
pub async fn history(ctx: &Ctx, caller: &Caller, name: &str) -> Result<Vec<FleetChange>, OpError> {
    caller.require(Role::Viewer)?;
    // No fleet name holds a NUL, and PostgreSQL refuses one in any text it is sent (SQLite
    // would match nothing): not found, never a server error.
    if name.contains('\0') {
        return Err(not_found(name));
    }
    let mut conn = ctx.pool.acquire().await?;
    let rows = db::fleet_changes::for_fleet(&mut conn, name, HISTORY_SHOWN_MAX).await?;
    if rows.is_empty() && db::fleets::get(&mut conn, name).await?.is_none() {
        return Err(not_found(name));
    }
    rows.into_iter()
        .map(|r| {
            let changes = match serde_json::from_str(&r.changes) {
                Ok(Value::Object(m)) => m,
                _ => {
                    return Err(OpError::Internal(anyhow::anyhow!(
                        "fleet {name}: change {} is not a JSON object",
                        r.id
                    )))
                }
            };
            Ok(FleetChange {
                at: r.at,
                actor: r.actor,
                kind: r.kind,
                changes,
            })
        })
        .collect()
}

/// Refuses an endpoint another fleet already lists (inside the write transaction, so two
/// concurrent creates cannot both take it): a second fleet in front of the same cluster could
/// carry a looser approval policy. Compares the normalised URLs (`domain::fleet::endpoint`);
/// a host reached under two names (an IP and a DNS name) is not caught here.
async fn check_endpoints_unclaimed(
    conn: &mut sqlx::AnyConnection,
    spec: &FleetSpec,
) -> Result<(), OpError> {
    let mut errors = FieldErrors::default();
    for row in db::fleets::list(conn).await? {
        if spec.name() == &row.name {
            continue;
        }
        let other: Fleet = row.try_into()?;
        for (i, url) in spec.endpoints().iter().enumerate() {
            let mine = endpoint_identity(url);
            let taken = other
                .spec
                .endpoints()
                .iter()
                .any(|theirs| endpoint_identity(theirs) == mine);
            if taken {
                errors.push(
                    "endpoints",
                    format!(
                        "URL {} ({url}) is already watched by fleet {}: an endpoint belongs \
                         to one fleet, so change or delete that fleet first",
                        i + 1,
                        other.spec.name()
                    ),
                );
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(OpError::Invalid(errors))
    }
}

/// "fleet NAME not found", quoting the name only when it could be one: the path segment is
/// whatever a client sent (7,000 characters, bidi overrides) and the answer must not echo it.
fn not_found(name: &str) -> OpError {
    if crate::domain::machine::document_name("name", name).is_ok() {
        OpError::NotFound(format!("fleet {name}"))
    } else {
        OpError::NotFound("fleet (the name in the address is not a valid fleet name)".into())
    }
}

/// Which secrets a fleet's machines receive, and a looser approval policy, are an approver's
/// call: otherwise an operator could create a second fleet naming production's mesh key under a
/// one-approval, week-long policy and have its machines join production's mesh with fewer eyes
/// than production requires.
fn requires_approver(caller: &Caller) -> Result<(), OpError> {
    caller.require(Role::Approver).map_err(|_| {
        OpError::from(crate::domain::Forbidden::with_rule(
            Role::Approver,
            "naming a fleet's secrets, or loosening its approval policy (fewer approvals, a \
             longer window than the fleet's or the default 4 hours), takes an approver",
        ))
    })
}

/// Appends one entry to the fleet's change history (in the caller's transaction).
async fn write_history(
    conn: &mut sqlx::AnyConnection,
    name: &str,
    now: UnixMillis,
    caller: &Caller,
    kind: &str,
    changes: &Map<String, Value>,
) -> Result<(), OpError> {
    let text = serde_json::to_string(changes).map_err(anyhow::Error::from)?;
    db::fleet_changes::insert(conn, name, now, caller.actor.name(), kind, &text).await?;
    Ok(())
}

/// Every field of `spec`, as set by a create (`before` null) or cleared by a delete.
fn every_field(spec: &FleetSpec, created: bool) -> Map<String, Value> {
    let Ok(Value::Object(fields)) = serde_json::to_value(spec) else {
        return Map::new();
    };
    fields
        .into_iter()
        .map(|(k, v)| {
            let change = if created {
                json!({ "before": Value::Null, "after": v })
            } else {
                json!({ "before": v, "after": Value::Null })
            };
            (k, change)
        })
        .collect()
}

/// Refuses a restore config that does not exist (inside the write, so it cannot vanish
/// between the check and the save).
async fn check_restore_config(
    conn: &mut sqlx::AnyConnection,
    spec: &FleetSpec,
) -> Result<(), OpError> {
    if versions::one(
        conn,
        Family::MachineConfig,
        spec.restore_machine_config(),
        versions::Pick::Latest,
    )
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

fn spec_json(spec: &FleetSpec) -> Result<String, OpError> {
    serde_json::to_string(spec).map_err(|e| OpError::Internal(e.into()))
}

/// Creates a fleet (operator and up; an approver when it names secrets or a window longer than
/// the default). The demo seeding calls this too.
#[tracing::instrument(skip_all, fields(fleet.name = %input.name.trim()), err)]
pub async fn create(ctx: &Ctx, caller: &Caller, input: &FleetInput) -> Result<Fleet, OpError> {
    caller.require(Role::Operator)?;
    let spec = FleetSpec::parse(input, &ctx.settings.secrets)?;
    if spec.approval_ttl_hours() > crate::domain::fleet::APPROVAL_TTL_HOURS_DEFAULT
        || !spec.secrets().is_empty()
    {
        requires_approver(caller)?;
    }
    let content = spec_json(&spec)?;
    let now = ctx.clock.now();
    let by = caller.actor.name();
    let mut tx = db::begin_write(&ctx.pool).await?;
    check_restore_config(&mut tx, &spec).await?;
    check_endpoints_unclaimed(&mut tx, &spec).await?;
    let write = FleetWrite {
        name: spec.name(),
        spec: &content,
        restore_machine_config: spec.restore_machine_config(),
        at: now,
        by,
    };
    if !db::fleets::insert(&mut tx, write).await? {
        return Err(FieldError::new("name", "is already taken by another fleet").into());
    }
    // The spec holds secret sources, never values, so it can be recorded whole.
    let details = serde_json::to_value(&spec).map_err(anyhow::Error::from)?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::FleetCreated,
        "fleet",
        spec.name(),
        details,
    )
    .await?;
    let created = every_field(&spec, true);
    write_history(&mut tx, spec.name(), now, caller, "created", &created).await?;
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
) -> Result<Fleet, OpError> {
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
        .ok_or_else(|| not_found(name))?
        .try_into()?;
    check_restore_config(&mut tx, &spec).await?;
    check_endpoints_unclaimed(&mut tx, &spec).await?;
    // The approval policy binds operators: an operator may tighten it, but loosening it
    // (fewer approvals, a longer window) is an approver's decision, or an operator could
    // lower the bar just before filing.
    if spec.approvals_required() < current.spec.approvals_required()
        || spec.approval_ttl_hours() > current.spec.approval_ttl_hours()
        || spec.secrets() != current.spec.secrets()
    {
        requires_approver(caller)?;
    }
    let changed = changed_fields(&current.spec, &spec);
    if changed.is_empty() {
        return Ok(current);
    }
    let write = FleetWrite {
        name,
        spec: &content,
        restore_machine_config: spec.restore_machine_config(),
        at: now,
        by,
    };
    if !db::fleets::update(&mut tx, write).await? {
        return Err(not_found(name));
    }
    audit::record(
        &mut tx,
        caller,
        now,
        Action::FleetUpdated,
        "fleet",
        name,
        json!({ "changed": changed }),
    )
    .await?;
    write_history(&mut tx, name, now, caller, "updated", &changed).await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(Fleet {
        spec,
        created_at: current.created_at,
        updated_at: now,
        updated_by: by.to_owned(),
    })
}

/// Deletes a fleet (approver and up), refused while any of its requests is awaiting
/// approval, approved or executing: those still need the fleet's policy and secrets. An
/// approver's decision because deleting and creating the fleet again would otherwise let an
/// operator replace a policy they may only tighten (see `update`).
#[tracing::instrument(skip_all, fields(fleet.name = %name), err)]
pub async fn delete(ctx: &Ctx, caller: &Caller, name: &str) -> Result<(), OpError> {
    caller.require(Role::Approver)?;
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let current: Fleet = db::fleets::get(&mut tx, name)
        .await?
        .ok_or_else(|| not_found(name))?
        .try_into()?;
    let open = db::fleets::open_provisions(&mut tx, name).await?;
    if open > 0 {
        return Err(OpError::Conflict(format!(
            "fleet {name} has {open} open provision request(s) (pending approval, approved or \
             executing); wait for them to finish, or reject or cancel them, before deleting it"
        )));
    }
    db::fleets::delete(&mut tx, name).await?;
    let details = serde_json::to_value(&current.spec).map_err(anyhow::Error::from)?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::FleetDeleted,
        "fleet",
        name,
        details,
    )
    .await?;
    let cleared = every_field(&current.spec, false);
    write_history(&mut tx, name, now, caller, "deleted", &cleared).await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(())
}
