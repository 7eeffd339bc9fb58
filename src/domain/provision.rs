//! Provision requests: their states and the only transitions between them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::machine::sha256_pin;
use super::text::text_value;
use super::UnixMillis;

text_value!(
    /// What an approval binds to: the sha256 of a request's canonical plan, 64 lower-case hex
    /// digits. Pages and the API parse an approver's `plan_hash` through this one rule.
    PlanHash,
    parsed as "plan_hash" by sha256_pin
);

/// Where a provision request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvisionState {
    /// Planned and waiting for enough approvals.
    PendingApproval,
    /// Approved for this exact plan; the runner will claim it.
    Approved,
    /// Claimed by the runner; provider calls may be in flight.
    Executing,
    /// Every planned machine exists and its create action succeeded.
    Succeeded,
    /// At least one machine could not be created; nothing is destroyed automatically.
    Failed,
    /// An approver said no (with a reason).
    Rejected,
    /// Its approval window passed before it ran.
    Expired,
    /// Withdrawn by its requester (or an approver) before it ran.
    Cancelled,
    /// The plan no longer matches the current config, template or secrets.
    Superseded,
}

impl ProvisionState {
    /// Every state, in lifecycle order.
    pub const ALL: [ProvisionState; 9] = [
        ProvisionState::PendingApproval,
        ProvisionState::Approved,
        ProvisionState::Executing,
        ProvisionState::Succeeded,
        ProvisionState::Failed,
        ProvisionState::Rejected,
        ProvisionState::Expired,
        ProvisionState::Cancelled,
        ProvisionState::Superseded,
    ];

    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisionState::PendingApproval => "pending_approval",
            ProvisionState::Approved => "approved",
            ProvisionState::Executing => "executing",
            ProvisionState::Succeeded => "succeeded",
            ProvisionState::Failed => "failed",
            ProvisionState::Rejected => "rejected",
            ProvisionState::Expired => "expired",
            ProvisionState::Cancelled => "cancelled",
            ProvisionState::Superseded => "superseded",
        }
    }

    /// The state in words, for pages (`pending approval`); the stored name stays the API's.
    pub fn words(self) -> &'static str {
        match self {
            ProvisionState::PendingApproval => "pending approval",
            other => other.as_str(),
        }
    }

    /// Whether nothing more will happen to the request.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            ProvisionState::PendingApproval | ProvisionState::Approved | ProvisionState::Executing
        )
    }

    /// Whether a request may move from `self` to `to`. Every write of a state goes through
    /// this, so a request cannot, say, be approved after it was cancelled.
    pub fn can_become(self, to: ProvisionState) -> bool {
        use ProvisionState::*;
        matches!(
            (self, to),
            (
                PendingApproval,
                Approved | Rejected | Cancelled | Expired | Superseded
            ) | (Approved, Executing | Cancelled | Expired | Superseded)
                | (Executing, Succeeded | Failed)
        )
    }

    /// Parses a submitted state, naming `field` when it is not one.
    pub fn parse_field(field: &str, raw: &str) -> Result<Self, super::FieldError> {
        raw.trim().parse().map_err(|_| {
            super::FieldError::new(
                field,
                format!(
                    "must be one of {}",
                    ProvisionState::ALL.map(|s| s.as_str()).join(", ")
                ),
            )
        })
    }
}

impl fmt::Display for ProvisionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for ProvisionState {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        ProvisionState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or(())
    }
}

/// One machine of a request and its progress: the one read model of a `provision_machines`
/// row (its redacted payload aside), for the request pages and the job runner alike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineRecord {
    pub idx: u32,
    pub name: String,
    pub sha256: String,
    pub size_bytes: usize,
    pub status: MachineStatus,
    pub server_id: Option<i64>,
    pub action_id: Option<i64>,
    pub ipv4: Option<String>,
    /// The provider's own status word (`running`, `initializing`, …).
    pub provider_status: Option<String>,
    pub error: Option<String>,
    pub updated_at: UnixMillis,
    /// When the machine was first seen as a member of its fleet (`None` until it joins, and
    /// for requests that ended without following the join).
    pub joined_at: Option<UnixMillis>,
    /// The fleet member (raft node id) it joined as.
    pub member_id: Option<i64>,
}

