//! A deficit turned into a restore a person approves: `propose` files one request (requester
//! `system`) for the machines missing, through the same `provisioning::requests::create` every
//! request goes through (so it renders with the fleet's secret sources and waits for a human
//! approver under four-eyes); `recovered` supersedes a proposal nobody approved yet; `resume`
//! settles and files what a crash or an error left undone (at start and on every scraper
//! pass).
//! Entering and leaving are announced by webhook.
//!
//! A deficit that outlives its proposal (rejected, expired, failed, cancelled, or a restore
//! that succeeded but was too small: capped at `COUNT_MAX`, or required grew) gets a
//! follow-up (`domain::deficit::follow_up`): once no request for the fleet is open, after
//! `deficit_enter_samples` further samples below required, at most one per
//! `proposal_cooldown` after the previous proposal, and never within the approval window of a
//! person's rejection or cancellation. The deficit records the latest request and keeps the
//! earlier ones.
//!
//! The evidence (the leader's status body and the streak's samples) is written as an
//! `evidence` line on the request's timeline, so the request's page shows why it was filed.
//! Both copies are bounded ([`EVIDENCE_MAX_BYTES`]): a bigger status body is replaced by its
//! numbers and ids (`"truncated": true`). The timeline's copy stays with the request when
//! retention deletes the ended deficit.
//!
//! Under a fleet's `headroom_rule = "absorption"` a deficit is a sample whose absorption
//! answer is short (`domain::capacity::short_under`), and its proposal asks for that answer's
//! machines needed, capped like the count ([`Gap`]); its reason and evidence name the worst
//! loss and what is short.
//!
//! A flapping fleet (in and out of deficit every few samples) would otherwise file a proposal
//! per cycle: a deficit entered within `settings.proposal_cooldown` of the fleet's last
//! proposal being superseded by recovery files none at once ([`deferral`]); `record` files it
//! on the first sample after the cool-down if the deficit is still open. Such a deficit is
//! announced by webhook only once its proposal is filed, so flapping sends no webhooks either.

use std::time::Duration;

use serde_json::json;

use crate::auth::Caller;
use crate::context::Ctx;
use crate::db;
use crate::db::fleet_deficits::{self, DeficitRow, StreakSample, Superseded};
use crate::db::provision_events::{self, NewEvent};
use crate::domain::absorption::Absorption;
use crate::domain::capacity::{n_plus_words, DeficitPolicy, Observation};
use crate::domain::clock::format_utc;
use crate::domain::fleet::HeadroomRule;
use crate::domain::millis;
use crate::domain::{Actor, ProvisionState, UnixMillis};
use crate::error::OpError;
use crate::provisioning::notify::{self, FleetEvent};
use crate::provisioning::requests::Filing;
use crate::provisioning::transition::{self, Transition};
use crate::provisioning::{requests, NewRequest, COUNT_MAX, REASON_MAX};

/// The reason a superseded proposal carries.
pub const RECOVERED_REASON: &str = "headroom recovered before approval";

/// What a deficit's proposal came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposal {
    /// A restore request was filed.
    Filed(i64),
    /// A request for the fleet was already open: none was filed, the deficit points at it.
    AlreadyOpen(i64),
    /// Filing was refused; the deficit's note says why.
    NotFiled(String),
    /// Nothing to do: the deficit is gone, already settled, or already over (a request filed
    /// while it ended and was settled is superseded, see [`propose`]).
    Settled,
}

/// Most bytes of evidence stored for one deficit, and on its request's timeline.
pub const EVIDENCE_MAX_BYTES: usize = 16 * 1024;

/// Room kept under [`EVIDENCE_MAX_BYTES`] for the timeline line's wrapper (`{"deficit_id":…,
/// "evidence":…}`), so the deficit's evidence fits the timeline's bound as it is.
const TIMELINE_WRAPPER_BYTES: usize = 64;

/// Most samples of the streak kept as evidence (fewer when `deficit_enter_samples` is lower).
pub const STREAK_EVIDENCE_MAX: u32 = 50;

/// How many of the streak's samples the evidence keeps: the streak that entered (at most
/// `enter_after`, however long the stored streak grew), never more than
/// [`STREAK_EVIDENCE_MAX`].
pub fn streak_len(policy: DeficitPolicy, below_streak: u32) -> u32 {
    below_streak
        .min(policy.enter_after)
        .clamp(1, STREAK_EVIDENCE_MAX)
}

