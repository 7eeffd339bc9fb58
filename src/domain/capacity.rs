//! Headroom as the rest of the product sees it: what one scrape observed, the fleet's health,
//! the deficit rule (consecutive samples in, hysteresis out) and the shape of a chart's series.
//! Pure types and functions; the scraper fills them, `crate::capacity` stores them, the views
//! and the API show them.

use serde::{Deserialize, Serialize};

use super::absorption::Absorption;
use super::fleet::HeadroomRule;
use super::{ProvisionState, UnixMillis};

/// Where a sample's spare and required came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The leader's `/raft/status` carried the `headroom` section.
    Native,
    /// Computed from each member's `/node` and `/node/usage` (older builds).
    Derived,
    /// The scrape failed: no numbers.
    None,
}

impl Source {
    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Native => "native",
            Source::Derived => "derived",
            Source::None => "none",
        }
    }

    /// The stored name back; anything else is `None` (a failed sample).
    pub fn parse(s: &str) -> Self {
        match s {
            "native" => Source::Native,
            "derived" => Source::Derived,
            _ => Source::None,
        }
    }
}

/// One member of the raft group as the leader lists it, with its load where headroom read
/// it (derived mode asks each member's `/node` and `/node/usage`; native mode reads only the
/// leader, whose `headroom` section counts spares without naming them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Member {
    /// Raft node id.
    pub id: u64,
    /// Its `host:port` as published (also its HTTP address).
    pub addr: String,
    /// In a voter set (joint configs: in any of them); otherwise a learner.
    pub voter: bool,
    /// Live tenants (`yah.workloads.count` on its `/node/usage`); `None` when not read
    /// (native mode, or the node did not answer). Absent from lists stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<u64>,
    /// Whether its `/node` published allocatable capacity; `None` when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_published: Option<bool>,
    /// Its region, as builds with the `headroom` section publish it; `None` on older builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// What a member is to headroom, decided by [`Member::role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberRole {
    /// Capacity published and no tenant: a warm spare by yubaba's rule.
    Spare,
    /// Carrying this many live tenants (not spare, however small they are).
    Carrying(u64),
    /// In no voter set and not a spare (no capacity published, or its load was not read).
    Learner,
    /// A voter neither carrying tenants nor a spare as far as headroom read it (its load was
    /// not read, or it published no capacity).
    Voter,
}

impl MemberRole {
    /// Its name in the API: `spare`, `carrying`, `learner` or `voter`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberRole::Spare => "spare",
            MemberRole::Carrying(_) => "carrying",
            MemberRole::Learner => "learner",
            MemberRole::Voter => "voter",
        }
    }
}

impl Member {
    /// A member as the leader lists it, its load not read.
    pub fn listed(id: u64, addr: impl Into<String>, voter: bool) -> Self {
        Member {
            id,
            addr: addr.into(),
            voter,
            tenants: None,
            capacity_published: None,
            region: None,
        }
    }

    /// Its role from what was read: tenants first (a node carrying one is not spare), then
    /// yubaba's spare rule (capacity published and no tenant), then its place in raft. A
    /// missing reading never makes a spare.
    pub fn role(&self) -> MemberRole {
        match (self.tenants, self.capacity_published) {
            (Some(n), _) if n > 0 => MemberRole::Carrying(n),
            (Some(0), Some(true)) => MemberRole::Spare,
            _ if !self.voter => MemberRole::Learner,
            _ => MemberRole::Voter,
        }
    }

    /// Its role in words: `spare`, `carrying 1 tenant`, `carrying 3 tenants`, `learner`,
    /// or `voter` with why nothing more is known.
    pub fn role_words(&self) -> String {
        match self.role() {
            MemberRole::Spare => "spare".to_owned(),
            MemberRole::Carrying(1) => "carrying 1 tenant".to_owned(),
            MemberRole::Carrying(n) => format!("carrying {n} tenants"),
            MemberRole::Learner => "learner".to_owned(),
            MemberRole::Voter if self.tenants.is_none() => "voter (load not read)".to_owned(),
            MemberRole::Voter => "voter, no capacity published".to_owned(),
        }
    }
}

/// What a successful scrape saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Native or derived.
    pub source: Source,
    /// Warm spares counted.
    pub spare: u32,
    /// Spares the fleet must keep.
    pub required: u32,
    /// The leader's raft id.
    pub leader_id: Option<u64>,
    /// The base URL the numbers were read from (the leader's, or the given endpoint when the
    /// leader's address is not reachable, e.g. `0.0.0.0:…`).
    pub leader_url: Option<String>,
    /// The leader's term.
    pub term: Option<u64>,
    /// Every member, voters first.
    pub members: Vec<Member>,
    /// The leader's status body as parsed JSON (bounded by the scraper's body cap): kept as
    /// the evidence of a deficit.
    pub evidence: serde_json::Value,
    /// Whether the fleet can lose its worst node (or region) and re-place every workload;
    /// `None` when no member's load was read.
    pub absorption: Option<Absorption>,
}

