//! The one writer of headroom history: each scrape tick's sample, its rollups, the fleet's
//! status row and the deficit tracker land in one transaction, so the board, the charts and
//! the deficit rule never disagree about what was seen. Filing a restore renders templates,
//! so it happens after the commit (`deficit::propose`), and so does settling a deficit that
//! was left (`deficit::recovered`); a crash or an error in between leaves the deficit unfiled
//! or unsettled, and `deficit::resume` (at start and on every scraper pass) finishes it.

use super::deficit;
use crate::audit::{self, Action};
use crate::context::Ctx;
use crate::db;
use crate::db::fleet_deficits::{self, NewDeficit};
use crate::db::fleet_status::{self, StoredTracker};
use crate::domain::capacity::{n_plus_words, Sample};
use crate::domain::deficit::{follow_up, step, FollowUp, OpenDeficit, Step};
use crate::domain::fleet::{FleetSpec, HeadroomRule, MAX_RESTORE_MACHINES_DEFAULT};
use crate::domain::millis;
use crate::domain::{Caller, UnixMillis};

/// What the deficit rule reads of the fleet's settings: its headroom rule and
/// `max_restore_machines`.
#[derive(Debug, Clone, Copy)]
struct Rules {
    rule: HeadroomRule,
    restore_cap: u32,
}

/// The fleet's rules (the defaults when the fleet was deleted meanwhile; a stored spec that no
/// longer reads back is an internal error naming the fleet). Read with every sample, so an
/// edited rule judges the very next one.
async fn rules(conn: &mut sqlx::AnyConnection, fleet: &str) -> anyhow::Result<Rules> {
    let spec = match db::fleets::get(conn, fleet).await? {
        Some(r) => Some(FleetSpec::from_stored(&r.name, &r.spec)?),
        None => None,
    };
    Ok(Rules {
        rule: spec
            .as_ref()
            .map_or(HeadroomRule::default(), FleetSpec::headroom_rule),
        restore_cap: spec.map_or(MAX_RESTORE_MACHINES_DEFAULT, |s| s.max_restore_machines()),
    })
}

/// What is left to do once the sample is committed.
enum AfterCommit {
    Nothing,
    Propose(i64),
    Recovered(i64),
}

/// Stores one sample of fleet `fleet` and applies the deficit rule to it; on entering a
/// deficit files its restore proposal (or, inside the cool-down after a proposal recovery
/// superseded, defers it), on leaving one settles it. A deferred proposal is filed by the
/// first sample (ok or not) at or after its due time while the deficit is still open. While a
/// deficit outlives its proposal, samples below required count towards a follow-up proposal
/// (`domain::deficit::follow_up`). A fleet deleted while it was being scraped is not an
/// error: nothing is written. Once the sample is committed, a proposal or settlement that
/// fails is logged, not returned: the sample is stored, and `resume` retries either.
///
/// The decisions are `domain::deficit`'s; this function reads what they need and writes what
/// they say.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn record(ctx: &Ctx, fleet: &str, sample: &Sample) -> anyhow::Result<()> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    let Some(fleet_id) = fleet_status::fleet_id(&mut tx, fleet).await? else {
        return Ok(());
    };
    db::fleet_samples::insert(&mut tx, fleet_id, sample).await?;
    let rules = rules(&mut tx, fleet).await?;
    let short = sample.short(rules.rule);
    let mut stored = fleet_status::tracker(&mut tx, fleet_id).await?;
    let change = stored.tracker.observe(ctx.settings.deficit, short);
    let open = OpenDeficit {
        id: stored.open_deficit_id,
        proposal_due_at: stored.proposal_due_at,
    };
    let after = match step(change, short, open, sample.at) {
        Step::Nothing => AfterCommit::Nothing,
        Step::Open => match &sample.outcome {
            Ok(_) => {
                let (id, deferred) =
                    open_deficit(&mut tx, ctx, fleet, fleet_id, sample, &stored, rules).await?;
                audit_deficit(
                    &mut tx,
                    sample,
                    rules.rule,
                    Action::FleetDeficitEntered,
                    fleet,
                    id,
                )
                .await?;
                stored.open_deficit_id = Some(id);
                stored.proposal_due_at = deferred;
                if deferred.is_some() {
                    AfterCommit::Nothing
                } else {
                    AfterCommit::Propose(id)
                }
            }
            // `step` opens only on a sample with numbers.
            Err(_) => AfterCommit::Nothing,
        },
        Step::Close(id) => {
            stored.open_deficit_id = None;
            fleet_deficits::end(&mut tx, id, sample.at).await?;
            audit_deficit(
                &mut tx,
                sample,
                rules.rule,
                Action::FleetDeficitLeft,
                fleet,
                id,
            )
            .await?;
            AfterCommit::Recovered(id)
        }
        Step::ReleaseDeferred(id) => {
            if fleet_deficits::release_deferred(&mut tx, id, sample.at).await? {
                AfterCommit::Propose(id)
            } else {
                AfterCommit::Nothing
            }
        }
        Step::ConsiderFollowUp(id) => {
            // Read only for fleets in deficit, by primary keys.
            let latest = fleet_deficits::latest_proposal(&mut tx, id).await?;
            let rule = latest.map_or(FollowUp::Nothing, |p| {
                follow_up(
                    &p,
                    sample.at,
                    ctx.settings.deficit.enter_after,
                    ctx.settings.proposal_cooldown,
                )
            });
            match rule {
                FollowUp::Nothing => AfterCommit::Nothing,
                FollowUp::Count => {
                    fleet_deficits::count_followup_sample(&mut tx, id).await?;
                    AfterCommit::Nothing
                }
                FollowUp::Release if fleet_deficits::release_followup(&mut tx, id).await? => {
                    AfterCommit::Propose(id)
                }
                FollowUp::Release => AfterCommit::Nothing,
            }
        }
    };
    fleet_status::upsert(&mut tx, fleet_id, sample, &stored).await?;
    tx.commit().await?;
    ctx.board.invalidate();
    match after {
        AfterCommit::Nothing => {}
        AfterCommit::Propose(id) => {
            if let Err(e) = deficit::propose(ctx, id).await {
                tracing::warn!(
                    deficit.id = id, error = ?e,
                    "sample recorded; proposal not filed yet (the next resume retries it)"
                );
            }
        }
        AfterCommit::Recovered(id) => {
            if let Err(e) = deficit::recovered(ctx, id).await {
                tracing::warn!(
                    deficit.id = id, error = ?e,
                    "sample recorded; deficit end not settled yet (the next resume retries it)"
                );
            }
        }
    }
    Ok(())
}

