//! Big histories stay flat (issue 18, item 6): every history page query and every export's
//! first page costs at most 2× at full size what it costs at 10 % of it.
//!
//! `cargo bench --bench history` fills a temporary SQLite file, in two steps (10 %, then the
//! rest), with 100,000 provision requests and 1,000,000 audit entries, interleaved as the
//! product writes them: each request's rows (the request, its 1–3 machines, its approval, its
//! timeline) and its audit entries land through the product's own writers (`db::provisions`,
//! `provision_events`, `transition::apply`, `audit::append`, so the hash chain is the real one
//! and `audit verify` accepts it), followed by other audit entries (logins, user and config
//! changes, 10 % anonymous login failures) up to ten entries a request. Each step is one write
//! transaction per 1,000 requests. One request per step is filed for real (planned, rendered,
//! fleet `prod`) and left pending, so a pending request's detail page runs its plan checks.
//!
//! After each step it times, median of `HISTORY_RUNS` runs (default 25), through the
//! operations the pages and the API call: the audit page (`audit::search`, 50 entries) with
//! each filter the page offers (actor, action exact and prefix, target kind and `kind:id`, a
//! time window, `from` and `to` alone, each filter with a window, a cursor half-way), the
//! audit export's first chunk (`audit::export`, 1,000 entries), the provision history list
//! (`requests::list`, 50) with each filter (fleet, machine config, every state, requester,
//! approver, time window, approver with each other filter, some matching nothing, a cursor),
//! the provision export's first page (`history::export`, 200 requests encoded) and a
//! request's detail page (`requests::get`, finished and pending). It prints one table (10 %,
//! full, ratio) and checks each ratio ≤ 2 (`Goals`: exit 1 when one is missed). Sizes:
//! `HISTORY_PROVISIONS` (default 100,000) and `HISTORY_AUDIT_PER_REQUEST` (default 10).
//! After each fill the WAL is checkpointed and the file flushed before anything is timed.
//! Figures taken while other builds run are noisy; a sub-millisecond query can miss on a
//! scheduler hiccup, so the medians are over many runs.

#[path = "../tests/api/fake_hetzner.rs"]
mod fake_hetzner;
#[path = "support/goals.rs"]
mod goals;

use std::sync::Arc;
use std::time::{Duration, Instant};

use headroom::audit::{self, Action, Actor, NewEntry};
use headroom::auth::Caller;
use headroom::context::Ctx;
use headroom::db;
use headroom::db::provision_events::{self, NewEvent};
use headroom::db::provisions::{NewMachine, NewProvision};
use headroom::domain::fleet::FleetInput;
use headroom::domain::machine::{MachineInput, ProviderKind};
use headroom::domain::{ProvisionState, Role, SystemClock};
use headroom::export::ExportFormat;
use headroom::provisioning::transition::{self, Transition};
use headroom::provisioning::{history, requests, NewRequest, Provision, ProvisionFilter};

use fake_hetzner::FakeHetzner;
use goals::Goals;

const BIN: &str = env!("CARGO_BIN_EXE_headroom");
/// 2026-01-01: the first entry's time; one audit entry a minute after.
const START: i64 = 1_767_225_600_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 86_400_000;
/// Requests per write transaction while filling.
const BATCH: i64 = 1000;

const FLEETS: [&str; 10] = [
    "prod", "edge-a", "edge-b", "eu-1", "eu-2", "us-1", "us-2", "ap-1", "lab", "stage",
];
const CONFIGS: [&str; 5] = [
    "spare-fsn1",
    "spare-nbg1",
    "spare-hel1",
    "big-fsn1",
    "arm-fsn1",
];
const OPERATORS: [&str; 8] = [
    "olga", "oscar", "otto", "opal", "orla", "owen", "ozzy", "omar",
];
const APPROVERS: [&str; 4] = ["abe", "ada", "amy", "ari"];
const ACTORS: [&str; 20] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
    "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "system",
];
const ACTIONS: [Action; 6] = [
    Action::UserCreated,
    Action::UserRoleChanged,
    Action::MachineConfigUpdated,
    Action::TemplateUpdated,
    Action::AuthLoginSucceeded,
    Action::TokenCreated,
];