/// Whether an ok sample is short of what the fleet must keep under `rule`: by yubaba's count
/// (`spare < required`), or under `absorption` by the packing verdict (`absorbed` false). A
/// sample that could not judge absorption (`None`: no member's load read) falls back to the
/// count, so the rule never leaves a fleet without a verdict.
pub fn short_under(rule: HeadroomRule, spare: u32, required: u32, absorbed: Option<bool>) -> bool {
    match (rule, absorbed) {
        (HeadroomRule::Absorption, Some(absorbed)) => !absorbed,
        _ => spare < required,
    }
}

impl Observation {
    /// Whether this observation is short under `rule` (see [`short_under`]).
    pub fn short(&self, rule: HeadroomRule) -> bool {
        short_under(
            rule,
            self.spare,
            self.required,
            self.absorption.as_ref().map(Absorption::absorbed),
        )
    }

    /// Members in a voter set.
    pub fn voters(&self) -> u32 {
        self.members.iter().filter(|m| m.voter).count() as u32
    }

    /// Members in no voter set.
    pub fn learners(&self) -> u32 {
        self.members.iter().filter(|m| !m.voter).count() as u32
    }
}

/// One scrape tick of one fleet: numbers, or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When the tick started.
    pub at: UnixMillis,
    /// How long the scrape took, in milliseconds.
    pub latency_ms: u64,
    /// The observation, or a coarse reason for people ("could not connect", "timed out",
    /// "HTTP 503: raft not configured", "unreadable status: …"): never a secret, never a body.
    pub outcome: Result<Observation, String>,
}

impl Sample {
    /// Spare and required when the scrape succeeded.
    pub fn numbers(&self) -> Option<(u32, u32)> {
        self.outcome.as_ref().ok().map(|o| (o.spare, o.required))
    }

    /// Whether the sample is short under `rule`; `None` when the scrape failed.
    pub fn short(&self, rule: HeadroomRule) -> Option<bool> {
        self.outcome.as_ref().ok().map(|o| o.short(rule))
    }
}

/// A fleet's health as the dashboard, the API and `/metrics` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// The newest sample is fresh, ok, and no deficit is open.
    Healthy,
    /// A deficit is open (entered and not yet left).
    Deficit,
    /// Never scraped, or the newest sample failed.
    Unknown,
    /// The newest sample is older than `STALE_AFTER_INTERVALS` scrape intervals (the scraper
    /// is behind or stopped).
    Stale,
    /// The deficit rule is confirming a change (entering a deficit, or leaving one) and has
    /// not seen enough samples yet: [`FleetNow::pending`] says which and how far along.
    Pending,
}

impl Health {
    /// The shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Healthy => "healthy",
            Health::Deficit => "deficit",
            Health::Unknown => "unknown",
            Health::Stale => "stale",
            Health::Pending => "pending",
        }
    }
}

/// Which change a pending status is confirming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PendingToward {
    /// Samples below required, not yet `enter_after` of them.
    Deficit,
    /// Samples back at required during a deficit, not yet `leave_after` of them.
    Recovery,
}

/// A change the deficit rule is still confirming: `samples` seen of the `of` it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Pending {
    pub toward: PendingToward,
    pub samples: u32,
    pub of: u32,
}

impl Pending {
    /// What the status says: `deficit pending, 1 of 3 samples`.
    pub fn words(self) -> String {
        let what = match self.toward {
            PendingToward::Deficit => "deficit",
            PendingToward::Recovery => "recovery",
        };
        let unit = if self.of == 1 { "sample" } else { "samples" };
        format!("{what} pending, {} of {} {unit}", self.samples, self.of)
    }
}

/// The change the deficit rule is part-way through confirming, if any: a streak begun but
/// shorter than the policy needs. A streak at or past its length has already acted.
pub fn pending(tracker: DeficitTracker, policy: DeficitPolicy) -> Option<Pending> {
    let (toward, samples, of) = if tracker.in_deficit {
        (
            PendingToward::Recovery,
            tracker.healthy_streak,
            policy.leave_after,
        )
    } else {
        (
            PendingToward::Deficit,
            tracker.below_streak,
            policy.enter_after,
        )
    };
    (samples > 0 && samples < of).then_some(Pending {
        toward,
        samples,
        of,
    })
}

/// yubaba's own words for a fleet's spares: `N+1` is one warm spare, so a fleet with
/// `spare` spares reads `N+spare`, beside what it must keep: `N+0 of N+2 required`.
pub fn n_plus_words(spare: u32, required: u32) -> String {
    format!("N+{spare} of N+{required} required")
}

/// Intervals without a new sample after which a fleet is stale.
pub const STALE_AFTER_INTERVALS: i64 = 3;

