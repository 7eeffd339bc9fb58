//! The deficit decisions one sample leads to, without storage: which deficit work a sample
//! asks for ([`step`]) and, while a deficit outlives its proposal, whether the sample counts
//! towards a follow-up proposal or files it ([`follow_up`]). `crate::capacity::record` reads
//! what these need, calls them, and writes what they say.

use std::time::Duration;

use super::capacity::DeficitChange;
use super::{millis, ProvisionState, UnixMillis};

/// The deficit work one sample asks for, from the tracker's change and the open deficit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing to write beyond the sample and the tracker.
    Nothing,
    /// The fleet just entered a deficit: record it (and file or defer its proposal).
    Open,
    /// The fleet just left open deficit `id`: end it, then settle it after the commit.
    Close(i64),
    /// Open deficit `id`'s deferred proposal fell due: release it for filing now (the deficit
    /// lasted through the cool-down, so it gets its restore).
    ReleaseDeferred(i64),
    /// Still below required in open deficit `id` with its proposal settled: ask
    /// [`follow_up`] whether its latest proposal is over without restoring the headroom.
    ConsiderFollowUp(i64),
}

/// The open deficit as the fleet's status row keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenDeficit {
    /// The open deficit, if any.
    pub id: Option<i64>,
    /// When its deferred proposal falls due (a flapping fleet's cool-down), if deferred.
    pub proposal_due_at: Option<UnixMillis>,
}

/// The work a sample taken `at` asks for, after it moved the tracker by `change`; `short` is
/// its verdict under the fleet's rule (`None` for a failed scrape). A failed sample never
/// changes the tracker, so it cannot enter a deficit; nor does it count towards a follow-up
/// (it is not short), though a deferred proposal that fell due is released by any sample.
pub fn step(change: DeficitChange, short: Option<bool>, open: OpenDeficit, at: UnixMillis) -> Step {
    match (change, short) {
        (DeficitChange::Entered, Some(_)) => Step::Open,
        (DeficitChange::Left, _) => open.id.map_or(Step::Nothing, Step::Close),
        _ => match (open.id, open.proposal_due_at) {
            (Some(id), Some(due)) if due <= at => Step::ReleaseDeferred(id),
            (Some(id), None) if short == Some(true) => Step::ConsiderFollowUp(id),
            _ => Step::Nothing,
        },
    }
}

/// An open deficit's latest proposal, as [`follow_up`] weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestProposal {
    /// The deficit's latest request, if one was filed or found open.
    pub provision_id: Option<i64>,
    /// Its state word (`None` without a request, or when the request was deleted).
    pub state: Option<String>,
    /// Why none was filed; empty when one was (or filing is not settled yet).
    pub note: String,
    /// When the latest proposal was settled.
    pub proposed_at: Option<UnixMillis>,
    /// When the deficit was detected.
    pub detected_at: UnixMillis,
    /// When its request was filed.
    pub created_at: Option<UnixMillis>,
    /// When its request's approval window ran out.
    pub expires_at: Option<UnixMillis>,
    /// When its request ended.
    pub finished_at: Option<UnixMillis>,
    /// Ok samples below required counted since it finished.
    pub followup_below: i64,
}

/// What the follow-up rule says for an open deficit's newest sample below required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUp {
    /// Its latest proposal is still open, or was never settled: nothing to count.
    Nothing,
    /// The latest proposal is over: count this sample, not due yet.
    Count,
    /// Enough samples since and outside the cool-down: file a follow-up.
    Release,
}

