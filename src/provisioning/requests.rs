//! Provision requests: file, approve (four-eyes, bound to the plan hash), reject, cancel,
//! read, list; expiry and supersession. Every state change goes through
//! `transition::apply` inside one `BEGIN IMMEDIATE` transaction, so two approvers or twenty
//! concurrent clicks make exactly one transition.

use std::collections::BTreeMap;

use serde_json::json;
use sqlx::AnyConnection;

use super::checks;
use super::plan::{self, DraftPlan};
use super::timeline::{self, Note};
use super::transition::{self, Outcome, Transition};
use super::{notify, Event, NewRequest, Provision, ProvisionDetail};
use super::{ProvisionFilter, REASON_MAX};
use crate::audit::{self, Action, NewEntry};
use crate::auth::Caller;
use crate::context::Ctx;
use crate::db;
use crate::db::provision_events::{self, NewEvent};
use crate::db::provisions::{NewMachine, NewProvision, ProvisionRow};
use crate::db::versions;
use crate::domain::field_error::reject_control_chars;
use crate::domain::fleet::{FleetSpec, APPROVAL_TTL_HOURS_DEFAULT};
use crate::domain::plan_check;
use crate::domain::plan_check_blocking::BlockingChecks;
use crate::domain::provision::MachineRecord;
use crate::domain::provision::PlanHash;
use crate::domain::{Actor, FieldError, ProvisionState, Role, UnixMillis};
use crate::error::OpError;

/// Most requests one listing page returns.
pub const LIST_LIMIT_MAX: u32 = 200;
/// Audit entries a request's detail shows (a request has a handful).
const AUDIT_SHOWN_MAX: i64 = 500;
const HOUR_MS: i64 = 3_600_000;

/// The fleet settings a restore proposal of headroom's is computed from: which cluster is
/// read (`endpoints`), how many spares it must keep (`required_override`), which answer
/// decides a deficit and its count (`headroom_rule`), how many machines
/// one proposal may ask for (`max_restore_machines`), what they are (`restore_machine_config`,
/// `secrets`: which mesh and tunnel they join) and who must agree (`approvals_required`,
/// `approval_ttl_hours`). Whoever last changed one of them before the proposal was filed caused
/// it, and may not approve it. The scrape timings are left out: they change when, not what.
pub const PROPOSAL_CAUSES: [&str; 8] = [
    "endpoints",
    "required_override",
    "headroom_rule",
    "max_restore_machines",
    "restore_machine_config",
    "secrets",
    "approvals_required",
    "approval_ttl_hours",
];

/// Plans a request for the form's live preview: the plan, its cost and findings; nothing
/// stored (operator and up). An empty reason is no error here: the form says it is required
/// when the request is filed, not before the person has written anything.
pub async fn plan(ctx: &Ctx, caller: &Caller, req: &NewRequest) -> Result<DraftPlan, OpError> {
    plan::plan_for(ctx, caller, req, plan::Purpose::Preview).await
}

/// Files a request in `pending_approval` (operator and up). A plan with an error finding is
/// refused with the findings as errors on `template`.
#[tracing::instrument(skip_all, fields(fleet.name = %req.fleet), err)]
pub async fn create(ctx: &Ctx, caller: &Caller, req: &NewRequest) -> Result<Provision, OpError> {
    match insert_request(ctx, caller, req, false).await? {
        Filing::Filed(p) => Ok(*p),
        // Unreachable without the guard; answered as the state conflict it would be.
        Filing::AlreadyOpen(id) => Err(OpError::Conflict(format!(
            "request #{id} for fleet {} is still open",
            req.fleet
        ))),
    }
}

/// What [`create_unless_open`] came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Filing {
    /// The request was filed (boxed: a plan is large beside an id).
    Filed(Box<Provision>),
    /// A request for the fleet was open (awaiting approval, approved or running) when the
    /// write transaction began: nothing was filed; this is the newest open one.
    AlreadyOpen(i64),
}