/// The health of a fleet from its newest sample: `sampled_at` (any sample), whether it was
/// ok, whether a deficit is open, and whether a change is still being confirmed. A deficit
/// stays a deficit through failed samples (a fleet that stops answering while short is still
/// short); staleness wins over everything, since nothing shown is current then. A change
/// being confirmed is `pending`, never the old word: the numbers already say otherwise.
pub fn health(
    now: UnixMillis,
    interval_secs: u32,
    newest: Option<(UnixMillis, bool)>,
    deficit_open: bool,
    pending: Option<Pending>,
) -> Health {
    let Some((sampled_at, ok)) = newest else {
        return Health::Unknown;
    };
    if now - sampled_at > STALE_AFTER_INTERVALS * i64::from(interval_secs) * 1000 {
        Health::Stale
    } else if deficit_open {
        if pending.is_some() {
            Health::Pending
        } else {
            Health::Deficit
        }
    } else if !ok {
        Health::Unknown
    } else if pending.is_some() {
        Health::Pending
    } else {
        Health::Healthy
    }
}

/// Spares a fleet must keep when yubaba does not say (derived mode): its override, else N+2
/// (two spares) when it spans two or more `regions` (those its members declare, else those
/// of its machine configs), since a whole region can vanish with one of its spares, else N+1
/// (one spare).
pub fn required_spares(override_: Option<u32>, regions: usize) -> u32 {
    override_.unwrap_or(if regions >= 2 { 2 } else { 1 })
}

/// When a deficit is entered and left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeficitPolicy {
    /// Consecutive ok samples with spare < required that enter a deficit.
    pub enter_after: u32,
    /// Consecutive ok samples with spare ≥ required that leave it (the hysteresis: one good
    /// sample in a flapping fleet does not end a deficit, nor file a second proposal).
    pub leave_after: u32,
}

/// What one sample did to the deficit state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeficitChange {
    /// Nothing changed.
    None,
    /// The fleet just entered a deficit.
    Entered,
    /// The fleet just left its deficit.
    Left,
}

/// The deficit state carried from sample to sample (stored in `fleet_status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeficitTracker {
    /// Consecutive ok samples below required.
    pub below_streak: u32,
    /// Consecutive ok samples at or above required.
    pub healthy_streak: u32,
    /// A deficit is open.
    pub in_deficit: bool,
}

impl DeficitTracker {
    /// Feeds one sample's verdict under the fleet's rule (`Sample::short`; `None` for a failed
    /// scrape). A failed scrape changes nothing: a gap is neither evidence of a deficit nor of
    /// recovery, so it neither resets nor advances a streak.
    pub fn observe(&mut self, policy: DeficitPolicy, short: Option<bool>) -> DeficitChange {
        let Some(short) = short else {
            return DeficitChange::None;
        };
        if short {
            self.below_streak = self.below_streak.saturating_add(1);
            self.healthy_streak = 0;
            if !self.in_deficit && self.below_streak >= policy.enter_after {
                self.in_deficit = true;
                return DeficitChange::Entered;
            }
        } else {
            self.healthy_streak = self.healthy_streak.saturating_add(1);
            self.below_streak = 0;
            if self.in_deficit && self.healthy_streak >= policy.leave_after {
                self.in_deficit = false;
                return DeficitChange::Left;
            }
        }
        DeficitChange::None
    }
}

/// The chart ranges offered by the range buttons, and accepted as `?range=` on the fleet page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// The last fifteen minutes (an incident's first look).
    M15,
    /// The last hour.
    H1,
    /// The last six hours.
    H6,
    /// The last day.
    H24,
    /// The last week.
    D7,
    /// The last thirty days.
    D30,
    /// The last ninety days.
    D90,
}

impl Range {
    /// Every range, shortest first (the buttons' order).
    pub const ALL: [Range; 7] = [
        Range::M15,
        Range::H1,
        Range::H6,
        Range::H24,
        Range::D7,
        Range::D30,
        Range::D90,
    ];

    /// The name on the button and in the query string.
    pub fn as_str(self) -> &'static str {
        match self {
            Range::M15 => "15m",
            Range::H1 => "1h",
            Range::H6 => "6h",
            Range::H24 => "24h",
            Range::D7 => "7d",
            Range::D30 => "30d",
            Range::D90 => "90d",
        }
    }

    /// The range named `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Its width in milliseconds.
    pub fn millis(self) -> i64 {
        const HOUR: i64 = 3_600_000;
        match self {
            Range::M15 => HOUR / 4,
            Range::H1 => HOUR,
            Range::H6 => 6 * HOUR,
            Range::H24 => 24 * HOUR,
            Range::D7 => 7 * 24 * HOUR,
            Range::D30 => 30 * 24 * HOUR,
            Range::D90 => 90 * 24 * HOUR,
        }
    }
}

