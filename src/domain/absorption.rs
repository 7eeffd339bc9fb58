//! Absorption headroom: can the fleet lose its worst node (or, across two or more regions, its
//! worst region) and re-place every workload it ran on the members left? yubaba's own count is
//! deliberately coarse (a node is a spare only while it carries no tenant); this answers the
//! packing question its authors left open, and how many machines of the restore config would
//! make every such loss absorbable.
//!
//! Pure: the scraper gathers each member's allocatable, committed totals and workloads; this
//! packs. Packing is first-fit decreasing by each workload's dominant resource (its larger
//! share of the memory or CPU being moved), both resources respected, only onto members
//! confirmed live. The order of the pieces depends only on the pieces, members are tried in id
//! order, and machines this module adds come after every real member: so adding a machine
//! never undoes a placement, and absorption only grows with machines (the property tests).

use serde::{Deserialize, Serialize};

/// Memory and CPU, as yubaba publishes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub memory_mb: u64,
    pub cpu_millis: u64,
}

impl Resources {
    pub const fn new(memory_mb: u64, cpu_millis: u64) -> Self {
        Resources {
            memory_mb,
            cpu_millis,
        }
    }

    fn fits_in(self, room: Resources) -> bool {
        self.memory_mb <= room.memory_mb && self.cpu_millis <= room.cpu_millis
    }

    fn saturating_sub(self, other: Resources) -> Resources {
        Resources::new(
            self.memory_mb.saturating_sub(other.memory_mb),
            self.cpu_millis.saturating_sub(other.cpu_millis),
        )
    }

    fn plus(self, other: Resources) -> Resources {
        Resources::new(
            self.memory_mb.saturating_add(other.memory_mb),
            self.cpu_millis.saturating_add(other.cpu_millis),
        )
    }

    fn is_zero(self) -> bool {
        self.memory_mb == 0 && self.cpu_millis == 0
    }

    /// The larger of the two shares of `of` (0 for a resource `of` has none of).
    fn dominant_share(self, of: Resources) -> f64 {
        let share = |x: u64, total: u64| {
            if total == 0 {
                if x == 0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                x as f64 / total as f64
            }
        };
        share(self.memory_mb, of.memory_mb).max(share(self.cpu_millis, of.cpu_millis))
    }
}

/// One member as the scraper read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLoad {
    pub id: u64,
    /// The member's region; `None` when neither yubaba nor a machine config says.
    pub region: Option<String>,
    /// Its reads answered in this sample: only a live member may receive workloads.
    pub live: bool,
    /// Published allocatable; `None` when the member does not measure it (it then receives
    /// nothing, like a member that is not live).
    pub allocatable: Option<Resources>,
    /// Committed totals (`/node/usage`): what the member holds now.
    pub committed: Resources,
    /// Each workload's reserved size from `/workloads`; `None` when not published.
    pub workloads: Option<Vec<Resources>>,
}

/// What the lost workloads' sizes were taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Every member published its workloads with sizes.
    Workloads,
    /// At least one member did not (a list from yubaba's stub runtime, which is empty whatever
    /// runs, an empty list beside committed load, or no list at all): its committed total is
    /// packed as one piece, which can only overstate what is short.
    Committed,
}

/// The worst loss of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Loss {
    /// What is lost: `node 3`, or `region fsn1`.
    pub worst: String,
    /// Whether every workload of the worst loss found room elsewhere (so every loss did).
    pub absorbed: bool,
    /// Memory (MiB) that did not fit, summed over the workloads left over.
    pub short_memory_mb: u64,
    /// CPU (millicores) that did not fit, summed over the workloads left over.
    pub short_cpu_millis: u64,
}

/// The whole answer for one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Absorption {
    /// Losing any one member.
    pub node_loss: Loss,
    /// Losing any one region, when the members span two or more.
    pub region_loss: Option<Loss>,
    /// The fewest machines of the restore config that make every loss above absorbable (0
    /// when all are); `None` when no number can (a workload larger than one such machine, a
    /// region loss the new machines would share, or no allocatable known for the config).
    pub machines_needed: Option<u32>,
    /// Where the lost workloads' sizes came from.
    pub basis: Basis,
    /// Members that did not answer their reads in this sample: judged as already lost (they
    /// receive nothing, and what they ran is not known), but their regions still count, so
    /// a region reduced to unanswering members leaves the others' loss with nowhere to go.
    #[serde(default)]
    pub unanswered: u32,
}