/// Files a request like [`create`], but only if no request for the fleet is open: the check
/// runs inside the same `BEGIN IMMEDIATE` transaction as the insert, so two concurrent
/// filings (headroom's proposal and a person's request) can never both land. A person's form
/// uses `create` (several open requests for one fleet are theirs to choose); headroom's
/// proposals use this. (A separate entry point rather than a field on `NewRequest`, so every
/// existing caller keeps its meaning and no person can set it through a form.)
#[tracing::instrument(skip_all, fields(fleet.name = %req.fleet), err)]
pub async fn create_unless_open(
    ctx: &Ctx,
    caller: &Caller,
    req: &NewRequest,
) -> Result<Filing, OpError> {
    insert_request(ctx, caller, req, true).await
}

/// The one filing path: plans, then inserts in one write transaction, which first refuses
/// (as `AlreadyOpen`) when `only_if_none_open` and a request for the fleet is open.
async fn insert_request(
    ctx: &Ctx,
    caller: &Caller,
    req: &NewRequest,
    only_if_none_open: bool,
) -> Result<Filing, OpError> {
    caller.require(Role::Operator)?;
    let draft = plan::plan(ctx, caller, req).await?;
    if !draft.can_be_filed() {
        return Err(draft.error_fields().into());
    }
    // The payloads were rendered with `now = planned_at`; the request keeps that time so a
    // re-render before execution produces the same bytes.
    let now = draft.planned_at;
    let expires_at = now + i64::from(draft.approval_ttl_hours) * HOUR_MS;
    let plan_json = serde_json::to_string(&draft.plan).map_err(anyhow::Error::from)?;
    let mut tx = db::begin_write(&ctx.pool).await?;
    if only_if_none_open {
        // Read under the write lock: no other filing can commit between this and the insert.
        if let Some(open) = db::fleet_deficits::open_request(&mut tx, &draft.fleet).await? {
            return Ok(Filing::AlreadyOpen(open));
        }
    }
    let id = db::provisions::insert(
        &mut tx,
        &NewProvision {
            fleet: &draft.fleet,
            machine_config: &draft.machine_config,
            config_version: draft.config_version,
            template: &draft.template,
            template_version: draft.template_version,
            count: i64::from(draft.count),
            reason: &draft.reason,
            requester: caller.actor.name(),
            plan: &plan_json,
            plan_hash: &draft.plan_hash,
            approvals_required: i64::from(draft.approvals_required),
            now,
            expires_at,
        },
    )
    .await?;
    record_causes(&mut tx, id, &draft.fleet).await?;
    for (idx, (m, redacted)) in draft
        .plan
        .machines
        .iter()
        .zip(&draft.redacted_payloads)
        .enumerate()
    {
        db::provisions::insert_machine(
            &mut tx,
            id,
            &NewMachine {
                // Both bounded far below u32: COUNT_MAX machines, 32 KiB payloads.
                idx: u32::try_from(idx).map_err(anyhow::Error::from)?,
                name: &m.name,
                sha256: &m.sha256,
                size_bytes: u32::try_from(m.size_bytes).map_err(anyhow::Error::from)?,
                redacted_payload: redacted,
            },
            now,
        )
        .await?;
    }
    let p = &draft.plan;
    let message = format!(
        "requested by {}: {} × {} at {} ({} {}/month)",
        caller.actor.name(),
        draft.count,
        p.server_type,
        p.location,
        p.monthly_cost,
        p.currency
    );
    provision_events::append(
        &mut tx,
        NewEvent {
            provision_id: id,
            at: now,
            kind: "state",
            machine: None,
            message: &message,
            details: &json!({ "to": ProvisionState::PendingApproval.as_str(), "plan_hash": draft.plan_hash }),
        },
    )
    .await?;
    audit::append(
        &mut tx,
        now,
        NewEntry {
            actor: &caller.actor,
            action: Action::ProvisionRequested,
            target_kind: "provision",
            target_id: &id.to_string(),
            details: json!({
                "fleet": draft.fleet,
                "machine_config": draft.machine_config,
                "config_version": draft.config_version,
                "template": draft.template,
                "template_version": draft.template_version,
                "count": draft.count,
                "plan_hash": draft.plan_hash,
                "hourly_cost": p.hourly_cost,
                "monthly_cost": p.monthly_cost,
                "currency": p.currency,
            }),
        },
    )
    .await?;
    notify::enqueue(&mut tx, ctx, now, notify::Event::Requested, id).await?;
    tx.commit().await?;
    // A new open request changes its fleet's open-request count on the board.
    ctx.board.invalidate();
    let mut conn = ctx.pool.acquire().await?;
    let p = load(&mut conn, id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("provision {id} vanished after insert"))?;
    if ctx.settings.pin_check_on_request {
        let (url, sha256) = checks::pin_of(&mut conn, &p).await?;
        tokio::spawn(checks::check_pin(ctx.clone(), url, sha256));
    }
    Ok(Filing::Filed(Box::new(p)))
}