/// Which stored rows a series is read from; serialised `raw`, `minute`, `five_minutes`,
/// `hour`, `two_hours`, `six_hours`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// `fleet_samples` (one row per tick).
    Raw,
    /// Per-minute rollups.
    Minute,
    /// Per-five-minutes rollups: the 24-hour chart's points, one row each.
    FiveMinutes,
    /// Per-hour rollups.
    Hour,
    /// Per-two-hours rollups: the 30-day chart's points, one row each.
    TwoHours,
    /// Per-six-hours rollups: the 90-day chart's points, one row each.
    SixHours,
}

impl Resolution {
    /// Width of one stored row's bucket, in milliseconds (raw: 0, any step fits).
    pub fn bucket_millis(self) -> i64 {
        match self {
            Resolution::Raw => 0,
            Resolution::Minute => 60_000,
            Resolution::FiveMinutes => 300_000,
            Resolution::Hour => 3_600_000,
            Resolution::TwoHours => 7_200_000,
            Resolution::SixHours => 21_600_000,
        }
    }

    /// The coarsest stored resolution whose bucket divides `step` (raw when no rollup's
    /// does), so every point of that step is made of whole stored rows: 7 h reads hour rows.
    pub fn dividing(step: i64) -> Resolution {
        [
            Resolution::SixHours,
            Resolution::TwoHours,
            Resolution::Hour,
            Resolution::FiveMinutes,
            Resolution::Minute,
        ]
        .into_iter()
        .find(|r| step > 0 && step % r.bucket_millis() == 0)
        .unwrap_or(Resolution::Raw)
    }
}

/// Points a chart draws at most; a series' step is chosen so its range fits in this many.
pub const CHART_POINTS: i64 = 360;

/// Shortest step, in milliseconds (the shortest scrape interval).
pub const STEP_MIN_MILLIS: i64 = 5_000;

/// The steps a default step is chosen from, shortest first. Each is read from the resolution
/// [`Resolution::dividing`] it, at most 15 stored rows a point: after 15 minutes (15 minute
/// rows) comes the hour (one hour row, where 20 or 30 minutes would read 20 or 30 minute
/// rows), two hours (one two-hour row), after 3 hours six hours (one six-hour row).
pub const DEFAULT_STEPS: [i64; 16] = [
    5_000,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    3_600_000,
    7_200_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    172_800_000,
];

/// The step and stored resolution for a range of `width` milliseconds drawn in at most
/// `points` points: the shortest of [`DEFAULT_STEPS`] that is at least `at_least` (e.g. two
/// scrape intervals, or a minute when the raw rows are gone) and holds the range in at most
/// `points` whole steps (1 h → 10 s, 6 h → 1 min, 24 h → 5 min, 7 d → 1 h, 30 d → 2 h, 90 d →
/// 6 h), read from the coarsest resolution dividing it. So the rows read follow the points,
/// never the history kept. Past the longest (ranges beyond 400 days) whole two-day steps.
pub fn step_for(width: i64, points: i64, at_least: i64) -> (i64, Resolution) {
    let points = points.max(1);
    let step = DEFAULT_STEPS
        .into_iter()
        .find(|s| *s >= at_least && width / s <= points)
        .unwrap_or_else(|| {
            let longest = DEFAULT_STEPS[DEFAULT_STEPS.len() - 1];
            let wanted = (width / points).max(at_least).max(1);
            (wanted + longest - 1) / longest * longest
        });
    (step, Resolution::dividing(step))
}

/// One point of a series: the bucket `[t, t + step)`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Point {
    /// Start of the bucket (unix ms; RFC 3339 in the API).
    #[schema(value_type = String)]
    pub t: UnixMillis,
    /// The fewest spares seen in the bucket (a dip is what matters); `None` for a gap.
    pub spare: Option<u32>,
    /// The most spares seen in the bucket.
    pub spare_max: Option<u32>,
    /// The highest requirement seen in the bucket.
    pub required: Option<u32>,
    /// At least one ok sample fell in the bucket; `false` is a gap.
    pub ok: bool,
    /// The source of the bucket's newest ok sample (`none` when every sample failed).
    pub source: Source,
    /// Absorption's worst verdict in the bucket: `false` when any sample found a loss the
    /// fleet could not absorb; `None` when no sample judged it.
    pub absorbed: Option<bool>,
    /// The most restore machines any sample in the bucket needed to absorb every loss.
    pub machines_needed: Option<u32>,
}

/// Points for tests of what reads a series (re-bucketing, the chart), built one way.
#[cfg(test)]
pub(crate) mod test_points {
    use super::{Point, Source};

    /// A bucket of one ok native sample.
    pub(crate) fn ok(t: i64, spare: u32, required: u32) -> Point {
        Point {
            t,
            spare: Some(spare),
            spare_max: Some(spare),
            required: Some(required),
            ok: true,
            source: Source::Native,
            absorbed: None,
            machines_needed: None,
        }
    }

    /// A bucket whose samples all failed.
    pub(crate) fn failed(t: i64) -> Point {
        Point {
            t,
            spare: None,
            spare_max: None,
            required: None,
            ok: false,
            source: Source::None,
            absorbed: None,
            machines_needed: None,
        }
    }
}

