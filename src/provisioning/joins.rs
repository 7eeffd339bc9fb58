//! Following created machines until they join their fleet. A server the provider runs is not
//! yet a spare: cloud-init may have broken, or yubaba may never start. So with
//! `join_timeout_minutes` set, a request whose servers all run stays `executing` until each
//! machine appears as a member of its fleet, matched by host name (cloud-init names the host
//! after the machine; each member's `/node` publishes `host.name`). The scraper hands over
//! the names it read after each ok sample ([`record_joins`]); the runner fails a request
//! whose machines did not all join in time ([`fail_overdue`]), leaving the destroy action
//! for each machine that never joined.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use super::transition::{self, Outcome, Transition};
use crate::context::Ctx;
use crate::db::provision_events::{self, NewEvent};
use crate::db::provision_jobs::{self, AwaitingJoin, MachineUpdate};
use crate::db::{self, provisions};
use crate::domain::{millis, Actor, MachineStatus, ProvisionState, UnixMillis};

/// A fleet member as the scraper read it: its raft id and the host name its `/node`
/// publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedMember {
    pub id: i64,
    pub host_name: String,
}

/// The machines of `fleet` waiting to join (none when joins are not followed).
pub async fn awaiting(ctx: &Ctx, fleet: &str) -> anyhow::Result<Vec<AwaitingJoin>> {
    if ctx.settings.join_timeout.is_none() {
        return Ok(Vec::new());
    }
    let mut conn = ctx.pool.acquire().await?;
    Ok(provision_jobs::awaiting_join(&mut conn, fleet).await?)
}

/// Pairs each waiting machine with the member whose host name is the machine's name. A name
/// two members publish matches neither: which of them is ours cannot be told, and a wrong
/// match would call a broken machine a spare.
pub fn pair<'a>(
    waiting: &'a [AwaitingJoin],
    members: &[NamedMember],
) -> Vec<(&'a AwaitingJoin, i64)> {
    let mut by_name: HashMap<&str, Option<i64>> = HashMap::new();
    for m in members {
        by_name
            .entry(m.host_name.as_str())
            .and_modify(|seen| *seen = None)
            .or_insert(Some(m.id));
    }
    waiting
        .iter()
        .filter_map(|w| {
            by_name
                .get(w.name.as_str())
                .copied()
                .flatten()
                .map(|id| (w, id))
        })
        .collect()
}

/// Records the joins `members` show for `fleet`'s waiting machines at `at`, and moves each
/// request whose machines have all joined to `succeeded`. Returns the machines that joined.
pub async fn record_joins(
    ctx: &Ctx,
    fleet: &str,
    members: &[NamedMember],
    at: UnixMillis,
) -> anyhow::Result<usize> {
    let waiting = awaiting(ctx, fleet).await?;
    let joined = pair(&waiting, members);
    if joined.is_empty() {
        return Ok(0);
    }
    let mut tx = db::begin_write(&ctx.pool).await?;
    let mut count = 0;
    let mut requests: Vec<i64> = Vec::new();
    for (w, member) in &joined {
        if !provision_jobs::mark_joined(&mut tx, w.provision_id, w.idx, *member, at).await? {
            continue;
        }
        count += 1;
        requests.push(w.provision_id);
        provision_events::append(
            &mut tx,
            NewEvent {
                provision_id: w.provision_id,
                at,
                kind: "joined",
                machine: Some(&w.name),
                message: &format!("{} joined fleet {fleet} as member {member}", w.name),
                details: &json!({ "member_id": member }),
            },
        )
        .await?;
    }
    requests.dedup();
    for id in requests {
        if provision_jobs::unjoined(&mut tx, id).await? > 0 {
            continue;
        }
        let t = Transition {
            details: json!({ "joined": true }),
            ..Transition::plain(
                id,
                ProvisionState::Executing,
                ProvisionState::Succeeded,
                &Actor::System,
                "",
            )
        };
        if transition::apply(&mut tx, ctx, at, t).await? == Outcome::Lost {
            tracing::info!(provision.id = id, "joined, but the request had moved on");
        }
    }
    tx.commit().await?;
    ctx.board.invalidate();
    Ok(count)
}

