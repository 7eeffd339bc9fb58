//! The real payloads of a request, rendered again right before execution through
//! `plan::recheck`: the plan's EXACT config and template versions with the fleet's CURRENT
//! secrets, compared by plan hash. They live only in memory.

use std::collections::HashMap;

use secrecy::SecretString;

use crate::context::Ctx;
use crate::db::provisions::ProvisionRow;
use crate::db::versions::{self, Family};
use crate::domain::machine::MachineSpec;
use crate::provisioning::plan::{self, Currency};

/// What the machines of a request are created from.
pub(super) struct Payloads {
    /// The config version the plan was made for (ssh keys, labels).
    pub spec: MachineSpec,
    /// Real payload by machine name.
    pub by_name: HashMap<String, SecretString>,
}

/// Why the plan can no longer be executed as approved (for `state_reason`).
pub(super) type Stale = String;

/// Renders every machine of request `job` again; `Err(stale)` when the result is not the
/// approved plan (newer versions, a rotated secret, a payload that no longer validates).
pub(super) async fn render(
    ctx: &Ctx,
    job: &ProvisionRow,
) -> anyhow::Result<Result<Payloads, Stale>> {
    let provision = super::provision(ctx, job.id).await?;
    let rerendered = match plan::recheck(ctx, &provision)
        .await
        .map_err(anyhow::Error::new)?
    {
        Currency::Superseded(why) => return Ok(Err(why)),
        Currency::Current(r) if !r.ok => {
            return Ok(Err(
                "a payload rendered now no longer passes validation".to_owned()
            ))
        }
        Currency::Current(r) => r,
    };
    let config = {
        let mut conn = ctx.pool.acquire().await?;
        versions::one(
            &mut conn,
            Family::MachineConfig,
            &job.machine_config,
            versions::Pick::Exact(job.config_version),
        )
        .await?
    };
    let Some(config) = config else {
        return Ok(Err("the plan's config version no longer exists".to_owned()));
    };
    let spec: MachineSpec = serde_json::from_str(&config.content).map_err(|e| {
        anyhow::anyhow!(
            "stored spec of {} v{}: {e}",
            job.machine_config,
            job.config_version
        )
    })?;
    let by_name = provision
        .plan
        .machines
        .iter()
        .map(|m| m.name.clone())
        .zip(rerendered.payloads)
        .collect();
    Ok(Ok(Payloads { spec, by_name }))
}