/// The evidence stored with a deficit: the leader's status body and the streak's samples, as
/// JSON of at most `EVIDENCE_MAX_BYTES` less the timeline's wrapper. A status body too big
/// for that (the scraper caps what it reads, but re-serialised numbers can grow) is replaced
/// by the numbers and ids seen, with `"truncated": true`.
pub fn evidence(
    obs: &Observation,
    streak: &[StreakSample],
    cap: u32,
    rule: HeadroomRule,
) -> String {
    let limit = EVIDENCE_MAX_BYTES - TIMELINE_WRAPPER_BYTES;
    let suspicious = suspicious(obs.required, obs.members.len(), cap);
    // The rule that judged, and absorption's answer (a few hundred bytes: region labels are
    // capped at 64), kept in both the full and the reduced evidence.
    let mut full = json!({
        "status": obs.evidence,
        "samples": streak,
        "rule": rule.as_str(),
        "absorption": obs.absorption,
    });
    if let Some(s) = &suspicious {
        full["suspicious"] = s.clone();
    }
    let full = full.to_string();
    if full.len() <= limit {
        return full;
    }
    // Our own numbers: at most STREAK_EVIDENCE_MAX samples of six bounded fields each, a few
    // KiB at worst (the unit test below pins it with every field at its widest).
    let mut reduced = json!({
        "truncated": true,
        "status": {
            "source": obs.source.as_str(),
            "spare": obs.spare,
            "required": obs.required,
            "leader_id": obs.leader_id,
            "term": obs.term,
        },
        "samples": streak,
        "rule": rule.as_str(),
        "absorption": obs.absorption,
    });
    if let Some(s) = suspicious {
        reduced["suspicious"] = s;
    }
    reduced.to_string()
}

/// A deficit deferred by the cool-down: when its proposal falls due, and the note saying so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferral {
    /// The first sample at or after this files the proposal if the deficit is still open.
    pub due_at: UnixMillis,
    /// What the fleet page shows until then.
    pub note: String,
}

/// Whether a deficit entered at `at` waits: it does when the fleet's last proposal was
/// superseded by recovery less than `cooldown` before (`last`, as found since `at −
/// cooldown`); `None` files at once.
pub fn deferral(at: UnixMillis, last: Option<Superseded>, cooldown: Duration) -> Option<Deferral> {
    let last = last?;
    let cooldown = millis(cooldown);
    let due_at = last.at.saturating_add(cooldown);
    (due_at > at).then(|| Deferral {
        due_at,
        note: format!(
            "flapping: request #{} was superseded by recovery at {}; a new proposal is filed at \
             {} if the deficit lasts",
            last.provision_id,
            format_utc(last.at),
            format_utc(due_at)
        ),
    })
}

/// Machines a restore asks for: the missing spares, at least one and at most the fleet's
/// `max_restore_machines` (`cap`, itself at most a request's maximum). A larger gap stays a
/// deficit once this restore has joined, and gets a follow-up proposal (see `domain::deficit::follow_up`), so
/// a wrong or hostile `required` costs at most `cap` machines per approval.
pub fn restore_count(spare: i64, required: i64, cap: u32) -> u32 {
    let missing = required.saturating_sub(spare).max(1);
    let cap = cap.clamp(1, COUNT_MAX);
    u32::try_from(missing).unwrap_or(cap).min(cap)
}

/// What a restore must make up, as the fleet's rule measures it now.
#[derive(Debug, Clone, PartialEq)]
pub enum Gap {
    /// yubaba's count: `spare` of `required`.
    Spares { spare: i64, required: i64 },
    /// Absorption's answer: the worst loss, what is short, and the machines that cover it.
    Absorption(Absorption),
}

impl Gap {
    /// The gap under `rule`: absorption's answer when the rule asks for it and the newest
    /// sample judged one, else yubaba's count (the same fallback the deficit rule takes).
    pub fn under(rule: HeadroomRule, numbers: (i64, i64), absorption: Option<Absorption>) -> Gap {
        match (rule, absorption) {
            (HeadroomRule::Absorption, Some(a)) => Gap::Absorption(a),
            _ => Gap::Spares {
                spare: numbers.0,
                required: numbers.1,
            },
        }
    }

