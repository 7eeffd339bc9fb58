//! The plan checks of a stored request: the facts gathered from what headroom holds (the
//! fleet, the exact config version the plan uses, the remembered pin verdict, the cached
//! catalogue, the fleet's machines that still run, each payload as shown to the approver),
//! decided by `domain::plan_check`. Read on the caller's connection, so approval
//! decides inside its own write transaction from what it commits against.

use sqlx::AnyConnection;

use super::plan::config_version;
use super::Provision;
use crate::cloud_init::pin::VerdictKind;
use crate::context::Ctx;
use crate::db;
use crate::db::versions::{self, Family};
use crate::domain::fleet::FleetSpec;
use crate::domain::machine::MachineSpec;
use crate::domain::money::Amount;
use crate::domain::plan_check::{self, CheckFacts, OfferFacts, PinFacts, PlanCheck, RunningFacts};
use crate::domain::plan_check_blocking::{self, BlockingChecks};
use crate::domain::UnixMillis;
use crate::error::OpError;
use crate::machine_setup::catalogue;
use crate::machine_setup::pins::{self, PinCheck};

/// The checks of request `p` as of `now`, in the order the page lists them, each warning
/// of a check `blocking` names raised to a block.
pub async fn of(
    conn: &mut AnyConnection,
    p: &Provision,
    now: UnixMillis,
    blocking: &BlockingChecks,
) -> Result<Vec<PlanCheck>, OpError> {
    let fleet = match db::fleets::get(conn, &p.fleet).await? {
        Some(r) => Some(FleetSpec::from_stored(&r.name, &r.spec).map_err(anyhow::Error::from)?),
        None => None,
    };
    let max_restore_machines = fleet.as_ref().map(FleetSpec::max_restore_machines);
    let monthly_budget = fleet.as_ref().and_then(FleetSpec::monthly_budget);
    let running = running(conn, p).await?;
    let firewall = db::provisions::redacted_payloads(conn, p.id)
        .await?
        .iter()
        .map(|payload| crate::cloud_init::firewall::read(payload))
        .collect();
    let spec = config_spec(conn, p).await?;
    let (url, sha256) = (
        spec.yubaba_url.as_str().to_owned(),
        spec.yubaba_sha256.as_str(),
    );
    let pin = match db::pins::get(conn, &url, sha256).await? {
        None => PinFacts::NotChecked,
        Some(row) => {
            let c = PinCheck::try_from(row)?;
            match c.verdict {
                VerdictKind::Verified => PinFacts::Verified { at: c.checked_at },
                VerdictKind::Mismatch => PinFacts::Mismatch {
                    at: c.checked_at,
                    message: c.message,
                },
                VerdictKind::Error => PinFacts::Failed {
                    at: c.checked_at,
                    message: c.message,
                },
            }
        }
    };
    let rows = db::catalogue::for_provider(conn, &p.plan.provider).await?;
    let (cat, fetched_at) = catalogue::from_rows(rows);
    let offer = fetched_at.map(|fetched_at| {
        let t = cat
            .server_types
            .iter()
            .find(|t| t.name == p.plan.server_type);
        OfferFacts {
            type_locations: t.map(|t| t.monthly_price.iter().map(|(l, _)| l.clone()).collect()),
            type_deprecated: t.is_some_and(|t| t.deprecated),
            image_listed: cat.images.iter().any(|i| i.name == p.plan.image),
            fetched_at,
        }
    });
    let checks = plan_check::decide(&CheckFacts {
        count: p.count,
        proposal: p.requester == crate::domain::Actor::System.name(),
        max_restore_machines,
        ssh_keys: spec.ssh_keys.len(),
        pin_url: url,
        pin,
        provider: p.plan.provider.clone(),
        location: p.plan.location.clone(),
        server_type: p.plan.server_type.clone(),
        image: p.plan.image.clone(),
        offer,
        monthly_cost: p.plan.monthly_cost.clone(),
        currency: p.plan.currency.clone(),
        monthly_budget,
        running,
        firewall,
        now,
    });
    Ok(plan_check_blocking::escalate(checks, blocking))
}

/// The exact config version request `p` was planned from.
async fn config_spec(conn: &mut AnyConnection, p: &Provision) -> Result<MachineSpec, OpError> {
    let version = versions::one(
        conn,
        Family::MachineConfig,
        &p.machine_config,
        versions::Pick::Exact(p.config_version),
    )
    .await?
    .ok_or_else(|| {
        OpError::Internal(anyhow::anyhow!(
            "provision {}: machine config {} v{} is gone",
            p.id,
            p.machine_config,
            p.config_version
        ))
    })?;
    Ok(config_version(version)?.spec)
}

/// The (url, sha256) pin of the config version request `p` uses.
pub async fn pin_of(conn: &mut AnyConnection, p: &Provision) -> Result<(String, String), OpError> {
    let spec = config_spec(conn, p).await?;
    Ok((
        spec.yubaba_url.as_str().to_owned(),
        spec.yubaba_sha256.as_str().to_owned(),
    ))
}

/// A just-filed request's pin check, run apart from the filing (a slow download never holds
/// the person filing); its verdict is stored and audited like any other. A failure to store
/// it is logged: the plan check then still says "not checked".
pub async fn check_pin(ctx: Ctx, url: String, sha256: String) {
    match pins::check_for_request(&ctx, &url, &sha256).await {
        Ok(Some(outcome)) if !outcome.ok() => {
            tracing::warn!(%url, message = %outcome.check.message, "a new request's pin did not verify");
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!(%url, error = %e, "a new request's pin check could not be stored")
        }
    }
}

/// What the fleet's machines from its other requests cost a month while they still run.
async fn running(conn: &mut AnyConnection, p: &Provision) -> Result<RunningFacts, OpError> {
    let rows = db::provisions::running_machines_of_fleet(conn, p.fleet.as_ref(), p.id).await?;
    let mut facts = RunningFacts {
        machines: 0,
        monthly: Amount::ZERO,
    };
    for (count, price) in rows {
        let count = u32::try_from(count).unwrap_or(u32::MAX);
        let each = Amount::parse(&price).map_err(|e| {
            OpError::Internal(anyhow::anyhow!("a stored plan of fleet {}: {e}", p.fleet))
        })?;
        facts.machines = facts.machines.saturating_add(count);
        facts.monthly = facts
            .monthly
            .plus(each.times(count))
            .ok_or_else(|| OpError::Internal(anyhow::anyhow!("monthly costs overflow")))?;
    }
    Ok(facts)
}