/// Where one planned machine stands during execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineStatus {
    /// Nothing sent yet.
    Planned,
    /// A create was (or is about to be) sent; the answer is not stored yet. On recovery the
    /// provision label decides whether the server exists.
    Creating,
    /// The server exists; its create action is being polled.
    Booting,
    /// The create action succeeded.
    Created,
    /// The create failed or its action ended in error.
    Failed,
    /// An approver destroyed the failed server.
    Destroyed,
}

impl MachineStatus {
    /// Every status, in order.
    pub const ALL: [MachineStatus; 6] = [
        MachineStatus::Planned,
        MachineStatus::Creating,
        MachineStatus::Booting,
        MachineStatus::Created,
        MachineStatus::Failed,
        MachineStatus::Destroyed,
    ];

    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            MachineStatus::Planned => "planned",
            MachineStatus::Creating => "creating",
            MachineStatus::Booting => "booting",
            MachineStatus::Created => "created",
            MachineStatus::Failed => "failed",
            MachineStatus::Destroyed => "destroyed",
        }
    }

    /// Whether the runner is done with this machine.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            MachineStatus::Created | MachineStatus::Failed | MachineStatus::Destroyed
        )
    }
}

impl fmt::Display for MachineStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for MachineStatus {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        MachineStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_never_move_again() {
        for from in ProvisionState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in ProvisionState::ALL {
                assert!(!from.can_become(to), "{from} → {to}");
            }
        }
    }

    #[test]
    fn only_an_approved_request_can_start_executing() {
        for from in ProvisionState::ALL {
            assert_eq!(
                from.can_become(ProvisionState::Executing),
                from == ProvisionState::Approved,
                "{from}"
            );
        }
    }

    #[test]
    fn a_plan_hash_is_made_only_from_64_lower_case_hex_digits() {
        let rule = "must be a sha256: exactly 64 lowercase hex characters";
        let huge = "a".repeat(100_000);
        let upper = "A".repeat(64);
        let short = "a".repeat(63);
        let hostile = format!("{}\n{}", "a".repeat(32), "b".repeat(31));
        for bad in [
            "",
            "not-a-hash",
            &huge,
            &upper,
            &short,
            &hostile,
            "<script>",
        ] {
            let e = PlanHash::try_from(bad).unwrap_err();
            assert_eq!((e.field.as_str(), e.message.as_str()), ("plan_hash", rule));
        }
        let good = format!("{}{}", "0123456789abcdef".repeat(3), "f".repeat(16));
        let h: PlanHash = format!(" {good} ").parse().unwrap();
        assert_eq!((h.as_ref(), h.to_string()), (good.as_str(), good.clone()));
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<PlanHash>(&json).unwrap(), h);
        assert!(serde_json::from_str::<PlanHash>("\"zz\"").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_plan_hash_exactly_when_it_is_64_hex_digits(raw in "(?s).{0,70}|[0-9a-fA-F]{64}") {
            let hex = raw.trim().len() == 64
                && raw.trim().bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            proptest::prop_assert_eq!(PlanHash::parse("plan_hash", &raw).is_ok(), hex);
        }
    }

    #[test]
    fn names_round_trip() {
        for s in ProvisionState::ALL {
            assert_eq!(s.as_str().parse::<ProvisionState>(), Ok(s));
        }
        for s in MachineStatus::ALL {
            assert_eq!(s.as_str().parse::<MachineStatus>(), Ok(s));
        }
    }
}

/// What a listing of requests filters on (pages, the API, exports and the storage query
/// alike); every field optional, all must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProvisionFilter {
    pub fleet: Option<String>,
    pub machine_config: Option<String>,
    pub state: Option<ProvisionState>,
    pub requester: Option<String>,
    /// Requests this user approved (any plan of theirs).
    pub approver: Option<String>,
    /// Created at or after.
    pub from: Option<UnixMillis>,
    /// Created before.
    pub to: Option<UnixMillis>,
}