/// The reason a request whose machines did not all join fails with.
pub fn timeout_reason(timeout: Duration, never_joined: &[String]) -> String {
    format!(
        "created but did not join within {} min: {}",
        timeout.as_secs() / 60,
        never_joined.join(", ")
    )
}

/// Fails every `executing` request whose machines were all created more than
/// `join_timeout_minutes` ago and have not all joined; each machine that never joined is
/// failed too, so an approver can destroy it. Returns how many requests failed.
pub async fn fail_overdue(ctx: &Ctx) -> anyhow::Result<usize> {
    let Some(timeout) = ctx.settings.join_timeout else {
        return Ok(0);
    };
    let now = ctx.now();
    let cutoff = now.saturating_sub(millis(timeout));
    let overdue = {
        let mut conn = ctx.pool.acquire().await?;
        provision_jobs::join_overdue(&mut conn, cutoff).await?
    };
    let mut failed = 0;
    for id in overdue {
        let mut tx = db::begin_write(&ctx.pool).await?;
        let machines = provisions::machines(&mut tx, id).await?;
        let never: Vec<String> = machines
            .iter()
            .filter(|m| m.joined_at.is_none())
            .map(|m| m.name.clone())
            .collect();
        let why = format!(
            "created but did not join within {} min",
            timeout.as_secs() / 60
        );
        for m in machines.iter().filter(|m| m.joined_at.is_none()) {
            let update = MachineUpdate {
                error: Some(&why),
                ..MachineUpdate::default()
            };
            provision_jobs::set_machine(
                &mut tx,
                id,
                m.idx,
                &[MachineStatus::Created],
                MachineStatus::Failed,
                &update,
                now,
            )
            .await?;
        }
        let reason = timeout_reason(timeout, &never);
        let t = Transition {
            details: json!({ "machines": machines.len(), "not_joined": never.len() }),
            ..Transition::plain(
                id,
                ProvisionState::Executing,
                ProvisionState::Failed,
                &Actor::System,
                &reason,
            )
        };
        // Lost: the last machine joined in between; this transaction's writes are undone.
        if transition::apply(&mut tx, ctx, now, t).await? == Outcome::Moved {
            tx.commit().await?;
            tracing::warn!(
                provision.id = id,
                reason,
                "machines never joined their fleet"
            );
            failed += 1;
        }
    }
    if failed > 0 {
        ctx.board.invalidate();
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(id: i64, idx: i64, name: &str) -> AwaitingJoin {
        AwaitingJoin {
            provision_id: id,
            idx,
            name: name.into(),
        }
    }

    fn member(id: i64, host: &str) -> NamedMember {
        NamedMember {
            id,
            host_name: host.into(),
        }
    }

    #[test]
    fn a_machine_joins_as_the_member_publishing_its_name_and_an_ambiguous_name_matches_none() {
        let w = [
            waiting(1, 0, "prod-1-0"),
            waiting(1, 1, "prod-1-1"),
            waiting(2, 0, "prod-2-0"),
        ];
        let members = [
            member(4, "prod-1-0"),
            member(5, "prod-2-0"),
            member(6, "prod-2-0"),
            member(7, "other"),
        ];
        let got: Vec<(&str, i64)> = pair(&w, &members)
            .into_iter()
            .map(|(w, id)| (w.name.as_str(), id))
            .collect();
        assert_eq!(got, [("prod-1-0", 4)]);
    }

    #[test]
    fn the_timeout_reason_says_how_long_and_which_machines() {
        assert_eq!(
            timeout_reason(Duration::from_secs(900), &["a".into(), "b".into()]),
            "created but did not join within 15 min: a, b"
        );
    }
}