/// Records, for request `id`, who last changed each of [`PROPOSAL_CAUSES`] of its fleet, read
/// in the filing's own transaction: the request was computed from the fleet as it is now, so
/// a change made after filing neither adds nor clears anyone. Kept for every request (a
/// person's too), though only a proposal filed by `system` is refused on it (see `four_eyes`).
async fn record_causes(conn: &mut AnyConnection, id: i64, fleet: &str) -> Result<(), OpError> {
    for field in PROPOSAL_CAUSES {
        if let Some((by, at)) = db::fleet_changes::last_changer(conn, fleet, field).await? {
            db::fleet_changes::insert_cause(conn, id, field, &by, at).await?;
        }
    }
    Ok(())
}

/// A stored request as the operations see it (no role check: for the runner and the other
/// provisioning modules, which act as the system).
pub async fn load(conn: &mut AnyConnection, id: i64) -> Result<Option<Provision>, OpError> {
    let Some(row) = db::provisions::get(conn, id).await? else {
        return Ok(None);
    };
    let approvers = db::provisions::approvers(conn, id, &row.plan_hash).await?;
    Ok(Some(from_row(row, approvers)?))
}

fn from_row(row: ProvisionRow, approvers: Vec<String>) -> Result<Provision, OpError> {
    let id = row.id;
    let state = row
        .state
        .parse()
        .map_err(|()| anyhow::anyhow!("provision {id}: unknown state {:?}", row.state))?;
    let plan = serde_json::from_str(&row.plan)
        .map_err(|e| anyhow::anyhow!("provision {id}: stored plan: {e}"))?;
    Ok(Provision {
        id,
        fleet: stored(id, "fleet", row.fleet)?,
        machine_config: stored(id, "machine_config", row.machine_config)?,
        config_version: row.config_version,
        template: stored(id, "template", row.template)?,
        template_version: row.template_version,
        count: u32::try_from(row.count).unwrap_or(0),
        reason: row.reason,
        requester: row.requester,
        state,
        state_reason: row.state_reason,
        plan,
        plan_hash: stored(id, "plan_hash", row.plan_hash)?,
        approvals_required: u32::try_from(row.approvals_required).unwrap_or(1),
        approvers,
        created_at: row.created_at,
        updated_at: row.updated_at,
        expires_at: row.expires_at,
        approved_at: row.approved_at,
        finished_at: row.finished_at,
    })
}

/// Parses a stored `column` of request `id` through its domain type. Every filing parsed it
/// first, so a value that no longer reads back is a fault in storage, named, never defaulted.
fn stored<T>(id: i64, column: &str, raw: String) -> Result<T, OpError>
where
    T: TryFrom<String, Error = FieldError>,
{
    T::try_from(raw).map_err(|e| {
        OpError::Internal(anyhow::anyhow!(
            "provision {id}: stored {column} does not read back: {}",
            e.message
        ))
    })
}

