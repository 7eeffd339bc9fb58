//! The scraper: one loop per fleet asks any reachable endpoint for `/raft/status`, follows
//! `current_leader` to the leader, reads the `headroom` section (native) or each member's
//! `/node` and `/node/usage` (derived), and hands one `Sample` per tick to
//! `crate::capacity::record::record`. Every fetch goes through the outbound policy for
//! scraping; every failure is an error sample (a gap), never a crash and never "healthy".

pub mod derived;
pub mod evidence;
pub mod fetch;
pub mod joins;
pub mod node;
pub mod stats;
pub mod status;
pub mod supervisor;
pub mod text;
pub mod urls;
pub mod workloads;

use std::time::Duration;

use tokio::time::Instant;

use crate::context::Ctx;
use crate::domain::absorption::{self, Absorption, MemberLoad};
use crate::domain::capacity::{required_spares, Observation, Sample, Source};
use crate::domain::fleet::FleetSpec;
use status::{HeadroomSection, RaftStatus};

pub use stats::ScrapeStats;
pub use supervisor::run_until_stopped;

/// Scrapes `fleet` once: one sample, ok or with a coarse reason, within the fleet's
/// `scrape_timeout_secs` (one deadline for the whole tick: the endpoints, the leader hop and
/// every per-node call). Reads the regions of its machine configs afresh when it needs them.
pub async fn scrape_once(ctx: &Ctx, fleet: &FleetSpec) -> Sample {
    scrape_with(ctx, fleet, &mut derived::Regions::default()).await
}

/// `scrape_once` with the fleet loop's cache of machine config regions.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet.name()))]
pub async fn scrape_with(ctx: &Ctx, fleet: &FleetSpec, regions: &mut derived::Regions) -> Sample {
    let at = ctx.now();
    let started = Instant::now();
    let timeout = Duration::from_secs(u64::from(fleet.scrape_timeout_secs().max(1)));
    let deadline = started + timeout;
    let outcome =
        match tokio::time::timeout_at(deadline, observe(ctx, fleet, timeout, deadline, regions))
            .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err("timed out".to_owned()),
        };
    // Every error of a sample passes the one cleaner here, where the sample is built: it is
    // stored every tick and shown to every viewer, and parts of it may come from a node.
    let outcome = outcome.map_err(|reason| text::clean_error(&reason));
    if let Err(reason) = &outcome {
        tracing::info!(reason = %reason, "scrape failed");
    }
    Sample {
        at,
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        outcome,
    }
}

async fn observe(
    ctx: &Ctx,
    fleet: &FleetSpec,
    timeout: Duration,
    deadline: Instant,
    regions: &mut derived::Regions,
) -> Result<Observation, String> {
    let (leader, leader_url) = find_leader(ctx, fleet, deadline).await?;
    let mut members = leader.members.clone();
    // Members get a little less than the tick's deadline, so a hung node is counted out (not
    // spare, its load unread) and the sample still arrives, instead of the whole tick timing
    // out because of one member.
    let margin = (timeout / 10).max(Duration::from_millis(100));
    let node_deadline = deadline
        .checked_sub(margin)
        .unwrap_or(deadline)
        .max(Instant::now());
    let reads;
    let (source, spare, required) = match &leader.headroom {
        HeadroomSection::Present {
            spare, required, ..
        } => {
            // yubaba's own count is the number; each member is still read, so the member list
            // can say which one is the spare and what the others carry, and absorption can
            // pack.
            reads = derived::read_members(ctx, &mut members, &leader_url, node_deadline).await;
            (
                Source::Native,
                *spare,
                fleet.required_override().unwrap_or(*required),
            )
        }
        // Derived mode is for builds without the check. A leader that has the check but has
        // not run it yet (the first evaluation waits ten election timeouts) would be given a
        // number by a different rule that it may contradict a moment later: a gap is honest.
        HeadroomSection::Null => return Err("leader has not evaluated headroom yet".to_owned()),
        HeadroomSection::Absent => {
            // yubaba's own rule counts the regions its members declare. Where some member
            // declares none (older builds, a mixed roll), the fleet's machine configs stand
            // in, and the larger count wins: a half-labelled fleet never drops to N+1.
            let declared = leader.declared_regions().len();
            let every_member_declares =
                !leader.members.is_empty() && leader.members.iter().all(|m| m.region.is_some());
            let required = match fleet.required_override() {
                Some(r) => r,
                None if every_member_declares => required_spares(None, declared),
                None => {
                    let configs = regions.get(ctx, fleet).await?.len();
                    required_spares(None, declared.max(configs))
                }
            };
            reads = derived::read_members(ctx, &mut members, &leader_url, node_deadline).await;
            (Source::Derived, reads.spare, required)
        }
    };
    let absorption = assess_absorption(ctx, fleet, &reads.loads, regions).await;
    Ok(Observation {
        source,
        spare,
        required,
        leader_id: Some(leader.node_id),
        leader_url: Some(leader_url),
        term: leader.current_term,
        evidence: evidence::bounded(&leader),
        members,
        absorption,
    })
}