fn env_or(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn caller(name: &str, role: Role) -> Caller {
    let actor = if name == "system" {
        Actor::System
    } else {
        Actor::User(name.into())
    };
    Caller {
        actor,
        role,
        user_id: None,
    }
}

fn config() -> MachineInput {
    MachineInput {
        name: "spare-fsn1".into(),
        provider: "hetzner".into(),
        location: "fsn1".into(),
        server_type: "cx22".into(),
        image: "debian-12".into(),
        region: "eu-central".into(),
        zone: "fsn1-dc14".into(),
        ssh_keys: vec![serde_json::json!(4711)],
        yubaba_channel: "stable".into(),
        yubaba_url: "https://releases.yubaba.invalid/yubaba-1.4.2-x86_64.tar.gz".into(),
        yubaba_sha256: "4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a10".into(),
        ..Default::default()
    }
}

/// The default template, the catalogue, config `spare-fsn1` and fleet `prod`: what filing a
/// real request needs.
async fn prepare(ctx: &Ctx) {
    let system = Caller::system();
    headroom::machine_setup::templates::ensure_default(ctx)
        .await
        .expect("template");
    headroom::machine_setup::catalogue::refresh(ctx, &system, ProviderKind::Hetzner)
        .await
        .expect("catalogue");
    headroom::machine_setup::configs::create(ctx, &system, &config())
        .await
        .expect("config");
    let fleet = FleetInput {
        name: "prod".into(),
        endpoints: vec!["http://127.0.0.1:7443".into()],
        restore_machine_config: "spare-fsn1".into(),
        ..FleetInput::default()
    };
    headroom::fleets::create(ctx, &system, &fleet)
        .await
        .expect("fleet");
}

/// Files a real request for fleet `prod` (planned and rendered), left pending.
async fn file_real(ctx: &Ctx) -> Provision {
    let request = NewRequest {
        fleet: "prod".into(),
        machine_config: "spare-fsn1".into(),
        template: None,
        count: 3,
        reason: "history bench".into(),
    };
    requests::create(ctx, &caller("olga", Role::Operator), &request)
        .await
        .expect("file a real request")
}

/// What every bulk request copies from the real one: its plan and a machine's payload.
struct Model {
    plan: String,
    plan_hash: String,
    sha256: String,
    size_bytes: u32,
    payload: String,
}

impl Model {
    async fn of(ctx: &Ctx, p: &Provision) -> Model {
        let d = requests::get(ctx, &Caller::system(), p.id)
            .await
            .expect("detail");
        Model {
            plan: serde_json::to_string(&p.plan).expect("plan"),
            plan_hash: p.plan_hash.to_string(),
            sha256: d.machines[0].sha256.clone(),
            size_bytes: u32::try_from(d.machines[0].size_bytes).expect("size"),
            payload: d.redacted_payloads[0].clone(),
        }
    }
}

/// The fill's position: requests and audit entries written so far.
struct Fill {
    requests: i64,
    entries: i64,
    per_request: i64,
}

impl Fill {
    /// The time of the next audit entry (one a minute).
    fn now(&self) -> i64 {
        START + self.entries * MINUTE
    }
}

/// Appends one audit entry that is not about a request, as logins and admin changes write.
async fn other_entry(conn: &mut sqlx::AnyConnection, fill: &mut Fill) -> sqlx::Result<()> {
    let i = fill.entries;
    let (actor, action) = if i % 10 == 0 {
        (Actor::Anonymous, Action::AuthLoginFailed)
    } else {
        (
            Actor::User(ACTORS[(i % 20) as usize].into()),
            ACTIONS[(i % 6) as usize],
        )
    };
    let target = format!("t{}", i % 500);
    audit::append(
        conn,
        fill.now(),
        NewEntry {
            actor: &actor,
            action,
            target_kind: "user",
            target_id: &target,
            details: serde_json::json!({ "i": i }),
        },
    )
    .await?;
    fill.entries += 1;
    Ok(())
}

/// Writes request number `k` the way filing, approval and the runner write it, ending in a
/// state picked by `k` (three in four succeed).
async fn bulk_request(
    conn: &mut sqlx::AnyConnection,
    ctx: &Ctx,
    model: &Model,
    k: i64,
    fill: &mut Fill,
) -> anyhow::Result<()> {
    use ProvisionState::*;
    let fleet = FLEETS[(k % 10) as usize];
    let machine_config = CONFIGS[(k % 5) as usize];
    let requester = if k % 5 == 0 {
        "system"
    } else {
        OPERATORS[(k % 8) as usize]
    };
    let count = [1, 1, 2, 3][(k % 4) as usize];
    let now = fill.now();
    let id = db::provisions::insert(
        conn,
        &NewProvision {
            fleet,
            machine_config,
            config_version: 1,
            template: "default",
            template_version: 1,
            count,
            reason: "restore spares",
            requester,
            plan: &model.plan,
            plan_hash: &model.plan_hash,
            approvals_required: 1,
            now,
            expires_at: now + 24 * 3_600_000,
        },
    )
    .await?;
    for idx in 0..count {
        let name = format!("{fleet}-spare-{id}-{idx}");
        db::provisions::insert_machine(
            conn,
            id,
            &NewMachine {
                idx: idx as u32,
                name: &name,
                sha256: &model.sha256,
                size_bytes: model.size_bytes,
                redacted_payload: &model.payload,
            },
            now,
        )
        .await?;
    }
    provision_events::append(
        conn,
        NewEvent {
            provision_id: id,
            at: now,
            kind: "state",
            machine: None,
            message: &format!("requested by {requester}: {count} × cx22 at fsn1"),
            details: &serde_json::json!({ "to": "pending_approval", "plan_hash": model.plan_hash }),
        },
    )
    .await?;
    let requester_actor = caller(requester, Role::Operator).actor;
    audit::append(
        conn,
        now,
        NewEntry {
            actor: &requester_actor,
            action: Action::ProvisionRequested,
            target_kind: "provision",
            target_id: &id.to_string(),
            details: serde_json::json!({ "fleet": fleet, "count": count, "plan_hash": model.plan_hash }),
        },
    )
    .await?;
    fill.entries += 1;
    let approver = Actor::User(APPROVERS[(k % 4) as usize].into());
    let system = Actor::System;
    let path: &[(ProvisionState, &Actor, &str)] = match k % 20 {
        0 => &[
            (Approved, &approver, ""),
            (Executing, &system, ""),
            (Failed, &system, "machine 1: server create failed"),
        ],
        1 => &[(Rejected, &approver, "not now")],
        2 => &[(Expired, &system, "its window closed")],
        3 => &[(Cancelled, &requester_actor, "")],
        4 => &[(Superseded, &system, "machine config changed")],
        _ => &[
            (Approved, &approver, ""),
            (Executing, &system, ""),
            (Succeeded, &system, ""),
        ],
    };
    let mut from = PendingApproval;
    for (to, actor, reason) in path {
        if *to == Approved {
            db::provisions::insert_approval(conn, id, actor.name(), &model.plan_hash, fill.now())
                .await?;
        }
        if *to == Succeeded || *to == Failed {
            sqlx::query(
                "UPDATE provision_machines SET status = 'created', server_id = ?, ipv4 = '192.0.2.1'
                 WHERE provision_id = ?",
            )
            .bind(id * 10)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        }
        let t = Transition::plain(id, from, *to, actor, reason);
        transition::apply(conn, ctx, fill.now(), t).await?;
        if transition::action_for(*to).is_some() {
            fill.entries += 1;
        }
        from = *to;
    }
    fill.requests += 1;
    Ok(())
}

/// Fills up to `requests` requests and their share of audit entries.
async fn fill_to(
    ctx: &Ctx,
    model: &Model,
    fill: &mut Fill,
    requests: i64,
) -> anyhow::Result<Duration> {
    let t = Instant::now();
    while fill.requests < requests {
        let mut tx = db::begin_write(&ctx.pool).await?;
        let end = (fill.requests + BATCH).min(requests);
        while fill.requests < end {
            bulk_request(&mut tx, ctx, model, fill.requests, fill).await?;
            while fill.entries < fill.requests * fill.per_request {
                other_entry(&mut tx, fill).await?;
            }
        }
        tx.commit().await?;
    }
    Ok(t.elapsed())
}

/// Lets the fill's writing finish before anything is timed: the WAL checkpointed into the
/// file and the file flushed to disk. Measured right after a fill of 900,000 entries, every
/// audit page at full size ran at about twice its time in a run where the kernel had written
/// the fill's pages back already (the audit cases come first), so the ratio measured the
/// write-back, not the queries.
async fn settle(ctx: &Ctx, file: &std::path::Path) -> anyhow::Result<()> {
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&ctx.pool)
        .await?;
    std::fs::File::open(file)?.sync_all()?;
    Ok(())
}