    /// Machines a restore asks for, capped like [`restore_count`]; `None` when absorption
    /// says no number of restore machines makes every loss absorbable (a person decides).
    pub fn count(&self, cap: u32) -> Option<u32> {
        match self {
            Gap::Spares { spare, required } => Some(restore_count(*spare, *required, cap)),
            Gap::Absorption(a) => a
                .machines_needed
                .map(|n| n.max(1).min(cap.clamp(1, COUNT_MAX))),
        }
    }

    /// Machines missing before the cap (for saying the cap cut the count).
    fn wanted(&self) -> i64 {
        match self {
            Gap::Spares { spare, required } => required.saturating_sub(*spare).max(1),
            Gap::Absorption(a) => i64::from(a.machines_needed.unwrap_or(0).max(1)),
        }
    }

    /// The gap in the words the reason and the evidence line use.
    pub fn words(&self) -> String {
        match self {
            Gap::Spares { spare, required } => format!("spare {spare} of required {required}"),
            Gap::Absorption(a) => format!("absorption short: {}", a.words()),
        }
    }
}

/// Whether a scraped `required` is beyond belief: more than every member of the cluster plus
/// the most one proposal adds. It is still acted on (capped), but the evidence says so.
pub fn suspicious(required: u32, members: usize, cap: u32) -> Option<serde_json::Value> {
    let members = u32::try_from(members).unwrap_or(u32::MAX);
    (required > members.saturating_add(cap)).then(|| {
        json!({
            "required": required,
            "members": members,
            "max_restore_machines": cap,
            "why": format!(
                "yubaba reported required {required}, above its {members} members + \
                 max_restore_machines {cap}"
            ),
        })
    })
}

/// How every reason headroom writes for deficit `id` begins: it names the deficit, so a
/// request whose filing committed while recording it failed is recognised as ours.
pub fn reason_prefix(id: i64) -> String {
    format!("headroom deficit #{id}:")
}

/// The request's reason, for the approver, with the gap it was filed for (numbers, or the
/// worst loss and its shortfall) and, when the fleet's cap cut the count, saying so.
fn reason((id, since): (i64, UnixMillis), gap: &Gap, count: u32) -> String {
    let missing = gap.wanted();
    let capped = if missing > i64::from(count) {
        let what = match gap {
            Gap::Spares { .. } => "missing",
            Gap::Absorption(_) => "needed",
        };
        format!(
            "; capped at {count} by the fleet's max_restore_machines ({missing} {what}; a \
             follow-up is proposed if the deficit lasts)"
        )
    } else {
        String::new()
    };
    let reason = |gap_words: &str| {
        format!(
            "{} {gap_words} (since {}); restore proposed by headroom{capped}",
            reason_prefix(id),
            format_utc(since)
        )
    };
    let full = reason(&gap.words());
    // A request's reason has a limit; the words carry values a leader reports (region labels,
    // ids, sizes), so a long answer is cut to its verdict, and the evidence line keeps it whole.
    if full.chars().count() <= REASON_MAX {
        return full;
    }
    reason(match gap {
        Gap::Spares { .. } => "spares below required",
        Gap::Absorption(_) => "absorption short (the worst loss is in the evidence)",
    })
}

/// What the evidence line adds when the evidence calls the scraped `required` suspicious.
fn suspicious_note(evidence: &serde_json::Value) -> String {
    evidence["suspicious"]["why"]
        .as_str()
        .map(|why| format!("; suspicious: {why}"))
        .unwrap_or_default()
}

/// A refusal as a note on the deficit: what the fleet page shows instead of a request.
fn refusal_note(e: &OpError) -> String {
    match e {
        // The cause chain goes to the log; the note keeps only its outermost words.
        OpError::Internal(err) => {
            tracing::warn!(error = ?err, "restore proposal could not be filed");
            format!("no restore was filed: {err}")
        }
        other => format!("no restore was filed: {other}"),
    }
}