/// The audit entry for a deficit entered or left, by `system`, with the rule that judged, the
/// sample's numbers in yubaba's words and absorption's answer in words.
async fn audit_deficit(
    tx: &mut sqlx::AnyConnection,
    sample: &Sample,
    rule: HeadroomRule,
    action: Action,
    fleet: &str,
    deficit_id: i64,
) -> sqlx::Result<()> {
    let mut details = serde_json::json!({ "deficit_id": deficit_id, "rule": rule.as_str() });
    if let Some((spare, required)) = sample.numbers() {
        details["spare"] = spare.into();
        details["required"] = required.into();
        details["headroom"] = n_plus_words(spare, required).into();
    }
    if let Some(a) = sample
        .outcome
        .as_ref()
        .ok()
        .and_then(|o| o.absorption.as_ref())
    {
        details["absorption"] = a.words().into();
    }
    audit::record(
        tx,
        &Caller::system(),
        sample.at,
        action,
        "fleet",
        fleet,
        details,
    )
    .await
}

/// Records the deficit `sample` entered (its streak, evidence and, inside the cool-down after
/// a proposal that recovery superseded, its deferral): its id and, when deferred, when its
/// proposal falls due.
async fn open_deficit(
    tx: &mut sqlx::AnyConnection,
    ctx: &Ctx,
    fleet: &str,
    fleet_id: i64,
    sample: &Sample,
    stored: &StoredTracker,
    rules: Rules,
) -> anyhow::Result<(i64, Option<UnixMillis>)> {
    let Ok(obs) = &sample.outcome else {
        anyhow::bail!("a deficit opens only on an ok sample");
    };
    // The tracker counted `below_streak` ok samples below required, this one included: they
    // are the streak, and the first of them is when the deficit started. The evidence keeps
    // at most the policy's streak (and never more than 50 samples).
    let n = deficit::streak_len(ctx.settings.deficit, stored.tracker.below_streak);
    let streak = fleet_deficits::streak(&mut *tx, fleet_id, i64::from(n)).await?;
    let started_at = streak.first().map_or(sample.at, |s| s.at.min(sample.at));
    let evidence = deficit::evidence(obs, &streak, rules.restore_cap, rules.rule);
    let cooldown = ctx.settings.proposal_cooldown;
    let since = sample.at.saturating_sub(millis(cooldown));
    let last =
        fleet_deficits::superseded_since(&mut *tx, fleet, since, deficit::RECOVERED_REASON).await?;
    let deferral = deficit::deferral(sample.at, last, cooldown);
    let id = fleet_deficits::insert(
        &mut *tx,
        &NewDeficit {
            fleet_id,
            started_at,
            detected_at: sample.at,
            spare: obs.spare,
            required: obs.required,
            evidence: &evidence,
            note: deferral.as_ref().map_or("", |d| d.note.as_str()),
            proposal_due_at: deferral.as_ref().map(|d| d.due_at),
        },
    )
    .await?;
    Ok((id, deferral.map(|d| d.due_at)))
}