/// The follow-up rule for an open deficit's latest proposal `p` at a sample below required at
/// `now`: its latest request finished (any end: none of them restored the headroom, or the
/// deficit would have ended) or filing was refused; this is the `enter_after`-th such sample;
/// and `now` is at least `cooldown` after the latest proposal — and, after a person's
/// rejection or cancellation, at least the request's own approval window (its TTL) after that
/// decision, so a "no" is not asked again every cool-down.
pub fn follow_up(
    p: &LatestProposal,
    now: UnixMillis,
    enter_after: u32,
    cooldown: Duration,
) -> FollowUp {
    let finished = match (p.provision_id, p.state.as_deref()) {
        (Some(_), Some(state)) => state
            .parse::<ProvisionState>()
            .is_ok_and(|s| s.is_terminal()),
        // Our request deleted (never done): nothing stands for the deficit any more.
        (Some(_), None) => true,
        // Refused (a note says why) or not settled yet (resume's job).
        (None, _) => !p.note.is_empty(),
    };
    if !finished {
        return FollowUp::Nothing;
    }
    if p.followup_below.saturating_add(1) < i64::from(enter_after) {
        return FollowUp::Count;
    }
    let cooldown = millis(cooldown);
    let mut due = p
        .proposed_at
        .unwrap_or(p.detected_at)
        .saturating_add(cooldown);
    if matches!(p.state.as_deref(), Some("rejected" | "cancelled")) {
        if let (Some(created), Some(expires), Some(finished)) =
            (p.created_at, p.expires_at, p.finished_at)
        {
            due = due.max(finished.saturating_add(expires.saturating_sub(created)));
        }
    }
    if now >= due {
        FollowUp::Release
    } else {
        FollowUp::Count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: UnixMillis = 1_000_000;
    const OPEN: OpenDeficit = OpenDeficit {
        id: Some(7),
        proposal_due_at: None,
    };
    const BELOW: Option<bool> = Some(true);
    const ENOUGH: Option<bool> = Some(false);

    #[test]
    fn entering_with_numbers_opens_a_deficit() {
        assert_eq!(
            step(DeficitChange::Entered, BELOW, OpenDeficit::default(), AT),
            Step::Open
        );
    }

    #[test]
    fn leaving_closes_the_open_deficit_and_without_one_does_nothing() {
        assert_eq!(step(DeficitChange::Left, ENOUGH, OPEN, AT), Step::Close(7));
        assert_eq!(
            step(DeficitChange::Left, ENOUGH, OpenDeficit::default(), AT),
            Step::Nothing
        );
    }

    #[test]
    fn a_deferred_proposal_is_released_at_its_due_time_by_any_sample() {
        let deferred = OpenDeficit {
            id: Some(7),
            proposal_due_at: Some(AT),
        };
        assert_eq!(
            step(DeficitChange::None, BELOW, deferred, AT),
            Step::ReleaseDeferred(7)
        );
        assert_eq!(
            step(DeficitChange::None, None, deferred, AT + 1),
            Step::ReleaseDeferred(7),
            "a failed sample releases it too"
        );
        assert_eq!(
            step(DeficitChange::None, ENOUGH, deferred, AT),
            Step::ReleaseDeferred(7),
            "one good sample does not end the deficit"
        );
        assert_eq!(
            step(DeficitChange::None, BELOW, deferred, AT - 1),
            Step::Nothing,
            "not due yet"
        );
    }

    #[test]
    fn only_a_sample_below_required_in_a_settled_deficit_considers_a_follow_up() {
        assert_eq!(
            step(DeficitChange::None, BELOW, OPEN, AT),
            Step::ConsiderFollowUp(7)
        );
        assert_eq!(step(DeficitChange::None, ENOUGH, OPEN, AT), Step::Nothing);
        assert_eq!(step(DeficitChange::None, None, OPEN, AT), Step::Nothing);
        assert_eq!(
            step(DeficitChange::None, BELOW, OpenDeficit::default(), AT),
            Step::Nothing,
            "no deficit open"
        );
    }

    const COOLDOWN: Duration = Duration::from_secs(60);

    fn latest(state: Option<&str>) -> LatestProposal {
        LatestProposal {
            provision_id: Some(3),
            state: state.map(str::to_owned),
            note: String::new(),
            proposed_at: Some(AT),
            detected_at: AT - 5_000,
            created_at: Some(AT),
            expires_at: Some(AT + 3_600_000),
            finished_at: Some(AT + 1_000),
            followup_below: 2,
        }
    }

    #[test]
    fn an_open_or_unsettled_proposal_counts_nothing() {
        for state in ["pending_approval", "approved", "executing", "nonsense"] {
            assert_eq!(
                follow_up(&latest(Some(state)), AT + 120_000, 3, COOLDOWN),
                FollowUp::Nothing,
                "{state}"
            );
        }
        let unsettled = LatestProposal {
            provision_id: None,
            state: None,
            ..latest(None)
        };
        assert_eq!(
            follow_up(&unsettled, AT + 120_000, 3, COOLDOWN),
            FollowUp::Nothing
        );
    }

    #[test]
    fn a_finished_deleted_or_refused_proposal_counts_then_releases() {
        let refused = LatestProposal {
            provision_id: None,
            state: None,
            note: "no restore was filed: nope".into(),
            ..latest(None)
        };
        for p in [latest(Some("failed")), latest(None), refused] {
            // The third sample since (enter_after 3) outside the cool-down files.
            assert_eq!(
                follow_up(&p, AT + 60_000, 3, COOLDOWN),
                FollowUp::Release,
                "{p:?}"
            );
            let earlier = LatestProposal {
                followup_below: 1,
                ..p.clone()
            };
            assert_eq!(
                follow_up(&earlier, AT + 60_000, 3, COOLDOWN),
                FollowUp::Count,
                "{p:?}"
            );
        }
    }

    #[test]
    fn a_follow_up_waits_for_the_cooldown_from_the_latest_proposal() {
        let p = latest(Some("expired"));
        assert_eq!(follow_up(&p, AT + 59_999, 3, COOLDOWN), FollowUp::Count);
        assert_eq!(follow_up(&p, AT + 60_000, 3, COOLDOWN), FollowUp::Release);
        // Never proposed (refused at once): counted from detection.
        let refused = LatestProposal {
            provision_id: None,
            note: "refused".into(),
            proposed_at: None,
            ..p
        };
        assert_eq!(
            follow_up(&refused, AT + 54_999, 3, COOLDOWN),
            FollowUp::Count
        );
        assert_eq!(
            follow_up(&refused, AT + 55_000, 3, COOLDOWN),
            FollowUp::Release
        );
    }

    #[test]
    fn a_persons_no_waits_for_the_requests_approval_window_after_the_decision() {
        for state in ["rejected", "cancelled"] {
            let p = latest(Some(state));
            let window_end = AT + 1_000 + 3_600_000;
            assert_eq!(
                follow_up(&p, window_end - 1, 3, COOLDOWN),
                FollowUp::Count,
                "{state}"
            );
            assert_eq!(
                follow_up(&p, window_end, 3, COOLDOWN),
                FollowUp::Release,
                "{state}"
            );
        }
        // A failure is no person's "no": only the cool-down applies.
        assert_eq!(
            follow_up(&latest(Some("failed")), AT + 60_000, 3, COOLDOWN),
            FollowUp::Release
        );
    }

    #[test]
    fn huge_values_saturate() {
        let p = LatestProposal {
            proposed_at: Some(i64::MAX - 1),
            followup_below: i64::MAX,
            ..latest(Some("failed"))
        };
        assert_eq!(
            follow_up(&p, i64::MAX, u32::MAX, Duration::MAX),
            FollowUp::Release
        );
    }
}