/// Files the deficit's restore proposal, unless a request for the fleet is already open (then
/// the deficit notes which one) or filing is refused (then it notes why). Sends
/// `fleet.deficit_entered` in the transaction that records the outcome. Never files twice for
/// one deficit: an already settled deficit is left alone.
#[tracing::instrument(skip_all, fields(deficit.id = deficit_id), err)]
pub async fn propose(ctx: &Ctx, deficit_id: i64) -> anyhow::Result<Proposal> {
    let (d, open, own, numbers) = {
        let mut conn = ctx.pool.acquire().await?;
        let Some(d) = fleet_deficits::get(&mut conn, deficit_id).await? else {
            return Ok(Proposal::Settled);
        };
        let open = fleet_deficits::open_request(&mut conn, &d.fleet).await?;
        // Our own filing for this deficit, committed while recording it failed: adopt it, so
        // recovery still supersedes it (an operator's request is never superseded).
        let own = match open {
            Some(id) => {
                fleet_deficits::is_own_proposal(&mut conn, id, &reason_prefix(d.id)).await?
            }
            None => false,
        };
        // A follow-up (or a late resume) asks for what is missing now, not at detection.
        let now_row = db::fleet_status::board_one(&mut conn, &d.fleet).await?;
        // Absorption's newest answer; one that no longer parses reads as not judged.
        let absorption: Option<Absorption> = now_row
            .as_ref()
            .and_then(|r| r.absorption.as_deref())
            .and_then(|a| serde_json::from_str(a).ok());
        let numbers = now_row
            .and_then(|r| r.spare.zip(r.required))
            .unwrap_or((d.spare, d.required));
        (d, open, own, (numbers, absorption))
    };
    let (numbers, absorption) = numbers;
    if d.provision_id.is_some() || !d.note.is_empty() || d.ended_at.is_some() {
        return Ok(Proposal::Settled);
    }
    let outcome = match open {
        Some(id) if own => Proposal::Filed(id),
        Some(id) => Proposal::AlreadyOpen(id),
        None => file(ctx, &d, numbers, absorption.clone()).await?,
    };
    // A follow-up is not a new deficit: the webhook announced it with the first proposal.
    let followup = d.proposed_at.is_some();
    let (provision_id, note) = match &outcome {
        Proposal::Filed(id) => (Some(*id), String::new()),
        Proposal::AlreadyOpen(id) => (
            Some(*id),
            format!("request #{id} was already open, so no second one was filed"),
        ),
        Proposal::NotFiled(note) => (None, note.clone()),
        Proposal::Settled => return Ok(Proposal::Settled),
    };
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    if !fleet_deficits::settle_proposal(&mut tx, d.id, provision_id, &note, now).await? {
        // Another proposer settled it first (a resume racing a late filing): keep theirs.
        return Ok(Proposal::Settled);
    }
    // The deficit ended while this filing ran (a resume racing the fleet's own samples) and
    // its end was already settled without seeing the request: nobody else will supersede it,
    // and "entered" must not follow the "left" already sent. (Ended but not yet settled, the
    // settlement finds the request and supersedes it.)
    let settled_meanwhile = fleet_deficits::get(&mut tx, d.id)
        .await?
        .filter(|now_d| now_d.settled_at.is_some());
    if let Some(ended) = settled_meanwhile {
        // Unless a newer deficit is open by now (it may stand on this request).
        supersede_if_healthy(&mut tx, ctx, now, &ended).await?;
        tx.commit().await?;
        ctx.board.invalidate();
        return Ok(Proposal::Settled);
    }
    if let Proposal::Filed(id) = outcome {
        let evidence: serde_json::Value =
            serde_json::from_str(&d.evidence).unwrap_or(serde_json::Value::Null);
        // Stored evidence already fits (see `evidence`); one written before that bound, or
        // grown by a round trip, is replaced by the deficit's own numbers rather than copied.
        let mut details = json!({ "deficit_id": d.id, "evidence": evidence });
        if details.to_string().len() > EVIDENCE_MAX_BYTES {
            details = json!({
                "deficit_id": d.id,
                "evidence": { "truncated": true, "spare": d.spare, "required": d.required },
            });
        }
        provision_events::append(
            &mut tx,
            NewEvent {
                provision_id: id,
                at: now,
                kind: "evidence",
                machine: None,
                message: &format!(
                    "{} by headroom for deficit #{}: {}, in deficit since {}{}{}",
                    if followup {
                        "follow-up proposed"
                    } else {
                        "proposed"
                    },
                    d.id,
                    gap_words(numbers, absorption.as_ref()),
                    format_utc(d.started_at),
                    earlier(&d.earlier_provisions),
                    suspicious_note(&evidence)
                ),
                // yubaba's status answer and our own numbers: nothing from the fleet's secrets.
                details: &details,
            },
        )
        .await?;
    }
    if followup {
        tx.commit().await?;
        ctx.board.invalidate();
        return Ok(outcome);
    }
    notify::enqueue_fleet_event(
        &mut tx,
        ctx,
        now,
        &FleetEvent::DeficitEntered {
            fleet: &d.fleet,
            spare: u32::try_from(d.spare).unwrap_or(0),
            required: u32::try_from(d.required).unwrap_or(0),
            since: d.started_at,
            provision_id,
            note: &note,
        },
    )
    .await?;
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(outcome)
}