/// One timed thing the pages do.
enum Case {
    AuditPage(audit::Filter, Option<i64>),
    AuditExport(audit::Filter),
    List(ProvisionFilter, Option<i64>),
    Export(ProvisionFilter),
    Detail(i64),
}

/// Every case, for a history of `requests` requests and `entries` audit entries; `pending`
/// is the real request filed at this size, `finished` a succeeded one half-way.
fn cases(requests: i64, entries: i64, pending: i64, finished: i64) -> Vec<(String, Case)> {
    let a = |f: audit::Filter| Case::AuditPage(f, None);
    let p = |f: ProvisionFilter| Case::List(f, None);
    let newest_day = START + entries * MINUTE - DAY;
    let third_day = (Some(START + 3 * DAY), Some(START + 4 * DAY));
    let mut out: Vec<(String, Case)> = vec![
        ("audit page, no filter".into(), a(audit::Filter::default())),
        (
            "audit page, actor grace".into(),
            a(audit::Filter {
                actor: Some("grace".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, actor abe (approvals)".into(),
            a(audit::Filter {
                actor: Some("abe".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, action auth.login_failed".into(),
            a(audit::Filter {
                action: Some("auth.login_failed".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, action prefix provision.".into(),
            a(audit::Filter {
                action: Some("provision.".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, action prefix pin. (none)".into(),
            a(audit::Filter {
                action: Some("pin.".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, target provision".into(),
            a(audit::Filter {
                target: Some("provision".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, target user:t42".into(),
            a(audit::Filter {
                target: Some("user:t42".into()),
                ..Default::default()
            }),
        ),
        (
            "audit page, target provision:<middle>".into(),
            a(audit::Filter {
                target: Some(format!("provision:{}", requests / 2)),
                ..Default::default()
            }),
        ),
        (
            "audit page, one day (day 4)".into(),
            a(audit::Filter {
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, from: the newest day".into(),
            a(audit::Filter {
                from: Some(newest_day),
                ..Default::default()
            }),
        ),
        (
            "audit page, to: before day 4".into(),
            a(audit::Filter {
                to: third_day.0,
                ..Default::default()
            }),
        ),
        (
            "audit page, actor grace + day 4".into(),
            a(audit::Filter {
                actor: Some("grace".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, action login_failed + day 4".into(),
            a(audit::Filter {
                action: Some("auth.login_failed".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, target user + day 4".into(),
            a(audit::Filter {
                target: Some("user".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, target user:t42 + day 4".into(),
            a(audit::Filter {
                target: Some("user:t42".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, prefix provision. + day 4".into(),
            a(audit::Filter {
                action: Some("provision.".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit page, actor grace, to: before day 4".into(),
            a(audit::Filter {
                actor: Some("grace".into()),
                to: third_day.0,
                ..Default::default()
            }),
        ),
        (
            "audit page, cursor half-way".into(),
            Case::AuditPage(audit::Filter::default(), Some(entries / 2)),
        ),
        (
            "audit export, no filter".into(),
            Case::AuditExport(audit::Filter::default()),
        ),
        (
            "audit export, actor grace".into(),
            Case::AuditExport(audit::Filter {
                actor: Some("grace".into()),
                ..Default::default()
            }),
        ),
        (
            "audit export, action prefix provision.".into(),
            Case::AuditExport(audit::Filter {
                action: Some("provision.".into()),
                ..Default::default()
            }),
        ),
        (
            "audit export, target provision".into(),
            Case::AuditExport(audit::Filter {
                target: Some("provision".into()),
                ..Default::default()
            }),
        ),
        (
            "audit export, actor grace + day 4".into(),
            Case::AuditExport(audit::Filter {
                actor: Some("grace".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "audit export, from: the newest day".into(),
            Case::AuditExport(audit::Filter {
                from: Some(newest_day),
                ..Default::default()
            }),
        ),
        (
            "audit export, one day (day 4)".into(),
            Case::AuditExport(audit::Filter {
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "provisions, no filter".into(),
            p(ProvisionFilter::default()),
        ),
        (
            "provisions, fleet edge-a".into(),
            p(ProvisionFilter {
                fleet: Some("edge-a".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, machine config big-fsn1".into(),
            p(ProvisionFilter {
                machine_config: Some("big-fsn1".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, requester olga".into(),
            p(ProvisionFilter {
                requester: Some("olga".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver abe".into(),
            p(ProvisionFilter {
                approver: Some("abe".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, one day (day 4)".into(),
            p(ProvisionFilter {
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "provisions, from: the newest day".into(),
            p(ProvisionFilter {
                from: Some(newest_day),
                ..Default::default()
            }),
        ),
        (
            "provisions, to: before day 4".into(),
            p(ProvisionFilter {
                to: third_day.0,
                ..Default::default()
            }),
        ),
        (
            "provisions, fleet edge-a + failed".into(),
            p(ProvisionFilter {
                fleet: Some("edge-a".into()),
                state: Some(ProvisionState::Failed),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver abe + fleet eu-1".into(),
            p(ProvisionFilter {
                approver: Some("abe".into()),
                fleet: Some("eu-1".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver ada + state failed".into(),
            p(ProvisionFilter {
                approver: Some("ada".into()),
                state: Some(ProvisionState::Failed),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver abe + requester oscar".into(),
            p(ProvisionFilter {
                approver: Some("abe".into()),
                requester: Some("oscar".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver abe + config big-fsn1".into(),
            p(ProvisionFilter {
                approver: Some("abe".into()),
                machine_config: Some("big-fsn1".into()),
                ..Default::default()
            }),
        ),
        (
            "provisions, approver abe + day 4".into(),
            p(ProvisionFilter {
                approver: Some("abe".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "provisions, fleet edge-a + day 4".into(),
            p(ProvisionFilter {
                fleet: Some("edge-a".into()),
                from: third_day.0,
                to: third_day.1,
                ..Default::default()
            }),
        ),
        (
            "provisions, cursor half-way".into(),
            Case::List(ProvisionFilter::default(), Some(requests / 2)),
        ),
    ];
    for state in ProvisionState::ALL {
        out.push((
            format!("provisions, state {state}"),
            p(ProvisionFilter {
                state: Some(state),
                ..Default::default()
            }),
        ));
    }
    out.extend([
        (
            "provision export, no filter".into(),
            Case::Export(ProvisionFilter::default()),
        ),
        (
            "provision export, state succeeded".into(),
            Case::Export(ProvisionFilter {
                state: Some(ProvisionState::Succeeded),
                ..Default::default()
            }),
        ),
        (
            "provision export, approver abe".into(),
            Case::Export(ProvisionFilter {
                approver: Some("abe".into()),
                ..Default::default()
            }),
        ),
        (
            "provision export, approver abe + fleet eu-1".into(),
            Case::Export(ProvisionFilter {
                approver: Some("abe".into()),
                fleet: Some("eu-1".into()),
                ..Default::default()
            }),
        ),
        (
            "provision export, fleet prod".into(),
            Case::Export(ProvisionFilter {
                fleet: Some("prod".into()),
                ..Default::default()
            }),
        ),
        (
            "provision detail, succeeded, half-way".into(),
            Case::Detail(finished),
        ),
        (
            "provision detail, pending (plan checks)".into(),
            Case::Detail(pending),
        ),
    ]);
    out
}

/// Runs `case` once as the page (or API) would.
async fn run(ctx: &Ctx, viewer: &Caller, case: &Case) -> anyhow::Result<usize> {
    Ok(match case {
        Case::AuditPage(filter, before) => {
            let search = audit::Search {
                filter: filter.clone(),
                before: *before,
                limit: audit::DEFAULT_PAGE,
            };
            audit::search(ctx, viewer, &search).await?.entries.len()
        }
        Case::AuditExport(filter) => {
            let mut bytes = 0;
            audit::export(
                ctx,
                viewer,
                filter,
                ExportFormat::Jsonl,
                async |chunk: String| {
                    bytes += chunk.len();
                    false
                },
            )
            .await?;
            bytes
        }
        Case::List(filter, cursor) => requests::list(ctx, viewer, filter, *cursor, 50)
            .await?
            .0
            .len(),
        Case::Export(filter) => {
            let stream = history::export(ctx, viewer, filter, ExportFormat::Jsonl).await?;
            drop(stream);
            1
        }
        Case::Detail(id) => {
            let d = requests::get(ctx, viewer, *id).await?;
            d.events.len() + d.audit.len() + d.checks.len()
        }
    })
}

/// Waits, untimed, until a dropped export's walk has seen its stream gone and given its
/// permit back (exports are refused while two run).
async fn exports_done(ctx: &Ctx) {
    while ctx.exports.available_permits() < headroom::context::MAX_EXPORTS {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
}

/// The median of `runs` runs of `case` (after one warm-up), and how many items it returned.
async fn median(
    ctx: &Ctx,
    viewer: &Caller,
    case: &Case,
    runs: usize,
) -> anyhow::Result<(Duration, usize)> {
    let items = run(ctx, viewer, case).await?;
    exports_done(ctx).await;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(run(ctx, viewer, case).await?);
        times.push(t.elapsed());
        exports_done(ctx).await;
    }
    times.sort();
    Ok((times[times.len() / 2], items))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let total = env_or("HISTORY_PROVISIONS", 100_000).max(100);
    let per_request = env_or("HISTORY_AUDIT_PER_REQUEST", 10).max(6);
    let runs = env_or("HISTORY_RUNS", 25).max(1) as usize;
    let fake = FakeHetzner::start().await;
    let dir = tempfile::tempdir()?;
    let settings = headroom::config::Settings {
        database_url: format!("sqlite:{}", dir.path().join("history.db").display()),
        render_worker: Some(BIN.into()),
        pin_check_on_request: false,
        ..headroom::config::Settings::default()
    };
    let pool = db::connect(&settings.database_url).await?;
    let mut ctx = Ctx::build(settings, pool, Arc::new(SystemClock))?;
    ctx.providers = ctx.providers.clone().with(
        ProviderKind::Hetzner,
        Arc::new(headroom::provider::hetzner::Hetzner::new(
            &fake.uri(),
            fake.token().into(),
        )),
    );
    prepare(&ctx).await;
    let first = file_real(&ctx).await;
    let model = Model::of(&ctx, &first).await;
    let viewer = caller("vera", Role::Viewer);
    let mut fill = Fill {
        requests: 1,
        entries: 0,
        per_request,
    };
    fill.entries = db::audit::highest_issued_id(&mut *ctx.pool.acquire().await?).await?;
    println!(
        "history bench: {total} provision requests, {} audit entries at full size; median of {runs} runs",
        total * per_request
    );
    let mut results: Vec<(String, Vec<(Duration, usize)>)> = Vec::new();
    for size in [total / 10, total] {
        let took = fill_to(&ctx, &model, &mut fill, size).await?;
        settle(&ctx, &dir.path().join("history.db")).await?;
        let pending = file_real(&ctx).await.id;
        let entries = fill.entries;
        let finished: i64 = sqlx::query_scalar(
            "SELECT id FROM provisions WHERE state = 'succeeded' AND id >= ? ORDER BY id LIMIT 1",
        )
        .bind(fill.requests / 2)
        .fetch_one(&ctx.pool)
        .await?;
        println!(
            "filled to {} requests, {entries} audit entries in {:.1} s ({:.1} µs an entry)",
            fill.requests,
            took.as_secs_f64(),
            took.as_secs_f64() * 1e6 / entries.max(1) as f64
        );
        for (i, (label, case)) in cases(fill.requests, entries, pending, finished)
            .into_iter()
            .enumerate()
        {
            let m = median(&ctx, &viewer, &case, runs).await?;
            if results.len() <= i {
                results.push((label, Vec::new()));
            }
            results[i].1.push(m);
        }
    }
    let t = Instant::now();
    let verified = audit::verify(&ctx, &Caller::system()).await?;
    println!(
        "audit verify over {} entries: {:?} in {:.1} s",
        fill.entries,
        verified,
        t.elapsed().as_secs_f64()
    );
    let mut goals = Goals::default();
    goals.check("the audit chain verifies", verified.is_ok());
    println!(
        "\n| {:<42} | {:>10} | {:>10} | {:>6} | {:>5} |",
        "query (median)", "10 %", "full", "ratio", "items"
    );
    println!(
        "|{:-<44}|{:->12}|{:->12}|{:->8}|{:->7}|",
        "", "", "", "", ""
    );
    let mut checks = Vec::new();
    for (label, m) in &results {
        let (small, full) = (m[0].0, m[1].0);
        let ratio = full.as_secs_f64() / small.as_secs_f64().max(1e-9);
        println!(
            "| {label:<42} | {:>7.3} ms | {:>7.3} ms | {ratio:>5.2}× | {:>5} |",
            ms(small),
            ms(full),
            m[1].1
        );
        checks.push((label, ratio));
    }
    println!();
    for (label, ratio) in checks {
        goals.check(
            &format!("{label}: {ratio:.2}× of 10 % (≤ 2×)"),
            ratio <= 2.0,
        );
    }
    goals.exit_if_missed();
    Ok(())
}