/// A fleet's headroom over a range, as the chart and the API read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The fleet.
    pub fleet: String,
    /// Start of the range (unix ms, inclusive).
    pub from: UnixMillis,
    /// End of the range (unix ms, exclusive): never after the time it was read, so the last
    /// bucket may be partial.
    pub to: UnixMillis,
    /// When the fleet was created: time before it is no part of its history (not a gap).
    pub fleet_created_at: UnixMillis,
    /// Width of one point, in milliseconds.
    pub step: i64,
    /// Where the points were read from.
    pub resolution: Resolution,
    /// One point per step with data, oldest first; steps without any sample are absent (the
    /// chart and the API show them as gaps).
    pub points: Vec<Point>,
}

/// A provision request drawn on a chart: one span from when it was requested to when it
/// ended (or, while it is still open, to now), shown by its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// The request.
    pub provision_id: i64,
    /// When it was filed.
    pub requested_at: UnixMillis,
    /// When it reached its final state; `None` while open.
    pub finished_at: Option<UnixMillis>,
    /// Its state now: the outcome once finished.
    pub state: ProvisionState,
}

impl Annotation {
    /// Whether the request is still open (pending approval, approved or executing).
    pub fn is_open(&self) -> bool {
        !self.state.is_terminal()
    }

    /// Where its span ends: when it finished, else `now` (an open request runs on). Never
    /// before it was requested.
    pub fn end(&self, now: UnixMillis) -> UnixMillis {
        match self.finished_at {
            Some(at) if !self.is_open() => at,
            _ => now,
        }
        .max(self.requested_at)
    }

    /// The outcome in words: `succeeded`, `failed`, `rejected`, …, or `open (pending
    /// approval)` while it runs.
    pub fn outcome_words(&self) -> String {
        if self.is_open() {
            format!("open ({})", self.state.words())
        } else {
            self.state.words().to_owned()
        }
    }

    /// The outcome's class name (its colour): `open`, or the final state.
    pub fn outcome_class(&self) -> &'static str {
        if self.is_open() {
            "open"
        } else {
            self.state.as_str()
        }
    }

    /// Its span clipped to `[from, to)`, where `to` also stands for now; `None` when it lies
    /// wholly outside.
    pub fn span_within(
        &self,
        from: UnixMillis,
        to: UnixMillis,
    ) -> Option<(UnixMillis, UnixMillis)> {
        let (start, end) = (self.requested_at, self.end(to));
        (start < to && end >= from).then(|| (start.max(from), end.min(to)))
    }
}

/// A fleet now, as the dashboard card, the fleet page, the fleet API and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FleetNow {
    /// The fleet's name.
    pub fleet: String,
    /// Healthy, deficit, pending, unknown or stale (see [`health`]).
    pub status: Health,
    /// The change a `pending` status is confirming, and how far along.
    pub pending: Option<Pending>,
    /// yubaba's N+k: the spares at the newest ok sample (`N+1` is one warm spare).
    pub n_plus: Option<u32>,
    /// Spares at the newest ok sample.
    pub spare: Option<u32>,
    /// Required at the newest ok sample.
    pub required: Option<u32>,
    /// Native or derived, from the newest sample (`none` when it failed).
    pub source: Source,
    /// The leader's raft id at the newest ok sample.
    pub leader_id: Option<u64>,
    /// The base URL the newest ok sample was read from.
    pub leader: Option<String>,
    /// Members at the newest ok sample. Filled only for one fleet (`board::now`: the fleet
    /// page and the fleet API); empty on the whole board, which carries the counts below.
    pub members: Vec<Member>,
    /// Members in a voter set at the newest ok sample (`None` before the first ok sample).
    pub voters: Option<u32>,
    /// Members in no voter set at the newest ok sample (`None` before the first ok sample).
    pub learners: Option<u32>,
    /// When the newest sample (ok or not) was taken.
    #[schema(value_type = Option<String>)]
    pub last_scrape_at: Option<UnixMillis>,
    /// When the newest ok sample was taken.
    #[schema(value_type = Option<String>)]
    pub last_ok_at: Option<UnixMillis>,
    /// Why the newest sample failed, when it did.
    pub last_error: Option<String>,
    /// Milliseconds the newest scrape took.
    pub latency_ms: Option<u64>,
    /// When the open deficit started (its first sample below required).
    #[schema(value_type = Option<String>)]
    pub deficit_since: Option<UnixMillis>,
    /// Requests for this fleet still pending approval, approved or executing.
    pub open_requests: u32,
    /// The fleet's scrape interval, in seconds.
    pub scrape_interval_secs: u32,
    /// Absorption headroom at the newest ok sample: can the fleet lose its worst node (or
    /// region) and re-place every workload (`None` when that sample could not judge it).
    pub absorption: Option<Absorption>,
}