impl Absorption {
    /// Whether every loss judged (each node, and each region when there are two or more) is
    /// absorbed.
    pub fn absorbed(&self) -> bool {
        self.node_loss.absorbed && self.region_loss.as_ref().is_none_or(|r| r.absorbed)
    }

    /// The answer in an on-call's words: `survives losing any node · short 2 GiB, 500
    /// millicores if region fsn1 goes · 1 more restore machine covers it`, with `(from
    /// committed totals)` when sizes were not published.
    pub fn words(&self) -> String {
        let mut parts = vec![self.node_loss.words("node")];
        if let Some(r) = &self.region_loss {
            parts.push(r.words("region"));
        }
        if !self.absorbed() {
            parts.push(match self.machines_needed {
                Some(1) => "1 more restore machine covers it".to_string(),
                Some(n) => format!("{n} more restore machines cover it"),
                None => "no number of restore machines covers it".to_string(),
            });
        }
        if self.unanswered > 0 {
            parts.push(format!(
                "judged without {} member{} that did not answer",
                self.unanswered,
                if self.unanswered == 1 { "" } else { "s" }
            ));
        }
        let mut words = parts.join(" · ");
        if self.basis == Basis::Committed {
            words.push_str(" (from committed totals)");
        }
        words
    }
}

impl Loss {
    /// `survives losing any node`, or `short 2 GiB if node 3 goes`.
    fn words(&self, kind: &str) -> String {
        if self.absorbed {
            return format!("survives losing any {kind}");
        }
        let mut short = Vec::new();
        if self.short_memory_mb > 0 {
            short.push(memory_words(self.short_memory_mb));
        }
        if self.short_cpu_millis > 0 {
            short.push(format!("{} millicores", self.short_cpu_millis));
        }
        if short.is_empty() {
            short.push("room".to_string());
        }
        format!("short {} if {} goes", short.join(", "), self.worst)
    }
}

/// MiB below a GiB, else GiB with one decimal (`2.1 GiB`, `3 GiB`). Sizes come from nodes,
/// so any u64: the whole GiB and the remainder are rounded apart, which cannot overflow.
fn memory_words(mb: u64) -> String {
    if mb < 1024 {
        return format!("{mb} MiB");
    }
    let (mut gib, rest) = (mb / 1024, mb % 1024);
    let mut tenths = (rest * 10 + 512) / 1024;
    if tenths == 10 {
        gib += 1;
        tenths = 0;
    }
    if tenths == 0 {
        format!("{gib} GiB")
    } else {
        format!("{gib}.{tenths} GiB")
    }
}

/// The restore config's machine, as added machines are assumed to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreMachine {
    pub allocatable: Resources,
    pub region: Option<String>,
}

/// More machines than this are never proposed: a fleet that would need them needs a person.
pub const MACHINES_NEEDED_MAX: u32 = 64;

/// Assesses `members`; `None` for a fleet without members.
pub fn assess(members: &[MemberLoad], restore: Option<&RestoreMachine>) -> Option<Absorption> {
    // No member answered: nothing to judge on (every loss would move nothing known).
    if !members.iter().any(|m| m.live) {
        return None;
    }
    let mut sorted: Vec<MemberLoad> = members.to_vec();
    sorted.sort_by_key(|m| m.id);
    let members = &sorted[..];
    let unanswered = members.iter().filter(|m| !m.live).count();
    // Sizes are judged on the members that answered: one that did not has none to give.
    let basis = if members.iter().filter(|m| m.live).all(|m| pieces(m).1) {
        Basis::Workloads
    } else {
        Basis::Committed
    };
    let unit = fleet_allocatable(members);
    let nodes: Vec<Judged> = members
        .iter()
        .map(|m| Judged::new(members, Lost::Node(m.id)))
        .collect();
    let regions = regions(members);
    let region_losses: Vec<Judged> = if regions.len() >= 2 {
        regions
            .iter()
            .map(|r| Judged::new(members, Lost::Region(r.clone())))
            .collect()
    } else {
        Vec::new()
    };
    let node_loss = worst_of(&nodes, unit).expect("members is not empty");
    let region_loss = worst_of(&region_losses, unit);
    let restore = restore.filter(|r| !r.allocatable.is_zero());
    let machines_needed = restore.and_then(|r| {
        let judged: Vec<&Judged> = nodes.iter().chain(&region_losses).collect();
        machines_needed(members, &regions, &judged, r)
    });
    Some(Absorption {
        node_loss,
        region_loss,
        machines_needed,
        basis,
        unanswered: u32::try_from(unanswered).unwrap_or(u32::MAX),
    })
}

