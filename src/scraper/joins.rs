//! After an ok sample, the host names of a fleet's members, for the requests whose created
//! machines wait to join it (`provisioning::joins`). Asked only while something waits, each
//! member once per sample through the scrape client (so through the outbound policy), at most
//! `derived::NODE_CONCURRENCY` at once and within `JOIN_LOOKUP_TIMEOUT`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{derived, fetch, node};
use crate::context::Ctx;
use crate::domain::capacity::{Member, Observation};
use crate::domain::UnixMillis;
use crate::provisioning::joins::{self, NamedMember};

/// How long the host-name lookups after one sample may take together.
pub const JOIN_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Records the joins `obs` shows for `fleet`'s waiting machines. Never fails the sample: a
/// lookup that fails is tried again after the next one.
pub async fn follow(ctx: &Ctx, fleet: &str, obs: &Observation, at: UnixMillis) {
    let waiting = match joins::awaiting(ctx, fleet).await {
        Ok(w) if w.is_empty() => return,
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(fleet.name = %fleet, error = %e, "machines awaiting a join not read");
            return;
        }
    };
    let Some(base) = obs.leader_url.as_deref() else {
        return;
    };
    let names = host_names(
        ctx,
        &obs.members,
        base,
        Instant::now() + JOIN_LOOKUP_TIMEOUT,
    )
    .await;
    match joins::record_joins(ctx, fleet, &names, at).await {
        Ok(0) => {
            tracing::debug!(fleet.name = %fleet, waiting = waiting.len(), "no awaited machine among the members yet")
        }
        Ok(n) => tracing::info!(fleet.name = %fleet, joined = n, "machines joined their fleet"),
        Err(e) => tracing::warn!(fleet.name = %fleet, error = %e, "joins not recorded"),
    }
}

/// Each member's published host name; members that do not answer, or answer something that
/// is not a host name, are left out.
async fn host_names(
    ctx: &Ctx,
    members: &[Member],
    given_base: &str,
    deadline: Instant,
) -> Vec<NamedMember> {
    let permits = Arc::new(tokio::sync::Semaphore::new(derived::NODE_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for (id, base) in derived::node_bases(members, given_base) {
        let client = ctx.scrape_client.clone();
        let permits = permits.clone();
        tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let _permit = permits.acquire_owned().await.ok()?;
            let answer = fetch::get(&client, &format!("{base}/node"), deadline)
                .await
                .ok()?;
            let host_name = node::parse_host_name(answer.status, &answer.body).ok()?;
            Some(NamedMember {
                id: i64::try_from(id).ok()?,
                host_name,
            })
        });
    }
    let mut names = Vec::new();
    while let Some(done) = tasks.join_next().await {
        if let Ok(Some(named)) = done {
            names.push(named);
        }
    }
    names
}
