//! The one writer of headroom history: each scrape tick's sample, its rollups, the fleet's
//! status row and the deficit tracker land in one transaction, so the board, the charts and
//! the deficit rule never disagree about what was seen. Filing a restore renders templates,
//! so it happens after the commit (`deficit::propose`), and so does settling a deficit that
//! was left (`deficit::recovered`); a crash or an error in between leaves the deficit unfiled
//! or unsettled, and `deficit::resume` (at start and on every scraper pass) finishes it.

use super::deficit;
use crate::context::Ctx;
use crate::db;
use crate::db::fleet_deficits::{self, NewDeficit};
use crate::db::fleet_status;
use crate::domain::fleet::{FleetSpec, MAX_RESTORE_MACHINES_DEFAULT};
use crate::domain::headroom::{DeficitChange, Sample};

/// The fleet's `max_restore_machines` (the default when the fleet was deleted meanwhile; a
/// stored spec that no longer reads back is an internal error naming the fleet).
async fn restore_cap(conn: &mut sqlx::SqliteConnection, fleet: &str) -> anyhow::Result<u32> {
    let spec = match db::fleets::get(conn, fleet).await? {
        Some(r) => Some(FleetSpec::from_stored(&r.name, &r.spec)?),
        None => None,
    };
    Ok(spec.map_or(MAX_RESTORE_MACHINES_DEFAULT, |s| s.max_restore_machines()))
}

/// What to do once the sample is committed.
enum FollowUp {
    Nothing,
    Propose(i64),
    Recovered(i64),
}

/// Stores one sample of fleet `fleet` and applies the deficit rule to it; on entering a
/// deficit files its restore proposal (or, inside the cool-down after a proposal recovery
/// superseded, defers it), on leaving one settles it. A deferred proposal is filed by the
/// first sample (ok or not) at or after its due time while the deficit is still open. While a
/// deficit outlives its proposal, samples below required count towards a follow-up proposal
/// (`deficit::followup`). A fleet deleted while it was being scraped is not an error: nothing
/// is written. Once the sample is committed, a proposal or settlement that fails is logged,
/// not returned: the sample is stored, and `resume` retries either.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn record(ctx: &Ctx, fleet: &str, sample: &Sample) -> anyhow::Result<()> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    let Some(fleet_id) = fleet_status::fleet_id(&mut tx, fleet).await? else {
        return Ok(());
    };
    db::fleet_samples::insert(&mut tx, fleet_id, sample).await?;
    let mut stored = fleet_status::tracker(&mut tx, fleet_id).await?;
    let policy = ctx.settings.deficit;
    let change = stored.tracker.observe(policy, sample.numbers());
    let follow = match (change, &sample.outcome) {
        (DeficitChange::Entered, Ok(obs)) => {
            // The tracker counted `below_streak` ok samples below required, this one included:
            // they are the streak, and the first of them is when the deficit started. The
            // evidence keeps at most the policy's streak (and never more than 50 samples).
            let n = deficit::streak_len(policy, stored.tracker.below_streak);
            let streak = fleet_deficits::streak(&mut tx, fleet_id, i64::from(n)).await?;
            let started_at = streak.first().map_or(sample.at, |s| s.at.min(sample.at));
            let cap = restore_cap(&mut tx, fleet).await?;
            let evidence = deficit::evidence(obs, &streak, cap);
            let cooldown = ctx.settings.proposal_cooldown;
            let since = sample
                .at
                .saturating_sub(i64::try_from(cooldown.as_millis()).unwrap_or(i64::MAX));
            let last =
                fleet_deficits::superseded_since(&mut tx, fleet, since, deficit::RECOVERED_REASON)
                    .await?;
            let deferral = deficit::deferral(sample.at, last, cooldown);
            let id = fleet_deficits::insert(
                &mut tx,
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
            stored.open_deficit_id = Some(id);
            stored.proposal_due_at = deferral.as_ref().map(|d| d.due_at);
            if deferral.is_some() {
                FollowUp::Nothing
            } else {
                FollowUp::Propose(id)
            }
        }
        (DeficitChange::Left, _) => {
            let open = stored.open_deficit_id.take();
            if let Some(id) = open {
                fleet_deficits::end(&mut tx, id, sample.at).await?;
            }
            open.map_or(FollowUp::Nothing, FollowUp::Recovered)
        }
        // Still in the deficit, whose deferred proposal fell due: release it for filing now
        // (the deficit lasted through the cool-down, so it gets its restore).
        _ => match (stored.open_deficit_id, stored.proposal_due_at) {
            (Some(id), Some(due)) if due <= sample.at => {
                if fleet_deficits::release_deferred(&mut tx, id, sample.at).await? {
                    FollowUp::Propose(id)
                } else {
                    FollowUp::Nothing
                }
            }
            // Still in the deficit and still below: if its latest proposal is over without
            // restoring the headroom, count towards (and maybe file) a follow-up. Read only
            // for fleets in deficit, by primary keys.
            (Some(id), None) if sample.numbers().is_some_and(|(s, r)| s < r) => {
                let latest = fleet_deficits::latest_proposal(&mut tx, id).await?;
                let step = latest.map_or(deficit::FollowUp::Nothing, |p| {
                    deficit::followup(
                        &p,
                        sample.at,
                        policy.enter_after,
                        ctx.settings.proposal_cooldown,
                    )
                });
                match step {
                    deficit::FollowUp::Nothing => FollowUp::Nothing,
                    deficit::FollowUp::Count => {
                        fleet_deficits::count_followup_sample(&mut tx, id).await?;
                        FollowUp::Nothing
                    }
                    deficit::FollowUp::Release => {
                        if fleet_deficits::release_followup(&mut tx, id).await? {
                            FollowUp::Propose(id)
                        } else {
                            FollowUp::Nothing
                        }
                    }
                }
            }
            // A failed sample never changes the tracker, so it cannot enter a deficit.
            _ => FollowUp::Nothing,
        },
    };
    fleet_status::upsert(&mut tx, fleet_id, sample, &stored).await?;
    tx.commit().await?;
    ctx.board.invalidate();
    match follow {
        FollowUp::Nothing => {}
        FollowUp::Propose(id) => {
            if let Err(e) = deficit::propose(ctx, id).await {
                tracing::warn!(
                    deficit.id = id, error = ?e,
                    "sample recorded; proposal not filed yet (the next resume retries it)"
                );
            }
        }
        FollowUp::Recovered(id) => {
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