/// One failure: a member, or every member of a region.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lost {
    Node(u64),
    Region(String),
}

impl Lost {
    fn takes(&self, m: &MemberLoad) -> bool {
        match self {
            Lost::Node(id) => m.id == *id,
            Lost::Region(r) => m.region.as_deref() == Some(r.as_str()),
        }
    }

    /// Whether machines of `restore` are lost with it.
    fn takes_restore(&self, restore: &RestoreMachine) -> bool {
        matches!(self, Lost::Region(r) if restore.region.as_deref() == Some(r.as_str()))
    }

    fn name(&self) -> String {
        match self {
            Lost::Node(id) => format!("node {id}"),
            Lost::Region(r) => format!("region {r}"),
        }
    }
}

/// A failure and what it leaves short with no machine added.
struct Judged {
    lost: Lost,
    short: Resources,
}

impl Judged {
    fn new(members: &[MemberLoad], lost: Lost) -> Self {
        let short = pack(members, &lost, &[]);
        Judged { lost, short }
    }

    fn loss(&self) -> Loss {
        Loss {
            worst: self.lost.name(),
            absorbed: self.short.is_zero(),
            short_memory_mb: self.short.memory_mb,
            short_cpu_millis: self.short.cpu_millis,
        }
    }
}

/// The most severe failure as a `Loss`; the first of equals, so the answer does not move
/// between samples.
fn worst_of(judged: &[Judged], unit: Resources) -> Option<Loss> {
    judged
        .iter()
        .reduce(|worst, j| {
            if severity(j.short, unit) > severity(worst.short, unit) {
                j
            } else {
                worst
            }
        })
        .map(Judged::loss)
}

/// How bad a shortfall is: any above none, larger (as a share of the fleet) above smaller.
fn severity(short: Resources, unit: Resources) -> f64 {
    if short.is_zero() {
        0.0
    } else {
        1.0 + short.dominant_share(unit)
    }
}

fn regions(members: &[MemberLoad]) -> Vec<String> {
    let mut rs: Vec<String> = members.iter().filter_map(|m| m.region.clone()).collect();
    rs.sort();
    rs.dedup();
    rs
}

/// Every member's published allocatable: the unit shortfalls are compared in.
fn fleet_allocatable(members: &[MemberLoad]) -> Resources {
    members
        .iter()
        .filter_map(|m| m.allocatable)
        .fold(Resources::default(), Resources::plus)
}

/// A member's free room, when it may receive workloads.
fn room(m: &MemberLoad) -> Option<Resources> {
    match (m.live, m.allocatable) {
        (true, Some(a)) => Some(a.saturating_sub(m.committed)),
        _ => None,
    }
}

/// A member's workloads as pieces to re-place, and whether they came from `/workloads`.
/// An empty list beside committed load is not believed (yubaba's stub runtime lists none):
/// the committed total is one piece then.
fn pieces(m: &MemberLoad) -> (Vec<Resources>, bool) {
    match &m.workloads {
        Some(w) if !w.is_empty() || m.committed.is_zero() => (w.clone(), true),
        _ if m.committed.is_zero() => (Vec::new(), false),
        _ => (vec![m.committed], false),
    }
}