fn not_found(id: i64) -> OpError {
    OpError::NotFound(format!("provision {id}"))
}

/// The four-eyes rule: who may not approve (or reject) a request, and why. Besides the
/// requester and the authors of the config and template versions, a proposal filed by
/// `system` may not be approved by whoever last changed (before it was filed) a fleet setting
/// it was computed from: `system` is no person, so that person is the one asking. A person's
/// request is not held to this: its requester chose the count and is already the second pair
/// of eyes beside the approver.
async fn four_eyes(
    conn: &mut AnyConnection,
    p: &Provision,
    who: &str,
    verb: &str,
) -> Result<(), OpError> {
    if p.requester == who {
        let hint = if verb == "reject" {
            "cancel it instead"
        } else {
            "another approver must"
        };
        return Err(OpError::Forbidden(format!(
            "four-eyes: you requested provision {}, so you cannot {verb} it; {hint}",
            p.id
        )));
    }
    if verb != "approve" {
        return Ok(());
    }
    if p.requester == Actor::System.name() {
        let fields = db::fleet_changes::caused_by(conn, p.id, who).await?;
        if !fields.is_empty() {
            return Err(OpError::Forbidden(format!(
                "four-eyes: you last changed fleet {}'s {}, which this proposal was computed \
                 from, so you cannot approve it; another approver must",
                p.fleet,
                fields.join(", ")
            )));
        }
    }
    for (family, what, name, version) in plan::documents(p) {
        let v = versions::one(conn, family, name, versions::Pick::Exact(version)).await?;
        if v.is_some_and(|v| v.author == who) {
            return Err(OpError::Forbidden(format!(
                "four-eyes: you wrote {what} {name} version {version}, which this plan uses, so you cannot approve it; another approver must"
            )));
        }
    }
    Ok(())
}

/// Moves a request that may no longer be acted on (window closed, newer version) to
/// `expired` or `superseded` within `tx`; returns the conflict to answer with, if it did.
async fn void_if_stale(
    conn: &mut AnyConnection,
    ctx: &Ctx,
    now: UnixMillis,
    p: &Provision,
) -> Result<Option<OpError>, OpError> {
    let (to, why) = if now >= p.expires_at {
        (
            ProvisionState::Expired,
            format!(
                "its window closed at {}",
                crate::domain::clock::format_utc(p.expires_at)
            ),
        )
    } else if let Some(why) = plan::newer_version_in(conn, p).await? {
        (ProvisionState::Superseded, why)
    } else {
        return Ok(None);
    };
    let t = Transition::plain(p.id, p.state, to, &Actor::System, &why);
    transition::apply(conn, ctx, now, t).await?;
    Ok(Some(OpError::Conflict(format!(
        "provision {} is now {to}: {why}",
        p.id
    ))))
}

/// Approves a request's plan (approver and up; four-eyes) without a comment: see
/// [`approve_with`].
pub async fn approve(
    ctx: &Ctx,
    caller: &Caller,
    id: i64,
    seen_plan_hash: Option<&PlanHash>,
) -> Result<Provision, OpError> {
    let approval = Approval {
        seen_plan_hash,
        comment: "",
    };
    approve_with(ctx, caller, id, &approval).await
}

/// Longest approval comment, in characters.
pub const COMMENT_MAX: usize = 500;

/// What an approver submits besides their name.
#[derive(Debug, Clone, Copy, Default)]
pub struct Approval<'a> {
    /// The plan hash the approver reviewed; approval is refused when the plan is another now.
    pub seen_plan_hash: Option<&'a PlanHash>,
    /// An optional comment, as submitted (parsed by [`parse_comment`]).
    pub comment: &'a str,
}

/// Parses an approval comment: optional (blank is none), at most `COMMENT_MAX` characters as
/// sent, no control characters; kept trimmed.
pub fn parse_comment(raw: &str) -> Result<Option<String>, FieldError> {
    let len = raw.chars().count();
    if len > COMMENT_MAX {
        return Err(FieldError::new(
            "comment",
            format!("must be at most {COMMENT_MAX} characters (it has {len})"),
        ));
    }
    reject_control_chars("comment", raw)?;
    let comment = raw.trim();
    Ok((!comment.is_empty()).then(|| comment.to_owned()))
}