/// Files the restore request itself; a refusal becomes `NotFiled`, never an error, so one bad
/// template cannot stop a fleet's deficit from being recorded and shown.
///
/// The "none open" check runs inside the filing's write transaction
/// (`requests::create_unless_open`), so a person filing at the same moment cannot end up
/// beside a second, headroom-filed request.
async fn file(
    ctx: &Ctx,
    d: &DeficitRow,
    numbers: (i64, i64),
    absorption: Option<Absorption>,
) -> anyhow::Result<Proposal> {
    let spec = match crate::fleets::get(ctx, &Caller::system(), &d.fleet).await {
        Ok(f) => f.spec,
        Err(crate::error::OpError::NotFound(_)) => return Ok(Proposal::Settled),
        Err(e) => return Ok(Proposal::NotFiled(format!("no restore was filed: {e}"))),
    };
    let gap = Gap::under(spec.headroom_rule(), numbers, absorption);
    // A deferred proposal is released by any sample; absorption may read absorbed by then,
    // and a reason saying "short: survives losing any node" would contradict itself.
    if let Gap::Absorption(a) = &gap {
        if a.absorbed() {
            return Ok(Proposal::NotFiled(format!(
                "no restore was filed: absorption reads absorbed now ({})",
                a.words()
            )));
        }
    }
    let Some(count) = gap.count(spec.max_restore_machines()) else {
        return Ok(Proposal::NotFiled(format!(
            "no restore was filed: {}; no number of {} machines makes every loss absorbable \
             (a workload larger than one machine, a region loss new machines would share, or \
             no allocatable declared for the config), so a person must decide",
            gap.words(),
            spec.restore_machine_config()
        )));
    };
    let request = NewRequest {
        fleet: d.fleet.clone(),
        machine_config: spec.restore_machine_config().to_string(),
        template: None,
        count: i64::from(count),
        reason: reason((d.id, d.started_at), &gap, count),
    };
    Ok(
        match requests::create_unless_open(ctx, &Caller::system(), &request).await {
            Ok(Filing::Filed(p)) => Proposal::Filed(p.id),
            Ok(Filing::AlreadyOpen(id)) => Proposal::AlreadyOpen(id),
            Err(e) => Proposal::NotFiled(refusal_note(&e)),
        },
    )
}

/// The evidence line's words for what the fleet lacks now: yubaba's count, and absorption's
/// answer beside it when one was judged (the line is written whatever the rule).
fn gap_words((spare, required): (i64, i64), absorption: Option<&Absorption>) -> String {
    let count = match (u32::try_from(spare), u32::try_from(required)) {
        (Ok(s), Ok(r)) => format!(
            "{} (spare {spare} of required {required})",
            n_plus_words(s, r)
        ),
        _ => format!("spare {spare} of required {required}"),
    };
    match absorption {
        Some(a) => format!("{count}; absorption: {}", a.words()),
        None => count,
    }
}

/// The earlier requests as the evidence line names them (empty when none).
fn earlier(ids: &[i64]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let list: Vec<String> = ids.iter().map(|id| format!("#{id}")).collect();
    format!("; earlier requests {}", list.join(", "))
}

