//! Derived headroom, for yubaba builds whose `/raft/status` has no `headroom` section: spare
//! is counted from each member's `/node` and `/node/usage` (yubaba's own rule), required from
//! the regions the members declare or, unless every member declares one, the larger count of
//! those and the regions the fleet's machine configs span (the rule is
//! `domain::capacity::required_spares`: N+2 when a whole region can vanish).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{fetch, node, urls, workloads};
use crate::context::Ctx;
use crate::domain::absorption::{MemberLoad, Resources, RestoreMachine};
use crate::domain::capacity::Member;
use crate::domain::fleet::FleetSpec;
use crate::domain::{Caller, ProvisionState};

/// Members asked at once within one fleet's tick.
pub const NODE_CONCURRENCY: usize = 8;

/// Per-node GETs one tick may send at most (three per node, for at most as many nodes as a
/// status may list members): a status can never turn one tick into a scan.
pub const MAX_NODE_GETS: usize = GETS_PER_NODE * super::status::MAX_MEMBERS;

/// `/node`, `/node/usage` and `/workloads`.
pub const GETS_PER_NODE: usize = 3;

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
/// seen for each base (for the log), in member order, and at most `MAX_NODE_GETS / GETS_PER_NODE`.
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
        if bases.len() == MAX_NODE_GETS / GETS_PER_NODE {
            tracing::info!(node.id = m.id, "per-node request budget spent; not asked");
            continue;
        }
        bases.push((m.id, base));
    }
    bases
}

/// What reading the members gave: yubaba's spare count, and each asked member's load for
/// absorption headroom.
#[derive(Debug, Default)]
pub struct MemberReads {
    /// Spare nodes by yubaba's rule.
    pub spare: u32,
    /// One per node asked, in id order (`live` when `/node` and `/node/usage` answered).
    pub loads: Vec<MemberLoad>,
}

/// Reads the members: each distinct node (`node_bases`) asked for `/node`, `/node/usage` and
/// `/workloads` (at most `NODE_CONCURRENCY` nodes at once, all before `deadline`), counting
/// spares by yubaba's rule and writing what each answered into its member (`tenants`,
/// `capacity_published`: what the member list's roles are read from). A node that fails to
/// answer, or answers something unreadable, is not spare and receives no workload, and the
/// sample stays ok: an unreachable node cannot take a tenant, so counting it out is the truth
/// about headroom, while failing the whole sample would hide a real deficit behind a gap. A
/// failed `/workloads` alone leaves the node's sizes unknown (its committed total is packed).
/// Members not asked (an unusable or shared address) keep no reading.
pub async fn read_members(
    ctx: &Ctx,
    members: &mut [Member],
    given_base: &str,
    deadline: Instant,
) -> MemberReads {
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
    let mut reads = MemberReads::default();
    while let Some(done) = tasks.join_next().await {
        let Ok(Some((id, load))) = done else { continue };
        if load.is_spare() {
            reads.spare += 1;
        }
        // The first member at a base is the one asked (`node_bases` keeps the first id).
        if let Some(m) = members.iter_mut().find(|m| m.id == id) {
            m.tenants = load.usage.as_ref().map(|u| u.workloads);
            m.capacity_published = load.capacity.as_ref().map(|c| c.published());
            // A member that did not answer goes in as not live: absorption judges it as
            // already lost (it receives nothing) while its region still counts, and says so.
            reads.loads.push(load.for_absorption(m));
        }
    }
    reads.loads.sort_by_key(|l| l.id);
    reads
}

/// What one node answered: each reading that came back, and the first problem, if any.
struct NodeLoad {
    capacity: Option<node::NodeCapacity>,
    usage: Option<node::NodeUsage>,
    workloads: Option<workloads::NodeWorkloads>,
    problem: Option<String>,
}

impl NodeLoad {
    /// yubaba's rule, on readings that all came back.
    fn is_spare(&self) -> bool {
        matches!((&self.capacity, &self.usage), (Some(c), Some(u)) if node::is_spare(c, u))
    }

    /// The member as absorption packs it: live when `/node` and `/node/usage` both answered.
    fn for_absorption(&self, member: &Member) -> MemberLoad {
        MemberLoad {
            id: member.id,
            region: member.region.clone(),
            live: self.capacity.is_some() && self.usage.is_some(),
            allocatable: self.capacity.as_ref().and_then(|c| c.allocatable()),
            committed: self
                .usage
                .as_ref()
                .and_then(|u| u.committed)
                .unwrap_or_default(),
            workloads: self.workloads.as_ref().and_then(|w| w.sizes.clone()),
        }
    }
}

