//! Provisioning: request → plan → approval → durable job runner → reconcile. Every operation
//! checks the caller's role, validates, and writes its change, its timeline event, its audit
//! entry and its webhook notification in one transaction.
//!
//! - `plan`: renders every machine's payload with the fleet's real secrets, prices it, hashes it.
//! - `requests`: create, approve, reject, cancel, read, list; expiry and supersession.
//! - `transition`: the one place a request's state is written.
//! - `timeline`: the other steps on a request, each a timeline line with its audit entry.
//! - `runner`: claims approved requests (`BEGIN IMMEDIATE`) and executes them exactly once.
//! - `history`: filtered listing and CSV/JSONL export.
//! - `notify`: the webhook outbox and its delivery loop.

pub mod checks;
/// Prices are domain values now (a fleet's budget is one too); the old path stays.
pub use crate::domain::money as cost;
pub mod history;
pub mod joins;
pub mod notify;
pub mod plan;
pub mod requests;
pub mod runner;
pub mod timeline;
pub mod transition;

use serde::{Deserialize, Serialize};

use crate::cloud_init::{Finding, Severity};
use crate::domain::fleet::FleetName;
use crate::domain::machine::{ConfigName, TemplateName};
use crate::domain::provision::PlanHash;
use crate::domain::{ProvisionState, UnixMillis};

/// Machines one request may create.
pub const COUNT_MAX: u32 = 20;
/// Longest reason, in characters.
pub const REASON_MAX: usize = 500;

/// One machine of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedMachine {
    /// Unique server name (RFC 1123 label).
    pub name: String,
    /// sha256 of the shown payload (`«secret:NAME»` stand-ins, never values); empty when a
    /// finding blocks it.
    pub sha256: String,
    /// Size of the shown payload.
    pub size_bytes: usize,
    /// Validation findings (none of severity error, or the plan could not be filed).
    pub findings: Vec<PlanFinding>,
}

/// A validation finding as a plan keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFinding {
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// Which check produced it.
    pub check: String,
    pub message: String,
    /// 1-based line in the payload.
    pub line: Option<usize>,
}

impl PlanFinding {
    /// Whether it blocks the plan.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error.as_str()
    }
}

impl From<&Finding> for PlanFinding {
    fn from(f: &Finding) -> Self {
        PlanFinding {
            severity: f.severity.as_str().to_owned(),
            check: f.check.to_owned(),
            message: f.message.clone(),
            line: f.line,
        }
    }
}

/// What a request will create and what it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub provider: String,
    pub location: String,
    pub server_type: String,
    pub image: String,
    pub machines: Vec<PlannedMachine>,
    /// Hourly price of one machine at the location (catalogue text, e.g. `0.0072`).
    pub hourly_price: String,
    /// Monthly price of one machine at the location.
    pub monthly_price: String,
    /// `count × hourly_price`, as decimal text with 4 places.
    pub hourly_cost: String,
    /// `count × monthly_price`, as decimal text with 4 places.
    pub monthly_cost: String,
    /// ISO 4217 code of every price above.
    pub currency: String,
}

/// A provision request as stored, its names and hash parsed when read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provision {
    pub id: i64,
    pub fleet: FleetName,
    pub machine_config: ConfigName,
    pub config_version: i64,
    pub template: TemplateName,
    pub template_version: i64,
    pub count: u32,
    pub reason: String,
    /// A user's name, or `system` for headroom's own proposals (so not a `Username`, which
    /// reserves that name).
    pub requester: String,
    pub state: ProvisionState,
    /// Why it is in its state (rejection reason, failure, what superseded it); may be empty.
    pub state_reason: String,
    pub plan: Plan,
    pub plan_hash: PlanHash,
    pub approvals_required: u32,
    /// Who approved this plan, in order.
    pub approvers: Vec<String>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub approved_at: Option<UnixMillis>,
    pub finished_at: Option<UnixMillis>,
}

/// One line of a request's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: i64,
    pub at: UnixMillis,
    /// `state`, `approval`, `provider.call`, `provider.answer`, `webhook`, …
    pub kind: String,
    pub machine: Option<String>,
    pub message: String,
    /// Secret-free details (a provider answer, with `root_password` dropped).
    pub details: serde_json::Value,
}

/// What a person asks for (raw input: `requests::create` and `requests::plan` parse it).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NewRequest {
    pub fleet: String,
    pub machine_config: String,
    /// A stored template's name; empty or absent means the config's own template.
    pub template: Option<String>,
    /// Machines to create (1–`COUNT_MAX`).
    pub count: i64,
    /// Why (1–`REASON_MAX` characters).
    pub reason: String,
}

pub use crate::domain::provision::ProvisionFilter;

/// A request with everything its page shows.
#[derive(Debug, Clone, Serialize)]
pub struct ProvisionDetail {
    pub provision: Provision,
    pub machines: Vec<crate::domain::provision::MachineRecord>,
    pub events: Vec<Event>,
    /// Each machine's redacted payload (`«secret:NAME»` where each value goes), in plan order.
    pub redacted_payloads: Vec<String>,
    /// The plan checks as of now while the request awaits approval; empty otherwise.
    pub checks: Vec<crate::domain::plan_check::PlanCheck>,
    /// Audit entries whose target is this request, oldest first.
    pub audit: Vec<crate::audit::Entry>,
}