/// Settles a deficit that was left, once: records `settled_at`, then (in the same
/// transaction) — unless the fleet is in a newer deficit by now — supersedes every proposal of
/// headroom's for the fleet still awaiting approval (its own, one it found open, or one whose
/// recording a crash cut off: the fleet is healthy, nobody needs them); one already approved
/// or running goes on, since a person chose it, and a person's request is never touched. It
/// sends `fleet.deficit_left` only when the deficit's entering was announced and no newer
/// deficit of the fleet exists (a late settlement must not say "left" after a newer
/// "entered"). A deficit not ended, or already settled, is left alone; one whose settlement
/// failed is settled by the next `resume`. `true` when this call settled it.
#[tracing::instrument(skip_all, fields(deficit.id = deficit_id), err)]
pub async fn recovered(ctx: &Ctx, deficit_id: i64) -> anyhow::Result<bool> {
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let Some(d) = fleet_deficits::get(&mut tx, deficit_id).await? else {
        return Ok(false);
    };
    // The sample's follow-up and `resume` may both get here; the first one settles.
    if !fleet_deficits::mark_settled(&mut tx, d.id, now).await? {
        return Ok(false);
    }
    supersede_if_healthy(&mut tx, ctx, now, &d).await?;
    // Entering is announced with the first proposal's settlement (`proposed_at`); a deficit
    // that never got there (a flapping fleet's, ended inside the cool-down, or one whose
    // filing never happened) announced nothing, and announcing only its end would be noise.
    let announced = d.proposed_at.is_some();
    let newer = fleet_deficits::newer_exists(&mut tx, d.fleet_id, d.id, d.detected_at).await?;
    if announced && !newer {
        let now_row = db::fleet_status::board_one(&mut tx, &d.fleet).await?;
        let numbers = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
        notify::enqueue_fleet_event(
            &mut tx,
            ctx,
            now,
            &FleetEvent::DeficitLeft {
                fleet: &d.fleet,
                spare: numbers(now_row.as_ref().and_then(|r| r.spare)),
                required: numbers(now_row.as_ref().and_then(|r| r.required)),
                since: d.started_at,
                provision_id: d.provision_id,
            },
        )
        .await?;
    }
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(true)
}

/// Supersedes the fleet's proposals still awaiting approval, for ended deficit `d`, unless the
/// fleet is in a newer deficit now (whose proposal one of them may be). Only headroom's own
/// requests (`requester` `system`) are read, so a person's request, and anything approved or
/// running, is never touched.
async fn supersede_if_healthy(
    tx: &mut sqlx::AnyConnection,
    ctx: &Ctx,
    now: UnixMillis,
    d: &DeficitRow,
) -> anyhow::Result<()> {
    let open_now = db::fleet_status::tracker(&mut *tx, d.fleet_id)
        .await?
        .open_deficit_id;
    if open_now.is_some_and(|open| open != d.id) {
        return Ok(());
    }
    for pid in fleet_deficits::pending_proposals(&mut *tx, &d.fleet).await? {
        let p = requests::load(&mut *tx, pid)
            .await
            .map_err(|e| anyhow::anyhow!("provision {pid}: {e}"))?;
        let Some(p) = p.filter(|p| p.state == ProvisionState::PendingApproval) else {
            continue;
        };
        transition::apply(
            tx,
            ctx,
            now,
            Transition {
                provision_id: p.id,
                from: p.state,
                to: ProvisionState::Superseded,
                actor: &Actor::System,
                reason: RECOVERED_REASON,
                details: json!({ "deficit_id": d.id }),
            },
        )
        .await?;
    }
    Ok(())
}

/// Finishes what a crash or an error left undone after a sample's commit: settles the ended
/// deficits whose settlement did not happen ([`recovered`]), then files the proposals of open
/// deficits left unfiled (committed or released for a follow-up, never settled). One deficit
/// that fails is logged and counted, and the others are still handled; it is tried again on
/// the next call. Called at start, before the scraper runs, and on every scraper supervisor
/// pass; two indexed reads that find nothing when nothing is due
/// (`fleet_deficits::unsettled`, `fleet_deficits::unfiled`).
#[tracing::instrument(skip_all, err)]
pub async fn resume(ctx: &Ctx) -> anyhow::Result<Resumed> {
    let (unsettled, unfiled) = {
        let mut conn = ctx.pool.acquire().await?;
        (
            fleet_deficits::unsettled(&mut conn).await?,
            fleet_deficits::unfiled(&mut conn).await?,
        )
    };
    let mut done = Resumed::default();
    // Settlements first: the older deficit's end is told before a newer one's proposal.
    for id in unsettled {
        match recovered(ctx, id).await {
            Ok(true) => done.settled += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(deficit.id = id, error = ?e, "deficit end not settled yet");
                done.failed += 1;
            }
        }
    }
    for id in unfiled {
        match propose(ctx, id).await {
            Ok(Proposal::Settled) => {}
            Ok(_) => done.filed += 1,
            Err(e) => {
                tracing::warn!(deficit.id = id, error = ?e, "restore proposal not filed yet");
                done.failed += 1;
            }
        }
    }
    Ok(done)
}

