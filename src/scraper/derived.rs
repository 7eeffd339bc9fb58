//! Derived headroom, for yubaba builds whose `/raft/status` has no `headroom` section: spare
//! is counted from each member's `/node` and `/node/usage` (yubaba's own rule), required from
//! the regions the fleet's machine configs span (the rule is
//! `domain::capacity::required_spares`: N+2 when a whole region can vanish).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{fetch, node, urls};
use crate::context::Ctx;
use crate::domain::capacity::Member;
use crate::domain::fleet::FleetSpec;
use crate::domain::{Caller, ProvisionState};

/// Members asked at once within one fleet's tick.
pub const NODE_CONCURRENCY: usize = 8;

/// Per-node GETs one tick may send at most (two per node, for at most as many nodes as a
/// status may list members): a status can never turn one tick into a scan.
pub const MAX_NODE_GETS: usize = 2 * super::status::MAX_MEMBERS;

/// The usage window passed to `/node/usage` (without one, the node measures CPU against
/// whoever polled last).
pub const USAGE_WINDOW_MS: u32 = 500;

/// How long a fleet loop keeps the regions of its machine configs before reading them again:
/// they change when a config is edited or a provision succeeds, rarely within minutes.
pub const REGIONS_REFRESH: Duration = Duration::from_secs(300);

/// The distinct nodes to ask: each usable member address as a base URL, once. Members that
/// publish the same address (after normalising: scheme, host and port of the base URL) are
/// one machine answering under several ids, so it is asked once and can count as at most one
/// spare; listing an idle node many times must not multiply headroom. Keeps the first id
/// seen for each base (for the log), in member order, and at most `MAX_NODE_GETS / 2`.
pub fn node_bases(members: &[Member], given_base: &str) -> Vec<(u64, String)> {
    let mut seen = BTreeSet::new();
    let mut bases = Vec::new();
    for m in members {
        let Some(base) = urls::member_base(&m.addr, given_base) else {
            tracing::info!(node.id = m.id, "member address unusable; not spare");
            continue;
        };
        if !seen.insert(base.clone()) {
            tracing::info!(
                node.id = m.id,
                "member shares another member's address; counted once"
            );
            continue;
        }
        if bases.len() == MAX_NODE_GETS / 2 {
            tracing::info!(node.id = m.id, "per-node request budget spent; not asked");
            continue;
        }
        bases.push((m.id, base));
    }
    bases
}

/// Counts the spare nodes: each distinct node (`node_bases`) asked for `/node` and
/// `/node/usage` (at most `NODE_CONCURRENCY` at once, all before `deadline`), and writes what
/// each answered into its member (`tenants`, `capacity_published`: what the member list's
/// roles are read from). A node that fails to answer, or answers something unreadable, is not
/// spare, and the sample stays ok: an unreachable node cannot take a tenant, so counting it
/// out is the truth about headroom, while failing the whole sample would hide a real deficit
/// behind a gap. Members not asked (an unusable or shared address) keep no reading.
pub async fn count_spares(
    ctx: &Ctx,
    members: &mut [Member],
    given_base: &str,
    deadline: Instant,
) -> u32 {
    let permits = Arc::new(tokio::sync::Semaphore::new(NODE_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for (id, base) in node_bases(members, given_base) {
        let client = ctx.scrape_client.clone();
        let permits = permits.clone();
        tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let _permit = permits.acquire_owned().await.ok()?;
            let load = member_load(&client, &base, deadline).await;
            if let Some(reason) = &load.problem {
                tracing::info!(node.id = id, reason = %reason, "member not counted as spare");
            }
            Some((id, load))
        });
    }
    let mut spare = 0;
    while let Some(done) = tasks.join_next().await {
        let Ok(Some((id, load))) = done else { continue };
        if load.is_spare() {
            spare += 1;
        }
        // The first member at a base is the one asked (`node_bases` keeps the first id).
        if let Some(m) = members.iter_mut().find(|m| m.id == id) {
            m.tenants = load.usage.map(|u| u.workloads);
            m.capacity_published = load.capacity.map(|c| c.published());
        }
    }
    spare
}

/// What one node answered: each reading that came back, and the first problem, if any.
struct NodeLoad {
    capacity: Option<node::NodeCapacity>,
    usage: Option<node::NodeUsage>,
    problem: Option<String>,
}

impl NodeLoad {
    /// yubaba's rule, on readings that all came back.
    fn is_spare(&self) -> bool {
        matches!((&self.capacity, &self.usage), (Some(c), Some(u)) if node::is_spare(c, u))
    }
}