/// Approves a request's plan (approver and up; four-eyes). With `seen_plan_hash`, refuses
/// when the plan is no longer the one the approver reviewed; a plan check whose verdict is
/// `block` refuses too, naming the check. The comment goes into the approval's audit entry
/// and onto the timeline. The last approval needed moves the request to `approved`, opens
/// its run window and wakes the runner.
#[tracing::instrument(skip_all, fields(provision.id = id), err)]
pub async fn approve_with(
    ctx: &Ctx,
    caller: &Caller,
    id: i64,
    approval: &Approval<'_>,
) -> Result<Provision, OpError> {
    caller.require(Role::Approver)?;
    let comment = parse_comment(approval.comment)?;
    let seen_plan_hash = approval.seen_plan_hash;
    let me = caller.actor.name();
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let p = load(&mut tx, id).await?.ok_or_else(|| not_found(id))?;
    if p.state != ProvisionState::PendingApproval {
        return Err(OpError::Conflict(format!(
            "provision {id} is {}, so it cannot be approved (only pending_approval can)",
            p.state
        )));
    }
    may_approve(&mut tx, &p, me, seen_plan_hash).await?;
    if let Some(conflict) = void_if_stale(&mut tx, ctx, now, &p).await? {
        tx.commit().await?;
        return Err(conflict);
    }
    no_blocking_check(&mut tx, &p, now, &ctx.settings.plan_checks_blocking).await?;
    if !db::provisions::insert_approval(&mut tx, id, me, &p.plan_hash, now).await? {
        return Err(OpError::Conflict(format!(
            "you already approved provision {id}; it needs another approver"
        )));
    }
    let approvals = db::provisions::approvers(&mut tx, id, &p.plan_hash)
        .await?
        .len();
    let required = p.approvals_required as usize;
    let mut details =
        json!({ "approvals": approvals, "required": required, "plan_hash": p.plan_hash });
    if let Some(c) = &comment {
        details["comment"] = json!(c);
    }
    let complete = approvals >= required;
    if complete {
        transition::apply(
            &mut tx,
            ctx,
            now,
            Transition {
                provision_id: id,
                from: ProvisionState::PendingApproval,
                to: ProvisionState::Approved,
                actor: &caller.actor,
                reason: "",
                details,
            },
        )
        .await?
        .or_conflict(id)?;
        // The run window: the runner must start within the fleet's TTL of the approval.
        let ttl = run_window_hours(&mut tx, &p.fleet).await?;
        db::provisions::set_expires_at(&mut tx, id, now + i64::from(ttl) * HOUR_MS).await?;
    } else {
        let message = format!("approved by {me} ({approvals} of {required})");
        timeline::write(
            &mut tx,
            Note {
                event: NewEvent {
                    provision_id: id,
                    at: now,
                    kind: "approval",
                    machine: None,
                    message: &message,
                    details: &details,
                },
                actor: &caller.actor,
                action: Action::ProvisionApproved,
            },
        )
        .await?;
    }
    if let Some(c) = &comment {
        // Its own line, so the timeline shows the words whichever approval this was.
        provision_events::append(
            &mut tx,
            NewEvent {
                provision_id: id,
                at: now,
                kind: "comment",
                machine: None,
                message: &format!("{me} commented on approving: {c}"),
                details: &json!({ "comment": c, "by": me }),
            },
        )
        .await?;
    }
    tx.commit().await?;
    if complete {
        ctx.jobs.notify_one();
    }
    let mut conn = ctx.pool.acquire().await?;
    load(&mut conn, id).await?.ok_or_else(|| not_found(id))
}