/// Packs what `lost` took onto the members left (and `extra` machines, tried after them),
/// first-fit decreasing by each piece's dominant share of what is moved; returns what did not
/// fit.
fn pack(members: &[MemberLoad], lost: &Lost, extra: &[Resources]) -> Resources {
    let mut items: Vec<Resources> = members
        .iter()
        .filter(|m| lost.takes(m))
        .flat_map(|m| pieces(m).0)
        .filter(|r| !r.is_zero())
        .collect();
    if items.is_empty() {
        return Resources::default();
    }
    let unit = items
        .iter()
        .copied()
        .fold(Resources::default(), Resources::plus);
    // Largest first; ties broken by size so the order never depends on the input's.
    items.sort_by(|a, b| {
        b.dominant_share(unit)
            .total_cmp(&a.dominant_share(unit))
            .then(b.memory_mb.cmp(&a.memory_mb))
            .then(b.cpu_millis.cmp(&a.cpu_millis))
    });
    let mut bins: Vec<Resources> = members
        .iter()
        .filter(|m| !lost.takes(m))
        .filter_map(room)
        .chain(extra.iter().copied())
        .collect();
    let mut short = Resources::default();
    for item in items {
        match bins.iter_mut().find(|b| item.fits_in(**b)) {
            Some(bin) => *bin = bin.saturating_sub(item),
            None => short = short.plus(item),
        }
    }
    short
}

/// Whether `lost` is absorbed with `extra` machines of `restore` added after the members
/// (none when it takes them too).
fn absorbed_with(
    members: &[MemberLoad],
    lost: &Lost,
    restore: &RestoreMachine,
    extra: u32,
) -> bool {
    let added = if lost.takes_restore(restore) {
        Vec::new()
    } else {
        vec![restore.allocatable; extra as usize]
    };
    pack(members, lost, &added).is_zero()
}