/// Absorption headroom from the members read (`None` when none was). Regions are the ones
/// members declare (in raft's `nodes` entries, else yubaba's top-level `members` map); on older
/// builds, which declare none, no region loss is judged, only node losses.
async fn assess_absorption(
    ctx: &Ctx,
    fleet: &FleetSpec,
    loads: &[MemberLoad],
    regions: &mut derived::Regions,
) -> Option<Absorption> {
    if loads.is_empty() {
        return None;
    }
    let restore = regions.restore(ctx, fleet).await;
    // Packing a big fleet's workloads is CPU work bounded by the member and workload caps,
    // yet milliseconds for a hostile one: it runs on the blocking pool, off the async workers
    // that serve pages and drive other fleets' scrapes.
    let loads = loads.to_vec();
    tokio::task::spawn_blocking(move || absorption::assess(&loads, restore.as_ref()))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "absorption assessment did not finish");
            None
        })
}

/// The leader's status and base URL. The fleet's endpoints are asked in order: an answer
/// from the leader ends the search; an answer naming another node as leader is followed by
/// one hop; anything else (no answer, no leader known, a hop that fails) moves on to the next
/// endpoint, which may itself be the leader or know a reachable one. So at most two requests
/// per endpoint, all within the tick's one deadline. When every endpoint failed, the first
/// endpoint's reason (the fleet's order is its preference), with how many others failed too.
async fn find_leader(
    ctx: &Ctx,
    fleet: &FleetSpec,
    deadline: Instant,
) -> Result<(RaftStatus, String), String> {
    let mut first_error = None;
    for endpoint in fleet.endpoints() {
        match leader_via(ctx, urls::trimmed(endpoint), deadline).await {
            Ok(found) => return Ok(found),
            Err(e) => {
                tracing::info!(endpoint = %endpoint, reason = %e, "no leader through endpoint");
                first_error.get_or_insert(e);
            }
        }
    }
    let first = first_error.unwrap_or_else(|| "no endpoint configured".to_owned());
    Err(match fleet.endpoints().len() {
        0 | 1 => first,
        n => format!("{first} (and {} other endpoints failed)", n - 1),
    })
}

/// The leader as seen through one configured endpoint `given`: the endpoint itself when it
/// leads, else the leader it names, asked once.
async fn leader_via(
    ctx: &Ctx,
    given: &str,
    deadline: Instant,
) -> Result<(RaftStatus, String), String> {
    let first = status_of(ctx, given, true, deadline).await?;
    if first.is_leader() {
        return Ok((first, given.to_owned()));
    }
    follow_leader(ctx, &first, given, deadline).await
}

/// `/raft/status` of `base`; `configured` when `base` is one of the fleet's endpoints (then
/// yubaba's "raft not configured" 503 text is shown).
async fn status_of(
    ctx: &Ctx,
    base: &str,
    configured: bool,
    deadline: Instant,
) -> Result<RaftStatus, String> {
    let answer = fetch::get(&ctx.scrape_client, &format!("{base}/raft/status"), deadline)
        .await
        .map_err(|e| e.to_string())?;
    status::parse_answer(answer.status, &answer.body, configured).map_err(|e| e.to_string())
}

/// One hop from a node that is not the leader to the leader it names. The leader's address
/// is fleet-supplied, so it goes through the same policy as the endpoint (a link-local
/// address is refused before any connect).
async fn follow_leader(
    ctx: &Ctx,
    first: &RaftStatus,
    given: &str,
    deadline: Instant,
) -> Result<(RaftStatus, String), String> {
    let id = first.current_leader.ok_or_else(|| "no leader".to_owned())?;
    let member = first
        .member(id)
        .ok_or_else(|| format!("leader {id} is not in the membership"))?;
    let base = urls::member_base(&member.addr, given)
        .ok_or_else(|| format!("leader {id} publishes an unusable address"))?;
    if base == urls::trimmed(given) {
        // `0.0.0.0:…` falls back to the given URL, which is the node that just said it is not
        // the leader: asking it again would not change its answer.
        return Err(format!("leader {id} publishes no reachable address"));
    }
    let leader = status_of(ctx, &base, false, deadline)
        .await
        .map_err(|e| format!("leader {id}: {e}"))?;
    if !leader.is_leader() {
        // At most one hop: a leadership change in flight is a gap, not a chase.
        return Err(format!("leader {id} is no longer the leader"));
    }
    Ok((leader, base))
}
