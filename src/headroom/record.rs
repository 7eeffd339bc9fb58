//! The one writer of headroom history: each scrape tick's sample, its rollups, the fleet's
//! status row and the deficit tracker land in one transaction, so the board, the charts and
//! the deficit rule never disagree about what was seen. Filing a restore renders templates,
//! so it happens after the commit (`deficit::propose`); a crash in between is picked up by
//! `deficit::resume` at the next start.

use serde_json::json;

use super::deficit;
use crate::context::Ctx;
use crate::db;
use crate::db::fleet_deficits::{self, NewDeficit};
use crate::db::fleet_status;
use crate::domain::headroom::{DeficitChange, Sample};

/// What to do once the sample is committed.
enum FollowUp {
    Nothing,
    Propose(i64),
    Recovered(i64),
}

/// Stores one sample of fleet `fleet` and applies the deficit rule to it; on entering a
/// deficit files its restore proposal, on leaving one settles it. A fleet deleted while it was
/// being scraped is not an error: nothing is written.
#[tracing::instrument(skip_all, fields(fleet.name = %fleet), err)]
pub async fn record(ctx: &Ctx, fleet: &str, sample: &Sample) -> anyhow::Result<()> {
    let mut tx = db::begin_write(&ctx.pool).await?;
    let Some(fleet_id) = fleet_status::fleet_id(&mut tx, fleet).await? else {
        return Ok(());
    };
    db::fleet_samples::insert(&mut tx, fleet_id, sample).await?;
    let mut stored = fleet_status::tracker(&mut tx, fleet_id).await?;
    let change = stored
        .tracker
        .observe(ctx.settings.deficit, sample.numbers());
    let follow = match (change, &sample.outcome) {
        (DeficitChange::Entered, Ok(obs)) => {
            // The tracker counted `below_streak` ok samples below required, this one included:
            // they are the streak, and the first of them is when the deficit started.
            let streak =
                fleet_deficits::streak(&mut tx, fleet_id, i64::from(stored.tracker.below_streak))
                    .await?;
            let started_at = streak.first().map_or(sample.at, |s| s.at.min(sample.at));
            let evidence = json!({ "status": obs.evidence, "samples": streak }).to_string();
            let id = fleet_deficits::insert(
                &mut tx,
                &NewDeficit {
                    fleet_id,
                    started_at,
                    detected_at: sample.at,
                    spare: obs.spare,
                    required: obs.required,
                    evidence: &evidence,
                },
            )
            .await?;
            stored.open_deficit_id = Some(id);
            FollowUp::Propose(id)
        }
        (DeficitChange::Left, _) => {
            let open = stored.open_deficit_id.take();
            if let Some(id) = open {
                fleet_deficits::end(&mut tx, id, sample.at).await?;
            }
            open.map_or(FollowUp::Nothing, FollowUp::Recovered)
        }
        // A failed sample never changes the tracker, so it cannot enter a deficit.
        _ => FollowUp::Nothing,
    };
    fleet_status::upsert(&mut tx, fleet_id, sample, &stored).await?;
    tx.commit().await?;
    match follow {
        FollowUp::Nothing => {}
        FollowUp::Propose(id) => {
            deficit::propose(ctx, id).await?;
        }
        FollowUp::Recovered(id) => deficit::recovered(ctx, id).await?,
    }
    Ok(())
}