/// Whether `me` may approve `p` as the plan `seen` (four-eyes, then the plan hash).
async fn may_approve(
    conn: &mut AnyConnection,
    p: &Provision,
    me: &str,
    seen: Option<&PlanHash>,
) -> Result<(), OpError> {
    four_eyes(conn, p, me, "approve").await?;
    if seen.is_some_and(|h| *h != p.plan_hash) {
        return Err(OpError::Conflict(format!(
            "the plan changed since you saw it: provision {} now has plan {}; review it again",
            p.id, p.plan_hash
        )));
    }
    Ok(())
}

/// Refuses with the first plan check whose verdict is `block`, naming it.
async fn no_blocking_check(
    conn: &mut AnyConnection,
    p: &Provision,
    now: UnixMillis,
    blocking: &BlockingChecks,
) -> Result<(), OpError> {
    let checks = checks::of(conn, p, now, blocking).await?;
    match plan_check::first_block(&checks) {
        Some(c) => Err(OpError::Conflict(format!(
            "the plan check {} blocks approval: {}",
            c.name, c.detail
        ))),
        None => Ok(()),
    }
}

/// An approval as the confirmation step asks it (approver and up): every rule
/// [`approve_with`] applies, decided without writing anything, so a person is asked to
/// confirm only what would be accepted. Returns the request and the parsed comment.
pub async fn review_approval(
    ctx: &Ctx,
    caller: &Caller,
    id: i64,
    approval: &Approval<'_>,
) -> Result<(Provision, Option<String>), OpError> {
    caller.require(Role::Approver)?;
    let comment = parse_comment(approval.comment)?;
    let me = caller.actor.name();
    let now = ctx.clock.now();
    let mut conn = ctx.pool.acquire().await?;
    let p = load(&mut conn, id).await?.ok_or_else(|| not_found(id))?;
    if p.state != ProvisionState::PendingApproval {
        return Err(OpError::Conflict(format!(
            "provision {id} is {}, so it cannot be approved (only pending_approval can)",
            p.state
        )));
    }
    may_approve(&mut conn, &p, me, approval.seen_plan_hash).await?;
    if now >= p.expires_at {
        return Err(OpError::Conflict(format!(
            "provision {id} can no longer be approved: its window closed at {}",
            crate::domain::clock::format_utc(p.expires_at)
        )));
    }
    if let Some(why) = plan::newer_version_in(&mut conn, &p).await? {
        return Err(OpError::Conflict(format!(
            "provision {id} can no longer be approved: {why}"
        )));
    }
    no_blocking_check(&mut conn, &p, now, &ctx.settings.plan_checks_blocking).await?;
    if p.approvers.iter().any(|a| a == me) {
        return Err(OpError::Conflict(format!(
            "you already approved provision {id}; it needs another approver"
        )));
    }
    Ok((p, comment))
}

/// The fleet's approval TTL in hours (the default when the fleet was deleted meanwhile; a
/// stored spec that no longer reads back is an internal error naming the fleet).
async fn run_window_hours(conn: &mut AnyConnection, fleet: &str) -> Result<u32, OpError> {
    let spec = match db::fleets::get(conn, fleet).await? {
        Some(r) => Some(FleetSpec::from_stored(&r.name, &r.spec).map_err(anyhow::Error::from)?),
        None => None,
    };
    Ok(spec.map_or(APPROVAL_TTL_HOURS_DEFAULT, |s| s.approval_ttl_hours()))
}

/// Parses a rejection reason: 1–`REASON_MAX` characters, no control characters.
fn parse_reason(raw: &str) -> Result<String, FieldError> {
    let reason = raw.trim();
    // Limits count the text as sent, like the API document's maxLength; it is stored trimmed.
    let len = raw.chars().count();
    if reason.is_empty() {
        return Err(FieldError::new(
            "reason",
            "is required: say why the request is rejected",
        ));
    }
    if len > REASON_MAX {
        return Err(FieldError::new(
            "reason",
            format!("must be at most {REASON_MAX} characters (it has {len})"),
        ));
    }
    reject_control_chars("reason", raw)?;
    Ok(reason.to_owned())
}