async fn member_load(
    client: &crate::outbound::OutboundClient,
    base: &str,
    deadline: Instant,
) -> NodeLoad {
    let node_url = format!("{base}/node");
    let usage_url = format!("{base}/node/usage?window_ms={USAGE_WINDOW_MS}");
    let workloads_url = format!("{base}/workloads");
    // One after another, so a node sees one connection from us (the pool keeps it for the
    // next tick) rather than three: a thousand fleets then hold one socket per node, inside
    // an ordinary open-file limit, and members doing real work are asked politely. Nodes are
    // still read `NODE_CONCURRENCY` at a time.
    let cap = fetch::get(client, &node_url, deadline).await;
    let usage = fetch::get(client, &usage_url, deadline).await;
    let listed = fetch::get(client, &workloads_url, deadline).await;
    let cap = cap
        .map_err(|e| e.to_string())
        .and_then(|a| node::parse_node(a.status, &a.body).map_err(|e| e.to_string()));
    let usage = usage
        .map_err(|e| e.to_string())
        .and_then(|a| node::parse_usage(a.status, &a.body).map_err(|e| e.to_string()));
    let listed = listed.map_err(|e| e.to_string()).and_then(|a| {
        workloads::parse_workloads(a.status, workloads::WorkloadSource::of(&a.headers), &a.body)
            .map_err(|e| e.to_string())
    });
    if let Err(reason) = &listed {
        tracing::info!(reason = %reason, "workloads not read; committed totals are packed");
    }
    let problem = cap.as_ref().err().or(usage.as_ref().err()).cloned();
    NodeLoad {
        capacity: cap.ok(),
        usage: usage.ok(),
        workloads: listed.ok(),
        problem,
    }
}

/// The regions of a fleet's machine configs, and the machine its restore config makes, kept
/// by its loop between refreshes.
#[derive(Debug, Default)]
pub struct Regions {
    read: Option<(Instant, FleetConfigs)>,
}

/// What a fleet's machine configs say, read together.
#[derive(Debug, Clone, Default)]
struct FleetConfigs {
    regions: BTreeSet<String>,
    restore: Option<RestoreMachine>,
}

impl Regions {
    /// The regions, read again when older than `REGIONS_REFRESH`. A failed read keeps the
    /// last known regions (logged); with none known yet, the error is the sample's.
    pub async fn get(&mut self, ctx: &Ctx, fleet: &FleetSpec) -> Result<&BTreeSet<String>, String> {
        Ok(&self.configs(ctx, fleet).await?.regions)
    }

    /// The machine the fleet's restore config (latest version) makes, as absorption adds it:
    /// `None` when the config declares no allocatable memory and CPU (nothing can then say how
    /// many machines would close a shortfall) or could not be read.
    pub async fn restore(&mut self, ctx: &Ctx, fleet: &FleetSpec) -> Option<RestoreMachine> {
        self.configs(ctx, fleet).await.ok()?.restore.clone()
    }

    async fn configs(&mut self, ctx: &Ctx, fleet: &FleetSpec) -> Result<&FleetConfigs, String> {
        let fresh = self
            .read
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < REGIONS_REFRESH);
        if !fresh {
            match read_configs(ctx, fleet).await {
                Ok(configs) => self.read = Some((Instant::now(), configs)),
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
/// of its succeeded provisions used (the machines that exist), and the restore config's
/// machine.
async fn read_configs(ctx: &Ctx, fleet: &FleetSpec) -> anyhow::Result<FleetConfigs> {
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
    let mut configs = FleetConfigs::default();
    let names: BTreeSet<&String> = wanted.iter().map(|(n, _)| n).collect();
    for name in names {
        let history = match crate::machine_setup::configs::history(ctx, &system, name).await {
            Ok(h) => h,
            // A restore config renamed away is no longer a region the fleet spans.
            Err(crate::error::OpError::NotFound(_)) => continue,
            Err(e) => return Err(anyhow::anyhow!("machine config {name}: {e}")),
        };
        if name.as_str() == fleet.restore_machine_config().as_str() {
            let spec = &history[0].0.spec;
            configs.restore = match (spec.allocatable.memory_mb, spec.allocatable.cpu_millis) {
                (Some(m), Some(c)) => Some(RestoreMachine {
                    allocatable: Resources::new(m, c),
                    region: Some(spec.region.clone()),
                }),
                _ => None,
            };
        }
        for (want, version) in wanted.iter().filter(|(n, _)| n == name) {
            debug_assert_eq!(want, name);
            // Newest first; an unknown version falls back to the newest.
            let v = version
                .and_then(|ver| history.iter().find(|(c, _)| c.version == ver))
                .unwrap_or(&history[0]);
            configs.regions.insert(v.0.spec.region.clone());
        }
    }
    Ok(configs)
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
        assert_eq!(bases.len() * GETS_PER_NODE, MAX_NODE_GETS);
        assert_eq!(bases[0].0, 0);
    }
}