async fn member_load(
    client: &crate::outbound::OutboundClient,
    base: &str,
    deadline: Instant,
) -> NodeLoad {
    let node_url = format!("{base}/node");
    let usage_url = format!("{base}/node/usage?window_ms={USAGE_WINDOW_MS}");
    let (cap, usage) = tokio::join!(
        fetch::get(client, &node_url, deadline),
        fetch::get(client, &usage_url, deadline)
    );
    let cap = cap
        .map_err(|e| e.to_string())
        .and_then(|a| node::parse_node(a.status, &a.body).map_err(|e| e.to_string()));
    let usage = usage
        .map_err(|e| e.to_string())
        .and_then(|a| node::parse_usage(a.status, &a.body).map_err(|e| e.to_string()));
    let problem = cap.as_ref().err().or(usage.as_ref().err()).cloned();
    NodeLoad {
        capacity: cap.ok(),
        usage: usage.ok(),
        problem,
    }
}

/// The regions of a fleet's machine configs, kept by its loop between refreshes.
#[derive(Debug, Default)]
pub struct Regions {
    read: Option<(Instant, BTreeSet<String>)>,
}

impl Regions {
    /// The regions, read again when older than `REGIONS_REFRESH`. A failed read keeps the
    /// last known regions (logged); with none known yet, the error is the sample's.
    pub async fn get(&mut self, ctx: &Ctx, fleet: &FleetSpec) -> Result<&BTreeSet<String>, String> {
        let fresh = self
            .read
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < REGIONS_REFRESH);
        if !fresh {
            match read_regions(ctx, fleet).await {
                Ok(regions) => self.read = Some((Instant::now(), regions)),
                Err(e) if self.read.is_some() => {
                    tracing::warn!(fleet.name = %fleet.name(), error = %e, "machine config regions not refreshed; keeping the last ones");
                }
                Err(e) => {
                    tracing::warn!(fleet.name = %fleet.name(), error = %e, "machine config regions unreadable");
                    return Err("could not read the fleet's machine configs".into());
                }
            }
        }
        Ok(&self.read.as_ref().expect("set above").1)
    }
}

/// Requests read per page when collecting a fleet's succeeded provisions.
const PAGE: u32 = 200;

/// The regions of the fleet's restore config (latest version) and of the config version each
/// of its succeeded provisions used (the machines that exist).
async fn read_regions(ctx: &Ctx, fleet: &FleetSpec) -> anyhow::Result<BTreeSet<String>> {
    let system = Caller::system();
    let mut wanted: BTreeSet<(String, Option<i64>)> = BTreeSet::new();
    wanted.insert((fleet.restore_machine_config().to_string(), None));
    let filter = crate::provisioning::ProvisionFilter {
        fleet: Some(fleet.name().to_string()),
        state: Some(ProvisionState::Succeeded),
        ..Default::default()
    };
    let mut cursor = None;
    loop {
        let (page, next) =
            crate::provisioning::requests::list(ctx, &system, &filter, cursor, PAGE).await?;
        for p in page {
            wanted.insert((p.machine_config.into(), Some(p.config_version)));
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut regions = BTreeSet::new();
    let names: BTreeSet<&String> = wanted.iter().map(|(n, _)| n).collect();
    for name in names {
        let history = match crate::machine_setup::configs::history(ctx, &system, name).await {
            Ok(h) => h,
            // A restore config renamed away is no longer a region the fleet spans.
            Err(crate::error::OpError::NotFound(_)) => continue,
            Err(e) => return Err(anyhow::anyhow!("machine config {name}: {e}")),
        };
        for (want, version) in wanted.iter().filter(|(n, _)| n == name) {
            debug_assert_eq!(want, name);
            // Newest first; an unknown version falls back to the newest.
            let v = version
                .and_then(|ver| history.iter().find(|(c, _)| c.version == ver))
                .unwrap_or(&history[0]);
            regions.insert(v.0.spec.region.clone());
        }
    }
    Ok(regions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, addr: &str) -> Member {
        Member::listed(id, addr, true)
    }

    #[test]
    fn members_at_one_address_are_one_node_and_unusable_addresses_are_skipped() {
        let given = "http://127.0.0.1:7000";
        let members = [
            member(1, "127.0.0.1:7001"),
            member(2, "127.0.0.1:7001"),
            member(3, "localhost:7002"),
            member(4, "h/x:1"),
            member(5, "0.0.0.0:9"),
            member(6, "127.0.0.1:7000"),
            member(7, "127.0.0.1:7002"),
        ];
        assert_eq!(
            node_bases(&members, given),
            [
                (1, "http://127.0.0.1:7001".to_owned()),
                (3, "http://localhost:7002".to_owned()),
                (5, given.to_owned()),
                (7, "http://127.0.0.1:7002".to_owned()),
            ]
        );
    }

    #[test]
    fn the_per_node_request_budget_caps_distinct_nodes() {
        let members: Vec<Member> = (0..1000)
            .map(|i| member(i, &format!("127.0.0.{}:{}", i % 250 + 1, 7000 + i)))
            .collect();
        let bases = node_bases(&members, "http://127.0.0.1:1");
        assert_eq!(bases.len() * 2, MAX_NODE_GETS);
        assert_eq!(bases[0].0, 0);
    }
}