/// The fewest machines of `restore` that make every failure absorbable. Each failure's
/// absorption only grows with machines added after the members, so the fleet needs the
/// largest of the failures' own answers; those are checked worst first against the largest
/// answer so far, and only a failure that does not fit it is bisected. Machines in a region
/// the fleet does not span yet bring that region in: then every region's loss counts.
fn machines_needed(
    members: &[MemberLoad],
    regions: &[String],
    judged: &[&Judged],
    restore: &RestoreMachine,
) -> Option<u32> {
    if judged.iter().all(|j| j.short.is_zero()) {
        return Some(0);
    }
    let mut failures: Vec<(Lost, Resources)> =
        judged.iter().map(|j| (j.lost.clone(), j.short)).collect();
    if let Some(r) = restore.region.as_ref() {
        let mut with_new = regions.to_vec();
        if !with_new.contains(r) {
            with_new.push(r.clone());
        }
        if with_new.len() >= 2 && regions.len() < 2 {
            for r in with_new {
                let lost = Lost::Region(r);
                let short = pack(members, &lost, &[]);
                failures.push((lost, short));
            }
        }
    }
    let unit = fleet_allocatable(members);
    failures.sort_by(|a, b| severity(b.1, unit).total_cmp(&severity(a.1, unit)));
    let mut needed = 1;
    for (lost, short) in &failures {
        if short.is_zero() || absorbed_with(members, lost, restore, needed) {
            continue;
        }
        if !absorbed_with(members, lost, restore, MACHINES_NEEDED_MAX) {
            return None;
        }
        let (mut lo, mut hi) = (needed, MACHINES_NEEDED_MAX); // lo fails, hi suffices
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if absorbed_with(members, lost, restore, mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        needed = hi;
    }
    Some(needed)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const GIB: u64 = 1024;

    fn member(id: u64, region: &str, alloc: (u64, u64), workloads: &[(u64, u64)]) -> MemberLoad {
        let w: Vec<Resources> = workloads
            .iter()
            .map(|(m, c)| Resources::new(*m, *c))
            .collect();
        let committed = w
            .iter()
            .copied()
            .fold(Resources::default(), Resources::plus);
        MemberLoad {
            id,
            region: Some(region.into()),
            live: true,
            allocatable: Some(Resources::new(alloc.0, alloc.1)),
            committed,
            workloads: Some(w),
        }
    }

    fn cx22(region: &str) -> RestoreMachine {
        RestoreMachine {
            allocatable: Resources::new(8 * GIB, 4000),
            region: Some(region.into()),
        }
    }

    #[test]
    fn the_words_name_each_loss_its_shortfall_and_the_machines_that_cover_it() {
        let loss = |worst: &str, absorbed, mb, millis| Loss {
            worst: worst.into(),
            absorbed,
            short_memory_mb: mb,
            short_cpu_millis: millis,
        };
        let fine = Absorption {
            node_loss: loss("node 1", true, 0, 0),
            region_loss: None,
            machines_needed: Some(0),
            basis: Basis::Workloads,
            unanswered: 0,
        };
        assert_eq!(fine.words(), "survives losing any node");
        let short = Absorption {
            node_loss: loss("node 3", true, 0, 0),
            region_loss: Some(loss("region fsn1", false, 2150, 500)),
            machines_needed: Some(2),
            basis: Basis::Committed,
            unanswered: 0,
        };
        assert_eq!(
            short.words(),
            "survives losing any node · short 2.1 GiB, 500 millicores if region fsn1 goes \
             · 2 more restore machines cover it (from committed totals)"
        );
        let hopeless = Absorption {
            node_loss: loss("node 2", false, 512, 0),
            region_loss: None,
            machines_needed: None,
            basis: Basis::Workloads,
            unanswered: 2,
        };
        assert_eq!(
            hopeless.words(),
            "short 512 MiB if node 2 goes · no number of restore machines covers it \
             · judged without 2 members that did not answer"
        );
        assert_eq!(memory_words(3 * GIB), "3 GiB");
        assert_eq!(memory_words(1023), "1023 MiB");
        assert_eq!(memory_words(1024), "1 GiB");
        assert_eq!(
            memory_words(1997),
            "2 GiB",
            "1.95 rounds up into the next GiB"
        );
        assert_eq!(memory_words(u64::MAX), "18014398509481984 GiB");
    }

    /// A member that did not answer is already lost: it receives nothing and its loss moves
    /// nothing known, but its region still counts, so losing the region that answered has
    /// nowhere to go. With no member answering there is nothing to judge.
    #[test]
    fn a_member_that_did_not_answer_is_judged_as_already_lost_and_keeps_its_region() {
        let mut down = member(3, "nbg1", (8 * GIB, 4000), &[]);
        down.live = false;
        down.workloads = None;
        down.allocatable = None;
        let fleet = vec![
            member(1, "fsn1", (8 * GIB, 4000), &[(6 * GIB, 3000)]),
            member(2, "fsn1", (8 * GIB, 4000), &[]),
            down.clone(),
        ];
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert!(a.node_loss.absorbed, "node 1's 6 GiB fits on node 2: {a:?}");
        let region = a.region_loss.clone().expect("two regions, one unanswering");
        assert!(!region.absorbed, "{a:?}");
        assert_eq!(region.worst, "region fsn1");
        assert_eq!(region.short_memory_mb, 6 * GIB);
        assert_eq!(a.unanswered, 1);
        assert_eq!(
            a.basis,
            Basis::Workloads,
            "sizes judged on the members that answered"
        );
        assert!(
            a.words()
                .contains("judged without 1 member that did not answer"),
            "{}",
            a.words()
        );
        assert_eq!(assess(&[down], Some(&cx22("fsn1"))), None);
    }

    /// The seed's case: four 8 GiB nodes each carrying one 1 GiB tenant. yubaba counts no
    /// spare; losing any node moves 1 GiB onto 21 GiB free.
    #[test]
    fn every_node_with_one_small_tenant_is_absorbed_though_yubaba_counts_no_spare() {
        let fleet: Vec<MemberLoad> = (1..=4)
            .map(|id| member(id, "fsn1", (8 * GIB, 4000), &[(GIB, 500)]))
            .collect();
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert!(a.node_loss.absorbed, "{a:?}");
        assert_eq!(a.region_loss, None, "one region");
        assert_eq!(a.machines_needed, Some(0));
        assert_eq!(a.basis, Basis::Workloads);
    }

    /// The opposite: three full 8 GiB nodes (7 GiB of workloads each) and one empty 4 GiB
    /// spare. yubaba counts one spare; losing a full node leaves 7 GiB for 4 GiB + 3×1 GiB of
    /// scattered room, and the 3 GiB piece fits nowhere.
    #[test]
    fn one_empty_spare_smaller_than_a_nodes_workloads_is_short() {
        let full = [(3 * GIB, 1000), (2 * GIB, 1000), (2 * GIB, 1000)];
        let mut fleet: Vec<MemberLoad> = (1..=3)
            .map(|id| member(id, "fsn1", (8 * GIB, 4000), &full))
            .collect();
        fleet.push(member(4, "fsn1", (4 * GIB, 2000), &[]));
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert!(!a.node_loss.absorbed, "{a:?}");
        // The 3 GiB piece goes to the spare; its last GiB, like each full node's, is too
        // small for either 2 GiB piece.
        assert_eq!(
            a.node_loss.worst, "node 1",
            "the first of three equal losses"
        );
        assert_eq!(a.node_loss.short_memory_mb, 4 * GIB);
        assert_eq!(a.node_loss.short_cpu_millis, 2000);
        assert_eq!(a.machines_needed, Some(1), "one 8 GiB machine takes 4 GiB");
    }

    /// Two regions. fsn1's two nodes carry 1 GiB each (7 GiB free), nbg1's three 6 GiB each
    /// (2 GiB free). Any one node is absorbed (a 6 GiB piece fits a 7 GiB room); losing nbg1
    /// leaves three 6 GiB pieces for two such rooms. One restore machine in fsn1 covers it;
    /// machines in nbg1 would go with it, so no number of them helps.
    #[test]
    fn across_regions_the_worst_region_is_packed_and_machines_lost_with_it_do_not_count() {
        let fleet = vec![
            member(1, "fsn1", (8 * GIB, 4000), &[(GIB, 500)]),
            member(2, "fsn1", (8 * GIB, 4000), &[(GIB, 500)]),
            member(3, "nbg1", (8 * GIB, 4000), &[(6 * GIB, 1000)]),
            member(4, "nbg1", (8 * GIB, 4000), &[(6 * GIB, 1000)]),
            member(5, "nbg1", (8 * GIB, 4000), &[(6 * GIB, 1000)]),
        ];
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert!(a.node_loss.absorbed, "{a:?}");
        let region = a.region_loss.clone().unwrap();
        assert_eq!(region.worst, "region nbg1", "{a:?}");
        assert!(!region.absorbed);
        assert_eq!(
            (region.short_memory_mb, region.short_cpu_millis),
            (6 * GIB, 1000)
        );
        assert_eq!(a.machines_needed, Some(1), "{a:?}");
        let a = assess(&fleet, Some(&cx22("nbg1"))).unwrap();
        assert_eq!(a.machines_needed, None, "{a:?}");
    }

    #[test]
    fn members_not_live_or_without_allocatable_receive_nothing() {
        let mut fleet = vec![
            member(1, "fsn1", (8 * GIB, 4000), &[(2 * GIB, 500)]),
            member(2, "fsn1", (8 * GIB, 4000), &[]),
        ];
        fleet[1].live = false;
        let a = assess(&fleet, None).unwrap();
        assert!(!a.node_loss.absorbed);
        assert_eq!(a.node_loss.worst, "node 1");
        assert_eq!(a.machines_needed, None, "no restore machine known");
        fleet[1].live = true;
        fleet[1].allocatable = None;
        assert!(!assess(&fleet, None).unwrap().node_loss.absorbed);
    }

    #[test]
    fn an_empty_list_beside_committed_load_falls_back_to_the_committed_total() {
        // The real yubaba's stub runtime: no workloads, committed 3 GiB.
        let mut stub = member(1, "fsn1", (8 * GIB, 4000), &[]);
        stub.committed = Resources::new(3 * GIB, 1000);
        let mut unpublished = member(2, "fsn1", (8 * GIB, 4000), &[]);
        unpublished.workloads = None;
        let fleet = vec![stub, unpublished, member(3, "fsn1", (8 * GIB, 4000), &[])];
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert_eq!(a.basis, Basis::Committed);
        assert!(a.node_loss.absorbed, "3 GiB onto 16 GiB free: {a:?}");
    }

    #[test]
    fn a_workload_larger_than_any_machine_of_the_config_cannot_be_bought_away() {
        let fleet = vec![
            member(1, "fsn1", (32 * GIB, 8000), &[(20 * GIB, 1000)]),
            member(2, "fsn1", (32 * GIB, 8000), &[]),
            member(3, "fsn1", (16 * GIB, 8000), &[(1, 1)]),
        ];
        let mut fleet = fleet;
        fleet[1].committed = Resources::new(20 * GIB, 0);
        fleet[1].workloads = Some(vec![Resources::new(20 * GIB, 0)]);
        let a = assess(&fleet, Some(&cx22("fsn1"))).unwrap();
        assert!(!a.node_loss.absorbed);
        assert_eq!(a.machines_needed, None);
    }

    #[test]
    fn no_members_no_answer() {
        assert_eq!(assess(&[], None), None);
    }

    fn arb_member(id: u64) -> impl Strategy<Value = MemberLoad> {
        (
            prop_oneof![Just("fsn1"), Just("nbg1"), Just("hel1")],
            (1..64 * GIB, 500..16_000_u64),
            proptest::collection::vec((1..8 * GIB, 1..4000_u64), 0..5),
            any::<bool>(),
            prop::bool::weighted(0.9),
        )
            .prop_map(move |(region, alloc, w, publish, live)| {
                let mut m = member(id, region, alloc, &w);
                if !publish {
                    m.workloads = None;
                }
                m.live = live;
                m
            })
    }

    fn arb_fleet() -> impl Strategy<Value = Vec<MemberLoad>> {
        (1..9_usize).prop_flat_map(|n| (0..n as u64).map(arb_member).collect::<Vec<_>>())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// An empty machine added to a fleet never makes a loss it absorbed short, nor any
        /// shortfall larger.
        #[test]
        fn adding_capacity_never_makes_a_fleet_worse(fleet in arb_fleet(), region in prop_oneof![Just("fsn1"), Just("nbg1")]) {
            // A fleet where no member answered is not judged (`None`).
            prop_assume!(fleet.iter().any(|m| m.live));
            let before = assess(&fleet, None).unwrap();
            let mut more = fleet.clone();
            more.push(member(1_000, region, (16 * GIB, 8000), &[]));
            let after = assess(&more, None).unwrap();
            // The new empty member's own loss is trivially absorbed, so the worst node loss
            // can only be an old one, and every old one has at least the room it had.
            prop_assert!(after.node_loss.absorbed || !before.node_loss.absorbed);
            for m in &fleet {
                let lost = Lost::Node(m.id);
                let was = pack(&fleet, &lost, &[]);
                let now = pack(&fleet, &lost, &[Resources::new(16 * GIB, 8000)]);
                prop_assert!(now.memory_mb <= was.memory_mb && now.cpu_millis <= was.cpu_millis);
            }
        }

        /// The machines-needed answer, added as real members, makes every loss absorbable,
        /// and one fewer does not.
        #[test]
        fn the_machines_needed_really_suffice_and_are_the_fewest(fleet in arb_fleet()) {
            prop_assume!(fleet.iter().any(|m| m.live));
            let restore = cx22("fsn1");
            let a = assess(&fleet, Some(&restore)).unwrap();
            if let Some(k) = a.machines_needed {
                let with = |k: u32| {
                    let mut f = fleet.clone();
                    for i in 0..k {
                        f.push(MemberLoad {
                            id: 10_000 + u64::from(i),
                            region: restore.region.clone(),
                            live: true,
                            allocatable: Some(restore.allocatable),
                            committed: Resources::default(),
                            workloads: Some(Vec::new()),
                        });
                    }
                    assess(&f, None).unwrap()
                };
                let enough = with(k);
                prop_assert!(enough.node_loss.absorbed, "{k} machines: {enough:?}");
                prop_assert!(enough.region_loss.as_ref().is_none_or(|r| r.absorbed), "{k}: {enough:?}");
                if k > 0 {
                    let fewer = with(k - 1);
                    prop_assert!(
                        !fewer.node_loss.absorbed || fewer.region_loss.as_ref().is_some_and(|r| !r.absorbed),
                        "{} machines were enough: {fewer:?}", k - 1
                    );
                }
            }
        }
    }
}