/// Rejects a pending request with a reason (approver and up; not the requester, who cancels).
#[tracing::instrument(skip_all, fields(provision.id = id), err)]
pub async fn reject(
    ctx: &Ctx,
    caller: &Caller,
    id: i64,
    reason: &str,
) -> Result<Provision, OpError> {
    caller.require(Role::Approver)?;
    let reason = parse_reason(reason)?;
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let p = load(&mut tx, id).await?.ok_or_else(|| not_found(id))?;
    if p.state != ProvisionState::PendingApproval {
        return Err(OpError::Conflict(format!(
            "provision {id} is {}, so it cannot be rejected (only pending_approval can)",
            p.state
        )));
    }
    four_eyes(&mut tx, &p, caller.actor.name(), "reject").await?;
    let to = Transition::plain(
        id,
        p.state,
        ProvisionState::Rejected,
        &caller.actor,
        &reason,
    );
    commit_move(ctx, tx, now, to).await
}

/// Cancels a request that has not started (its requester, or an approver and up).
#[tracing::instrument(skip_all, fields(provision.id = id), err)]
pub async fn cancel(ctx: &Ctx, caller: &Caller, id: i64) -> Result<Provision, OpError> {
    caller.require(Role::Operator)?;
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let p = load(&mut tx, id).await?.ok_or_else(|| not_found(id))?;
    if p.requester != caller.actor.name() {
        // Someone else's request: only an approver may withdraw it.
        caller.require(Role::Approver)?;
    }
    if !matches!(
        p.state,
        ProvisionState::PendingApproval | ProvisionState::Approved
    ) {
        return Err(OpError::Conflict(format!(
            "provision {id} is {}, so it cannot be cancelled (only pending_approval or approved can)",
            p.state
        )));
    }
    let why = format!("cancelled by {}", caller.actor.name());
    let to = Transition::plain(id, p.state, ProvisionState::Cancelled, &caller.actor, &why);
    commit_move(ctx, tx, now, to).await
}

/// A person's transition: made in `tx` (a lost compare-and-set is a conflict), committed, and
/// the request read back as it now stands.
async fn commit_move(
    ctx: &Ctx,
    mut tx: sqlx::Transaction<'static, sqlx::Any>,
    now: UnixMillis,
    t: Transition<'_>,
) -> Result<Provision, OpError> {
    let id = t.provision_id;
    transition::apply(&mut tx, ctx, now, t)
        .await?
        .or_conflict(id)?;
    tx.commit().await?;
    let mut conn = ctx.pool.acquire().await?;
    load(&mut conn, id).await?.ok_or_else(|| not_found(id))
}

/// A request with its machines, timeline, redacted payload and audit entries (viewer and up).
pub async fn get(ctx: &Ctx, caller: &Caller, id: i64) -> Result<ProvisionDetail, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let provision = load(&mut conn, id).await?.ok_or_else(|| not_found(id))?;
    let machines = db::provisions::machines(&mut conn, id).await?;
    let redacted_payloads = db::provisions::redacted_payloads(&mut conn, id).await?;
    // Every request has at least one machine: none stored is a storage fault.
    if redacted_payloads.is_empty() {
        return Err(OpError::Internal(anyhow::anyhow!(
            "provision {id} has no machine stored"
        )));
    }
    // Checks speak to the approval decision, so they are made while one is awaited.
    let checks = if provision.state == ProvisionState::PendingApproval {
        checks::of(
            &mut conn,
            &provision,
            ctx.clock.now(),
            &ctx.settings.plan_checks_blocking,
        )
        .await?
    } else {
        Vec::new()
    };
    let events = provision_events::for_provision(&mut conn, id)
        .await?
        .into_iter()
        .map(|e| Event {
            id: e.id,
            at: e.at,
            kind: e.kind,
            machine: e.machine,
            message: e.message,
            details: serde_json::from_str(&e.details).unwrap_or(serde_json::Value::Null),
        })
        .collect();
    let mut audit = audit::about(&mut conn, &format!("provision:{id}"), AUDIT_SHOWN_MAX).await?;
    audit.reverse();
    Ok(ProvisionDetail {
        provision,
        machines,
        events,
        redacted_payloads,
        checks,
        audit,
    })
}

