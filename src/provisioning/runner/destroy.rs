//! An approver destroys a failed machine's server. Nothing is ever destroyed automatically:
//! a failed server may hold what someone needs to see why it failed.

use serde_json::json;

use crate::audit::Action;
use crate::context::Ctx;
use crate::db;
use crate::db::provision_jobs::{self, MachineUpdate};
use crate::db::provisions;
use crate::domain::machine::ProviderKind;
use crate::domain::{Caller, MachineStatus, ProvisionState, Role};
use crate::error::OpError;
use crate::provider::PROVISION_LABEL;
use crate::provisioning::timeline::{self, Note};
use crate::provisioning::Plan;

/// Destroys the server of machine `idx` of request `provision_id`: approver+, only a machine
/// in `failed` with a server of a finished request, and only when the provider says the
/// server carries this request's provision label (headroom created it). The machine becomes
/// `destroyed` with its timeline line and audit entry in one transaction.
#[tracing::instrument(skip_all, fields(provision.id = provision_id, machine.idx = idx), err)]
pub async fn destroy_machine(
    ctx: &Ctx,
    caller: &Caller,
    provision_id: i64,
    idx: u32,
) -> Result<(), OpError> {
    caller.require(Role::Approver)?;
    let not_found = || OpError::NotFound(format!("machine {idx} of provision {provision_id}"));
    let (job, machine) = {
        let mut conn = ctx.pool.acquire().await?;
        let job = provisions::get(&mut conn, provision_id)
            .await?
            .ok_or_else(not_found)?;
        let machine = provisions::machines(&mut conn, provision_id)
            .await?
            .into_iter()
            .find(|m| m.idx == idx)
            .ok_or_else(not_found)?;
        (job, machine)
    };
    let finished = [
        ProvisionState::Failed.as_str(),
        ProvisionState::Succeeded.as_str(),
    ];
    if !finished.contains(&job.state.as_str()) {
        return Err(OpError::Conflict(format!(
            "provision {provision_id} is {}: only a failed or succeeded request's machines can be destroyed",
            job.state
        )));
    }
    if machine.status != MachineStatus::Failed {
        return Err(OpError::Conflict(format!(
            "machine {} is {}: only a failed machine can be destroyed",
            machine.name, machine.status
        )));
    }
    let Some(server_id) = machine.server_id else {
        return Err(OpError::Conflict(format!(
            "machine {} has no server at the provider: nothing to destroy",
            machine.name
        )));
    };
    let plan: Plan = serde_json::from_str(&job.plan)
        .map_err(|e| anyhow::anyhow!("stored plan of provision {provision_id}: {e}"))?;
    let provider = ProviderKind::parse_field("provider", &plan.provider)
        .ok()
        .and_then(|k| ctx.providers.get(k).cloned())
        .ok_or_else(|| {
            OpError::Conflict(format!(
                "provider {} is not enabled on this instance",
                plan.provider
            ))
        })?;
    let provider_error =
        |e: crate::provider::ProviderError| OpError::Conflict(format!("the provider refused: {e}"));
    // Read first: only a server that carries this request's label is ours to destroy.
    let server = provider
        .server(server_id)
        .await
        .map_err(provider_error)?
        .ok_or_else(|| {
            OpError::Conflict(format!(
                "server {server_id} no longer exists at the provider"
            ))
        })?;
    if server.labels.get(PROVISION_LABEL) != Some(&provision_id.to_string()) {
        return Err(OpError::Conflict(format!(
            "server {server_id} does not carry the label {PROVISION_LABEL}={provision_id}: \
             headroom did not create it for this request, so it is not destroyed"
        )));
    }
    provider.destroy(server_id).await.map_err(provider_error)?;
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let written = provision_jobs::set_machine(
        &mut tx,
        provision_id,
        machine.idx,
        &[MachineStatus::Failed],
        MachineStatus::Destroyed,
        &MachineUpdate {
            provider_status: Some("deleted"),
            // Why it failed stays readable after the server is gone.
            error: machine.error.as_deref(),
            ..MachineUpdate::default()
        },
        now,
    )
    .await?;
    if !written {
        // Someone destroyed it a moment ago; the provider call was harmless (already gone).
        return Err(OpError::Conflict(format!(
            "machine {} was destroyed meanwhile",
            machine.name
        )));
    }
    let details = json!({ "machine": machine.name, "idx": idx, "server_id": server_id });
    let message = format!(
        "server {server_id} of {} destroyed by {}",
        machine.name,
        caller.actor.name()
    );
    timeline::write(
        &mut tx,
        Note {
            event: db::provision_events::NewEvent {
                provision_id,
                at: now,
                kind: "machine",
                machine: Some(&machine.name),
                message: &message,
                details: &details,
            },
            actor: &caller.actor,
            action: Action::ProvisionMachineDestroyed,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