/// What one [`resume`] finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resumed {
    /// Open deficits whose proposal was settled (filed, found open, or refused with a note).
    pub filed: usize,
    /// Ended deficits whose end was settled (proposal superseded, `fleet.deficit_left` sent).
    pub settled: usize,
    /// Deficits whose filing or settlement failed again (logged; tried on the next call).
    pub failed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::absorption::{Basis, Loss};

    #[test]
    fn a_restore_asks_for_the_missing_spares_within_the_fleets_cap() {
        assert_eq!(restore_count(1, 3, 20), 2);
        assert_eq!(restore_count(0, 1, 20), 1);
        // Never zero (the deficit exists, so at least one is missing) and never over the cap.
        assert_eq!(restore_count(3, 3, 20), 1);
        assert_eq!(restore_count(0, 500, 20), COUNT_MAX);
        assert_eq!(restore_count(i64::MIN, i64::MAX, 20), COUNT_MAX);
        assert_eq!(restore_count(0, 10_000, 2), 2);
        assert_eq!(restore_count(0, 3, 5), 3);
        // A cap outside 1..=COUNT_MAX (never stored, but never trusted) is clamped.
        assert_eq!(restore_count(0, 500, 0), 1);
        assert_eq!(restore_count(0, 500, u32::MAX), COUNT_MAX);
    }

    /// Absorption's answer with every field at its widest (a region label is at most 64).
    fn widest_absorption() -> Absorption {
        let loss = |kind: &str| Loss {
            worst: format!("{kind} {}", "r".repeat(64)),
            absorbed: false,
            short_memory_mb: u64::MAX,
            short_cpu_millis: u64::MAX,
        };
        Absorption {
            node_loss: loss("node"),
            region_loss: Some(loss("region")),
            machines_needed: Some(u32::MAX),
            basis: Basis::Committed,
            unanswered: u32::MAX,
        }
    }

    #[test]
    fn under_absorption_a_restore_asks_for_the_machines_needed_within_the_cap() {
        let mut a = widest_absorption();
        let gap = |a: &Absorption| Gap::under(HeadroomRule::Absorption, (3, 1), Some(a.clone()));
        a.machines_needed = Some(1);
        assert_eq!(gap(&a).count(5), Some(1));
        a.machines_needed = Some(4);
        assert_eq!(gap(&a).count(2), Some(2), "capped by max_restore_machines");
        a.machines_needed = Some(0);
        assert_eq!(gap(&a).count(2), Some(1), "a deficit asks for at least one");
        a.machines_needed = Some(u32::MAX);
        assert_eq!(gap(&a).count(u32::MAX), Some(COUNT_MAX));
        a.machines_needed = None;
        assert_eq!(
            gap(&a).count(2),
            None,
            "no number suffices: a person decides"
        );
        assert!(gap(&a).words().starts_with("absorption short: short "));
        // yubaba's count: the rule, or absorption not judged in the newest sample.
        assert_eq!(
            Gap::under(HeadroomRule::SpareCount, (0, 2), Some(a.clone())),
            Gap::Spares {
                spare: 0,
                required: 2
            }
        );
        assert_eq!(
            Gap::under(HeadroomRule::Absorption, (0, 2), None).count(5),
            Some(2)
        );
    }

    #[test]
    fn a_reason_stays_within_a_requests_limit_whatever_the_leader_reports() {
        let gap = Gap::Absorption(widest_absorption());
        let long = reason((i64::MAX, i64::MIN), &gap, 1);
        assert!(long.chars().count() <= REASON_MAX, "{}", long.len());
        assert!(long.starts_with(&reason_prefix(i64::MAX)), "{long}");
        assert!(long.contains("absorption short (the worst loss is in the evidence)"));
        assert!(long.contains("capped at 1"), "{long}");
        let mut a = widest_absorption();
        a.node_loss.worst = "node 1".into();
        a.region_loss = None;
        a.unanswered = 0;
        a.machines_needed = Some(1);
        let short = reason((7, 0), &Gap::Absorption(a), 1);
        assert!(short.contains("absorption short: short "), "{short}");
    }

    #[test]
    fn a_required_beyond_members_plus_the_cap_is_suspicious() {
        assert!(suspicious(4, 2, 2).is_none());
        let s = suspicious(5, 2, 2).unwrap();
        assert_eq!(s["members"], 2);
        assert!(s["why"].as_str().unwrap().contains("required 5"));
        assert!(suspicious(u32::MAX, usize::MAX, u32::MAX).is_none());
    }

    fn observation(evidence: serde_json::Value) -> Observation {
        Observation {
            absorption: None,
            source: crate::domain::capacity::Source::Derived,
            spare: u32::MAX,
            required: u32::MAX,
            leader_id: Some(u64::MAX),
            leader_url: None,
            term: Some(u64::MAX),
            members: vec![],
            evidence,
        }
    }

    /// A streak sample with every field at its widest.
    fn widest() -> StreakSample {
        StreakSample {
            at: i64::MIN,
            spare: i64::MIN,
            required: i64::MIN,
            source: "derived".into(),
            leader_id: Some(i64::MIN),
            term: Some(i64::MIN),
        }
    }

    #[test]
    fn evidence_fits_the_timeline_bound_even_truncated_with_every_field_at_its_widest() {
        let streak = vec![widest(); STREAK_EVIDENCE_MAX as usize];
        let huge = json!({ "x": vec![1e15_f64; 10_000] });
        let mut obs = observation(huge);
        obs.absorption = Some(widest_absorption());
        let e = evidence(&obs, &streak, 2, HeadroomRule::Absorption);
        assert!(
            e.len() + TIMELINE_WRAPPER_BYTES <= EVIDENCE_MAX_BYTES,
            "{}",
            e.len()
        );
        let v: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(v["truncated"], true);
        assert_eq!(v["status"]["leader_id"], u64::MAX);
        assert_eq!(v["samples"].as_array().unwrap().len(), 50);
        // The widest wrapper the timeline puts around it still fits.
        let line = json!({ "deficit_id": i64::MIN, "evidence": v }).to_string();
        assert!(line.len() <= EVIDENCE_MAX_BYTES, "{}", line.len());
    }

    #[test]
    fn evidence_that_fits_is_kept_whole() {
        let status = json!({ "headroom": { "spare": 0, "required": 1 }, "pad": "p".repeat(8000) });
        let e = evidence(
            &observation(status.clone()),
            &[widest()],
            u32::MAX,
            HeadroomRule::SpareCount,
        );
        let v: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(v["status"], status);
        assert!(v.get("truncated").is_none());
    }

    #[test]
    fn the_streak_kept_is_the_policys_and_at_most_fifty() {
        let p = |enter_after| DeficitPolicy {
            enter_after,
            leave_after: 1,
        };
        assert_eq!(streak_len(p(3), 3), 3);
        assert_eq!(streak_len(p(3), 900), 3);
        assert_eq!(streak_len(p(1000), 1000), STREAK_EVIDENCE_MAX);
        assert_eq!(streak_len(p(3), 0), 1);
    }

    #[test]
    fn a_deficit_waits_only_inside_the_cooldown_after_a_supersession() {
        let cooldown = Duration::from_secs(30 * 60);
        let last = Superseded {
            provision_id: 7,
            at: 1_000_000,
        };
        assert_eq!(deferral(1_000_000 + 45_000, None, cooldown), None);
        let d = deferral(1_000_000 + 45_000, Some(last), cooldown).unwrap();
        assert_eq!(d.due_at, 1_000_000 + 1_800_000);
        assert!(
            d.note
                .starts_with("flapping: request #7 was superseded by recovery at "),
            "{}",
            d.note
        );
        assert!(d.note.ends_with(" if the deficit lasts"), "{}", d.note);
        // At or after the due time it files at once.
        assert_eq!(deferral(1_000_000 + 1_800_000, Some(last), cooldown), None);
        // Huge values saturate instead of overflowing.
        let late = Superseded {
            provision_id: 1,
            at: i64::MAX - 5,
        };
        assert_eq!(
            deferral(0, Some(late), Duration::MAX).map(|d| d.due_at),
            Some(i64::MAX)
        );
    }
}