/// The machines of many requests (a listing page), by request id (viewer and up).
pub async fn machines_of(
    ctx: &Ctx,
    caller: &Caller,
    ids: &[i64],
) -> Result<BTreeMap<i64, Vec<MachineRecord>>, OpError> {
    caller.require(Role::Viewer)?;
    let mut conn = ctx.pool.acquire().await?;
    let mut out: BTreeMap<i64, Vec<MachineRecord>> = BTreeMap::new();
    for (id, m) in db::provisions::machines_of(&mut conn, ids).await? {
        out.entry(id).or_default().push(m);
    }
    Ok(out)
}

/// A newest-first page of requests matching `filter` with id below `cursor`, and the cursor of
/// the next page when there may be one (viewer and up; `limit` 1–200).
pub async fn list(
    ctx: &Ctx,
    caller: &Caller,
    filter: &ProvisionFilter,
    cursor: Option<i64>,
    limit: u32,
) -> Result<(Vec<Provision>, Option<i64>), OpError> {
    caller.require(Role::Viewer)?;
    if !(1..=LIST_LIMIT_MAX).contains(&limit) {
        return Err(
            FieldError::new("limit", format!("must be between 1 and {LIST_LIMIT_MAX}")).into(),
        );
    }
    if cursor.is_some_and(|c| c < 1) {
        return Err(FieldError::new("cursor", "must be a positive request id").into());
    }
    let mut conn = ctx.pool.acquire().await?;
    let rows = db::provisions::list(&mut conn, filter, cursor, i64::from(limit)).await?;
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let approvals = db::provisions::approvers_of(&mut conn, &ids).await?;
    let next = (rows.len() == limit as usize)
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    let items = rows
        .into_iter()
        .map(|row| {
            let mine = approvals
                .iter()
                .filter(|(pid, _)| *pid == row.id)
                .map(|(_, a)| a.clone())
                .collect();
            from_row(row, mine)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((items, next))
}

/// How many pending requests the caller could approve now (the navigation badge): 0 below
/// approver; otherwise not their own, not already approved by them, not using a config or
/// template version they wrote, and still inside its window.
pub async fn awaiting_approval_count(ctx: &Ctx, caller: &Caller) -> Result<u64, OpError> {
    if !caller.role.includes(Role::Approver) {
        return Ok(0);
    }
    let mut conn = ctx.pool.acquire().await?;
    Ok(db::provisions::approvable_by(&mut conn, caller.actor.name(), ctx.clock.now()).await?)
}

/// Moves every request whose window closed (pending approval, or approved but not started) to
/// `expired`, as the system; returns how many moved.
pub async fn expire_due_once(ctx: &Ctx) -> anyhow::Result<usize> {
    let now = ctx.clock.now();
    let due = {
        let mut conn = ctx.pool.acquire().await?;
        db::provisions::due_for_expiry(&mut conn, now).await?
    };
    let mut moved = 0;
    for (id, state) in due {
        let Ok(from) = state.parse::<ProvisionState>() else {
            continue;
        };
        let why = match from {
            ProvisionState::Approved => "approved but not started before its run window closed",
            _ => "not approved before its approval window closed",
        };
        // One short transaction per request: a long sweep never holds the write lock.
        let mut tx = db::begin_write(&ctx.pool).await?;
        let t = Transition::plain(id, from, ProvisionState::Expired, &Actor::System, why);
        let outcome = transition::apply(&mut tx, ctx, now, t).await?;
        tx.commit().await?;
        if outcome == Outcome::Moved {
            moved += 1;
        }
    }
    Ok(moved)
}