/// One deficit and how long each step of its restore took: detected → proposed → approved →
/// provisioned → restored. A step not (yet) reached is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeficitTimeline {
    /// The deficit's id.
    pub id: i64,
    /// Its first sample below required.
    #[schema(value_type = String)]
    pub started_at: UnixMillis,
    /// The sample that crossed the threshold.
    #[schema(value_type = String)]
    pub detected_at: UnixMillis,
    /// Spare and required at detection.
    pub spare: u32,
    /// Required at detection.
    pub required: u32,
    /// The restore request it filed (or found open).
    pub provision_id: Option<i64>,
    /// The request's state now.
    pub provision_state: Option<String>,
    /// Why no request was filed, or which open one stood in for it.
    pub note: String,
    /// When the request was filed.
    #[schema(value_type = Option<String>)]
    pub proposed_at: Option<UnixMillis>,
    /// When it reached its approvals.
    #[schema(value_type = Option<String>)]
    pub approved_at: Option<UnixMillis>,
    /// When it succeeded.
    #[schema(value_type = Option<String>)]
    pub provisioned_at: Option<UnixMillis>,
    /// When the deficit was left.
    #[schema(value_type = Option<String>)]
    pub restored_at: Option<UnixMillis>,
}

/// One stored sample, for the fleet page's recent-samples table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SampleRow {
    /// When the tick started.
    #[schema(value_type = String)]
    pub at: UnixMillis,
    /// Whether it produced numbers.
    pub ok: bool,
    /// Native, derived, or none.
    pub source: Source,
    /// Spares.
    pub spare: Option<u32>,
    /// Required.
    pub required: Option<u32>,
    /// Voters.
    pub voters: Option<u32>,
    /// Learners.
    pub learners: Option<u32>,
    /// The leader's raft id.
    pub leader_id: Option<u64>,
    /// The leader's term.
    pub term: Option<u64>,
    /// Milliseconds the scrape took.
    pub latency_ms: u64,
    /// Why it failed.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(voter: bool, tenants: Option<u64>, capacity: Option<bool>) -> Member {
        Member {
            tenants,
            capacity_published: capacity,
            ..Member::listed(7, "127.0.0.7:7443", voter)
        }
    }

    #[test]
    fn a_members_role_follows_its_tenants_then_the_spare_rule_then_raft() {
        for voter in [true, false] {
            assert_eq!(read(voter, Some(0), Some(true)).role(), MemberRole::Spare);
            assert_eq!(read(voter, Some(0), Some(true)).role_words(), "spare");
            let one = read(voter, Some(1), Some(true));
            assert_eq!(one.role(), MemberRole::Carrying(1));
            assert_eq!(one.role_words(), "carrying 1 tenant");
            // Tenants decide even without published capacity.
            assert_eq!(
                read(voter, Some(3), None).role_words(),
                "carrying 3 tenants"
            );
        }
        assert_eq!(read(false, None, None).role_words(), "learner");
        assert_eq!(read(true, None, None).role_words(), "voter (load not read)");
        assert_eq!(
            read(true, Some(0), Some(false)).role_words(),
            "voter, no capacity published"
        );
        assert_eq!(
            read(false, Some(0), Some(false)).role(),
            MemberRole::Learner
        );
    }

    #[test]
    fn missing_readings_of_a_derived_fleets_member_never_make_a_spare() {
        // `/node` answered (capacity) but `/node/usage` did not, and the other way round.
        assert_eq!(read(false, None, Some(true)).role(), MemberRole::Learner);
        assert_eq!(read(true, None, Some(true)).role(), MemberRole::Voter);
        assert_eq!(read(false, Some(0), None).role(), MemberRole::Learner);
        assert_eq!(read(true, Some(0), None).role(), MemberRole::Voter);
        // A list stored before the readings existed reads them as not read.
        let old: Member =
            serde_json::from_str(r#"{"id":2,"addr":"127.0.0.2:7443","voter":true}"#).unwrap();
        assert_eq!(old, Member::listed(2, "127.0.0.2:7443", true));
        assert_eq!(old.role_words(), "voter (load not read)");
        // And a list without readings stores as it did.
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            r#"{"id":2,"addr":"127.0.0.2:7443","voter":true}"#
        );
    }

    const POLICY: DeficitPolicy = DeficitPolicy {
        enter_after: 3,
        leave_after: 2,
    };

    fn feed(t: &mut DeficitTracker, seq: &[Option<(u32, u32)>]) -> Vec<DeficitChange> {
        seq.iter()
            .map(|n| t.observe(POLICY, n.map(|(s, r)| s < r)))
            .collect()
    }

    #[test]
    fn a_deficit_is_entered_after_the_configured_number_of_consecutive_samples() {
        let mut t = DeficitTracker::default();
        let changes = feed(
            &mut t,
            &[Some((0, 1)), Some((0, 1)), Some((0, 1)), Some((0, 1))],
        );
        assert_eq!(
            changes,
            [
                DeficitChange::None,
                DeficitChange::None,
                DeficitChange::Entered,
                DeficitChange::None
            ]
        );
        assert!(t.in_deficit);
    }

    #[test]
    fn flapping_around_the_threshold_neither_enters_nor_leaves_twice() {
        let mut t = DeficitTracker::default();
        let below = Some((0, 1));
        let ok = Some((1, 1));
        // Two below, one ok, two below: never three in a row.
        let changes = feed(&mut t, &[below, below, ok, below, below, ok]);
        assert!(changes.iter().all(|c| *c == DeficitChange::None));
        // Enter, then flap: one good sample at a time never leaves.
        let changes = feed(&mut t, &[below, below, below, ok, below, ok, below]);
        assert_eq!(
            changes
                .iter()
                .filter(|c| **c == DeficitChange::Entered)
                .count(),
            1
        );
        assert!(!changes.contains(&DeficitChange::Left));
        // Two good in a row leave.
        assert_eq!(
            feed(&mut t, &[ok, ok]),
            [DeficitChange::None, DeficitChange::Left]
        );
    }

    #[test]
    fn failed_samples_neither_reset_nor_advance_a_streak() {
        let mut t = DeficitTracker::default();
        let changes = feed(
            &mut t,
            &[Some((0, 2)), None, Some((1, 2)), None, None, Some((1, 2))],
        );
        assert_eq!(changes.last(), Some(&DeficitChange::Entered));
    }

    #[test]
    fn one_region_keeps_one_spare_and_two_or_more_keep_two() {
        assert_eq!(required_spares(None, 0), 1, "no config read yet: N+1");
        assert_eq!(required_spares(None, 1), 1, "N+1");
        assert_eq!(required_spares(None, 2), 2, "N+2");
        assert_eq!(required_spares(None, 3), 2, "still N+2");
    }

    #[test]
    fn the_fleets_override_wins_over_the_regions() {
        assert_eq!(required_spares(Some(0), 2), 0);
        assert_eq!(required_spares(Some(5), 1), 5);
        assert_eq!(required_spares(Some(1), 3), 1);
    }

    #[test]
    fn health_prefers_stale_then_deficit_then_the_newest_sample() {
        let now = 1_000_000;
        assert_eq!(health(now, 15, None, false, None), Health::Unknown);
        assert_eq!(
            health(now, 15, Some((now - 46_000, true)), true, None),
            Health::Stale
        );
        assert_eq!(
            health(now, 15, Some((now - 1_000, false)), true, None),
            Health::Deficit
        );
        assert_eq!(
            health(now, 15, Some((now - 1_000, false)), false, None),
            Health::Unknown
        );
        assert_eq!(
            health(now, 15, Some((now - 1_000, true)), false, None),
            Health::Healthy
        );
        let confirming = pending(
            DeficitTracker {
                below_streak: 1,
                ..DeficitTracker::default()
            },
            POLICY,
        );
        assert_eq!(
            health(now, 15, Some((now - 1_000, true)), false, confirming),
            Health::Pending
        );
    }

    #[test]
    fn a_request_spans_from_its_filing_to_its_end_or_now_while_open() {
        let done = Annotation {
            provision_id: 1,
            requested_at: 100,
            finished_at: Some(400),
            state: ProvisionState::Failed,
        };
        assert_eq!(done.end(1_000), 400);
        assert_eq!(
            (done.outcome_words(), done.outcome_class()),
            ("failed".to_owned(), "failed")
        );
        // Clipped to the window; outside it, nothing.
        assert_eq!(done.span_within(0, 1_000), Some((100, 400)));
        assert_eq!(done.span_within(200, 300), Some((200, 300)));
        assert_eq!(done.span_within(401, 1_000), None);
        assert_eq!(done.span_within(0, 100), None);
        let open = Annotation {
            finished_at: None,
            state: ProvisionState::Executing,
            ..done.clone()
        };
        assert_eq!(open.end(700), 700, "runs to now");
        assert_eq!(open.span_within(0, 700), Some((100, 700)));
        assert_eq!(
            (open.outcome_words(), open.outcome_class()),
            ("open (executing)".to_owned(), "open")
        );
        // A clock behind the filing never makes a span run backwards.
        assert_eq!(open.end(50), 100);
    }

    #[test]
    fn n_plus_is_the_spare_count_beside_the_requirement() {
        assert_eq!(n_plus_words(1, 1), "N+1 of N+1 required");
        assert_eq!(n_plus_words(0, 2), "N+0 of N+2 required");
        assert_eq!(n_plus_words(3, 1), "N+3 of N+1 required");
    }

    #[test]
    fn a_pending_change_names_its_direction_and_its_count() {
        let entering = DeficitTracker {
            below_streak: 1,
            ..DeficitTracker::default()
        };
        let p = pending(entering, POLICY).unwrap();
        assert_eq!(p.words(), "deficit pending, 1 of 3 samples");
        let leaving = DeficitTracker {
            healthy_streak: 1,
            in_deficit: true,
            ..DeficitTracker::default()
        };
        assert_eq!(
            pending(leaving, POLICY).unwrap().words(),
            "recovery pending, 1 of 2 samples"
        );
        assert_eq!(pending(DeficitTracker::default(), POLICY), None);
    }

    proptest::proptest! {
        /// Whatever the samples and the rule, the shown status never contradicts the verdict
        /// it stands beside: `healthy` only when the rule's answer is not short (at or above
        /// required by yubaba's count; absorbed, or by the count when absorption could not be
        /// judged), `deficit` only when it is, and a change still being confirmed reads
        /// `pending`, with a count below its goal.
        #[test]
        fn the_status_never_contradicts_the_newest_numbers(
            enter_after in 1u32..5,
            leave_after in 1u32..5,
            absorption_rule in proptest::bool::ANY,
            samples in proptest::collection::vec(
                proptest::option::weighted(
                    0.9,
                    (0u32..4, 0u32..4, proptest::option::of(proptest::bool::ANY)),
                ),
                1..60,
            ),
        ) {
            let policy = DeficitPolicy { enter_after, leave_after };
            let rule = if absorption_rule { HeadroomRule::Absorption } else { HeadroomRule::SpareCount };
            let mut t = DeficitTracker::default();
            let now = 1_000_000;
            for sample in samples {
                let short = sample.map(|(s, r, absorbed)| short_under(rule, s, r, absorbed));
                t.observe(policy, short);
                let p = pending(t, policy);
                let status = health(now, 15, Some((now, sample.is_some())), t.in_deficit, p);
                if let Some(p) = p {
                    proptest::prop_assert!(p.samples >= 1 && p.samples < p.of);
                }
                if let Some((spare, required, absorbed)) = sample {
                    let short = match (rule, absorbed) {
                        (HeadroomRule::Absorption, Some(a)) => !a,
                        _ => spare < required,
                    };
                    match status {
                        Health::Healthy => proptest::prop_assert!(!short),
                        Health::Deficit => proptest::prop_assert!(short),
                        Health::Pending => proptest::prop_assert!(p.is_some()),
                        other => proptest::prop_assert!(false, "{other:?} after an ok sample"),
                    }
                }
            }
        }
    }

    #[test]
    fn the_step_keeps_every_range_within_the_chart_points() {
        const MIN: i64 = 60_000;
        const HOUR: i64 = 60 * MIN;
        for r in Range::ALL {
            let (step, res) = step_for(r.millis(), CHART_POINTS, STEP_MIN_MILLIS);
            assert!(r.millis() / step <= CHART_POINTS, "{r:?}");
            assert_eq!(res, Resolution::dividing(step), "{r:?}");
        }
        for step in DEFAULT_STEPS {
            let res = Resolution::dividing(step);
            if res != Resolution::Raw {
                assert_eq!(step % res.bucket_millis(), 0);
                assert!(step / res.bucket_millis() <= 15, "{step}: rows a point");
            }
        }
        let at_least_30s = |r: Range| step_for(r.millis(), CHART_POINTS, 30_000);
        assert_eq!(at_least_30s(Range::H1), (30_000, Resolution::Raw));
        assert_eq!(at_least_30s(Range::H6), (MIN, Resolution::Minute));
        assert_eq!(at_least_30s(Range::H24), (5 * MIN, Resolution::FiveMinutes));
        assert_eq!(at_least_30s(Range::D7), (HOUR, Resolution::Hour));
        assert_eq!(at_least_30s(Range::D30), (2 * HOUR, Resolution::TwoHours));
        assert_eq!(at_least_30s(Range::D90), (6 * HOUR, Resolution::SixHours));
        assert_eq!(
            step_for(Range::H1.millis(), CHART_POINTS, 0),
            (10_000, Resolution::Raw)
        );
        // 90 days and 7 minutes still fit 360 whole six-hour steps.
        assert_eq!(
            step_for(Range::D90.millis() + 7 * MIN, CHART_POINTS, 0).0,
            6 * HOUR
        );
        // Beyond the ladder: whole two-day steps.
        assert_eq!(
            step_for(1_000 * 24 * HOUR, CHART_POINTS, 0),
            (96 * HOUR, Resolution::SixHours)
        );
        assert_eq!(Resolution::dividing(7 * HOUR), Resolution::Hour);
        assert_eq!(Resolution::dividing(4 * HOUR), Resolution::TwoHours);
        assert_eq!(Resolution::dividing(12 * HOUR), Resolution::SixHours);
        assert_eq!(Resolution::dividing(90_000), Resolution::Raw);
        assert_eq!(Resolution::dividing(0), Resolution::Raw);
        assert_eq!(
            serde_json::to_value(Resolution::SixHours).unwrap(),
            "six_hours"
        );
        assert_eq!(
            serde_json::to_value(Resolution::TwoHours).unwrap(),
            "two_hours"
        );
        assert_eq!(Range::parse("7d"), Some(Range::D7));
        assert_eq!(Range::parse("7D"), None);
    }
}
