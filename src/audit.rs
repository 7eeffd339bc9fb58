//! The tamper-evident audit log: append inside the caller's transaction, verify the chain.
//!
//! `hash = sha256(prev_hash ‖ "\n" ‖ canonical entry)`, where the canonical entry is the JSON
//! array `[id, at, actor, action, target_kind, target_id, details]` with `details` re-encoded
//! with sorted keys. The first entry chains from [`GENESIS`].

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::AnyConnection;

use crate::db::audit::{self as rows, AuditRow};
use crate::domain::digest::hex;
use crate::domain::{FieldErrors, Role, UnixMillis};
use crate::export::{self, ExportFormat, ExportStream};

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Who did something (defined beside the caller in `domain`).
pub use crate::domain::Actor;
use crate::domain::Caller;
use crate::error::OpError;

/// What happened, as one closed set: each action's wire name (what the log stores, filters
/// match and exports show) is defined here and nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// `user.created`: a user was added.
    UserCreated,
    /// `user.role_changed`: a user's role changed.
    UserRoleChanged,
    /// `user.disabled`: a user was disabled (their sessions and tokens stop working).
    UserDisabled,
    /// `user.enabled`: a user was enabled again.
    UserEnabled,
    /// `user.password_changed`: a user changed their own password.
    UserPasswordChanged,
    /// `user.password_reset`: an admin (or the demo seeding) set a user's password.
    UserPasswordReset,
    /// `auth.password_change_failed`: a password change was refused (wrong current password, or throttled).
    AuthPasswordChangeFailed,
    /// `auth.login_succeeded`: a session was opened.
    AuthLoginSucceeded,
    /// `auth.login_failed`: a login was refused.
    AuthLoginFailed,
    /// `auth.logout`: a session was closed by its user.
    AuthLogout,
    /// `token.created`: an API token was created.
    TokenCreated,
    /// `token.revoked`: an API token was revoked.
    TokenRevoked,
    /// `pin.checked`: a tarball pin was checked.
    PinChecked,
    /// `template.created`: a template was created.
    TemplateCreated,
    /// `template.updated`: a template got a new version.
    TemplateUpdated,
    /// `machine_config.created`: a machine config was created.
    MachineConfigCreated,
    /// `machine_config.updated`: a machine config got a new version.
    MachineConfigUpdated,
    /// `catalogue.refreshed`: a provider catalogue was fetched again.
    CatalogueRefreshed,
    /// `fleet.created`: a fleet was added.
    FleetCreated,
    /// `fleet.updated`: a fleet's settings changed.
    FleetUpdated,
    /// `fleet.deleted`: a fleet was removed.
    FleetDeleted,
    /// `fleet.deficit_entered`: a fleet's spares stayed below required for the deficit rule's
    /// samples (recorded by `system`).
    FleetDeficitEntered,
    /// `fleet.deficit_left`: a fleet in deficit kept its required spares for the rule's
    /// samples (recorded by `system`).
    FleetDeficitLeft,
    /// `provision.requested`: a provision request was planned and filed.
    ProvisionRequested,
    /// `provision.approved`: an approver approved a request's plan.
    ProvisionApproved,
    /// `provision.rejected`: an approver rejected a request (with a reason).
    ProvisionRejected,
    /// `provision.cancelled`: a request was withdrawn before it ran.
    ProvisionCancelled,
    /// `provision.expired`: a request's approval window passed.
    ProvisionExpired,
    /// `provision.superseded`: a request's plan no longer matched its config, template or secrets.
    ProvisionSuperseded,
    /// `provision.started`: the runner claimed an approved request.
    ProvisionStarted,
    /// `provision.succeeded`: every machine of a request was created.
    ProvisionSucceeded,
    /// `provision.failed`: a request ended with a machine it could not create.
    ProvisionFailed,
    /// `provision.machine_destroyed`: an approver destroyed a failed machine headroom created.
    ProvisionMachineDestroyed,
    /// `database.backed_up`: `headroom backup` wrote a checked copy of the whole database.
    DatabaseBackedUp,
}

impl Action {
    /// Every action, for listings and tests.
    pub const ALL: [Action; 34] = [
        Action::UserCreated,
        Action::UserRoleChanged,
        Action::UserDisabled,
        Action::UserEnabled,
        Action::UserPasswordChanged,
        Action::UserPasswordReset,
        Action::AuthPasswordChangeFailed,
        Action::AuthLoginSucceeded,
        Action::AuthLoginFailed,
        Action::AuthLogout,
        Action::TokenCreated,
        Action::TokenRevoked,
        Action::PinChecked,
        Action::TemplateCreated,
        Action::TemplateUpdated,
        Action::MachineConfigCreated,
        Action::MachineConfigUpdated,
        Action::CatalogueRefreshed,
        Action::FleetCreated,
        Action::FleetUpdated,
        Action::FleetDeleted,
        Action::FleetDeficitEntered,
        Action::FleetDeficitLeft,
        Action::ProvisionRequested,
        Action::ProvisionApproved,
        Action::ProvisionRejected,
        Action::ProvisionCancelled,
        Action::ProvisionExpired,
        Action::ProvisionSuperseded,
        Action::ProvisionStarted,
        Action::ProvisionSucceeded,
        Action::ProvisionFailed,
        Action::ProvisionMachineDestroyed,
        Action::DatabaseBackedUp,
    ];

    /// The dotted wire name, e.g. `user.role_changed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::UserCreated => "user.created",
            Action::UserRoleChanged => "user.role_changed",
            Action::UserDisabled => "user.disabled",
            Action::UserEnabled => "user.enabled",
            Action::UserPasswordChanged => "user.password_changed",
            Action::UserPasswordReset => "user.password_reset",
            Action::AuthPasswordChangeFailed => "auth.password_change_failed",
            Action::AuthLoginSucceeded => "auth.login_succeeded",
            Action::AuthLoginFailed => "auth.login_failed",
            Action::AuthLogout => "auth.logout",
            Action::TokenCreated => "token.created",
            Action::TokenRevoked => "token.revoked",
            Action::PinChecked => "pin.checked",
            Action::TemplateCreated => "template.created",
            Action::TemplateUpdated => "template.updated",
            Action::MachineConfigCreated => "machine_config.created",
            Action::MachineConfigUpdated => "machine_config.updated",
            Action::CatalogueRefreshed => "catalogue.refreshed",
            Action::FleetCreated => "fleet.created",
            Action::FleetUpdated => "fleet.updated",
            Action::FleetDeleted => "fleet.deleted",
            Action::FleetDeficitEntered => "fleet.deficit_entered",
            Action::FleetDeficitLeft => "fleet.deficit_left",
            Action::ProvisionRequested => "provision.requested",
            Action::ProvisionApproved => "provision.approved",
            Action::ProvisionRejected => "provision.rejected",
            Action::ProvisionCancelled => "provision.cancelled",
            Action::ProvisionExpired => "provision.expired",
            Action::ProvisionSuperseded => "provision.superseded",
            Action::ProvisionStarted => "provision.started",
            Action::ProvisionSucceeded => "provision.succeeded",
            Action::ProvisionFailed => "provision.failed",
            Action::ProvisionMachineDestroyed => "provision.machine_destroyed",
            Action::DatabaseBackedUp => "database.backed_up",
        }
    }
}

impl Action {
    /// The action a stored wire name names; `None` for a name this build does not know.
    pub fn from_wire(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialises as its wire name, as the log stores it.
impl serde::Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One entry of the log as pages and the API read it (exports stream the rows themselves).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    pub id: i64,
    pub at: UnixMillis,
    /// A username, `system` or `anonymous`.
    pub actor: String,
    /// Kept as written: the log is append-only across releases, so an entry naming an action
    /// this build no longer has must still be shown, exported and verified.
    pub action: String,
    /// What it acted on, as shown: `kind:id` (`user:alice`, `provision:12`).
    pub target: String,
    /// The details as stored (JSON text, free of secrets): shown as the exact text hashed.
    pub details: String,
    pub prev_hash: String,
    pub hash: String,
}

impl From<AuditRow> for Entry {
    fn from(r: AuditRow) -> Self {
        Entry {
            id: r.id,
            at: r.at,
            actor: r.actor,
            action: r.action,
            target: format!("{}:{}", r.target_kind, r.target_id),
            details: r.details,
            prev_hash: r.prev_hash,
            hash: r.hash,
        }
    }
}

/// What a search or export of the log matches; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Exact actor name.
    pub actor: Option<String>,
    /// Exact action, or a prefix when it ends with `.` or `*` (e.g. `user.`).
    pub action: Option<String>,
    /// Target kind and optionally id (`user` or `user:alice`).
    pub target: Option<String>,
    /// Inclusive lower bound on time.
    pub from: Option<UnixMillis>,
    /// Exclusive upper bound on time.
    pub to: Option<UnixMillis>,
}

impl Filter {
    /// The same filter in the table's terms.
    fn to_rows(&self) -> rows::AuditFilter {
        rows::AuditFilter {
            actor: self.actor.clone(),
            action: self.action.clone(),
            target: self.target.clone(),
            from: self.from,
            to: self.to,
        }
    }
}

/// An entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    pub actor: &'a Actor,
    /// What happened.
    pub action: Action,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    /// Already free of secrets.
    pub details: Value,
}

/// Appends an entry. Call inside the write transaction of the change it records.
pub async fn append(
    conn: &mut AnyConnection,
    at: UnixMillis,
    entry: NewEntry<'_>,
) -> sqlx::Result<i64> {
    let (id, prev) = rows::head(conn).await?;
    let prev_hash = prev.unwrap_or_else(|| GENESIS.to_owned());
    let mut row = AuditRow {
        id,
        at,
        actor: entry.actor.name().to_owned(),
        action: entry.action.as_str().to_owned(),
        target_kind: entry.target_kind.to_owned(),
        target_id: entry.target_id.to_owned(),
        details: entry.details.to_string(),
        prev_hash,
        hash: String::new(),
    };
    row.hash = entry_hash(&row);
    rows::insert(conn, &row).await?;
    Ok(id)
}

/// Appends `caller`'s `action` on one target: what every operation records, so each writes one
/// call instead of its own wrapper. Call inside the write transaction of the change.
pub async fn record(
    conn: &mut AnyConnection,
    caller: &Caller,
    now: UnixMillis,
    action: Action,
    target_kind: &str,
    target_id: &str,
    details: Value,
) -> sqlx::Result<()> {
    let entry = NewEntry {
        actor: &caller.actor,
        action,
        target_kind,
        target_id,
        details,
    };
    append(conn, now, entry).await.map(|_| ())
}

/// The hash an entry must carry, given its fields and `prev_hash`.
pub fn entry_hash(row: &AuditRow) -> String {
    // Re-encode details so the hash does not depend on how the JSON text was spaced; serde_json
    // maps are ordered by key, which makes the encoding canonical.
    let details: Value =
        serde_json::from_str(&row.details).unwrap_or(Value::String(row.details.clone()));
    let canonical = serde_json::json!([
        row.id,
        row.at,
        row.actor,
        row.action,
        row.target_kind,
        row.target_id,
        details
    ]);
    let mut h = Sha256::new();
    h.update(row.prev_hash.as_bytes());
    h.update(b"\n");
    h.update(canonical.to_string().as_bytes());
    hex(&h.finalize())
}

/// Why the chain is broken, naming the first entry that does not match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error(
        "audit entry {id}: its hash does not match its contents (changed after it was written)"
    )]
    HashMismatch { id: i64 },
    #[error("audit entry {id}: prev_hash does not match entry {prev_id} before it (an entry was removed or changed)")]
    LinkMismatch { id: i64, prev_id: i64 },
    #[error(
        "audit entry {id}: missing (ids jump from {prev_id} to {next_id}: entries were deleted)"
    )]
    Gap { id: i64, prev_id: i64, next_id: i64 },
    #[error("audit entries after {last_id} up to {highest_issued} are missing (the end of the log was cut off)")]
    Truncated { last_id: i64, highest_issued: i64 },
}

/// The outcome of a successful verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub entries: u64,
}

/// Walks the whole chain in id order, in batches so memory stays flat on long logs.
pub async fn verify(
    ctx: &crate::context::Ctx,
    caller: &Caller,
) -> anyhow::Result<Result<Verified, ChainBreak>> {
    require_reader(caller)?;
    let mut conn = ctx.pool.acquire().await?;
    verify_connection(&mut conn).await
}

/// The walk behind [`verify`], over any database's connection (a backup checks its copy).
pub(crate) async fn verify_connection(
    conn: &mut AnyConnection,
) -> anyhow::Result<Result<Verified, ChainBreak>> {
    // Read before the walk, not after it: each batch reads what is committed when it runs, so
    // an entry appended after the last batch (a login, a provision running) made the end look
    // cut off. An id is issued in the transaction that inserts its entry, so every id up to
    // this one was in the log when the walk began.
    let issued = rows::highest_issued_id(conn).await?;
    const BATCH: i64 = 1000;
    let mut prev_id = 0_i64;
    let mut prev_hash = GENESIS.to_owned();
    let mut count = 0_u64;
    loop {
        let batch = rows::batch_after(conn, &rows::AuditFilter::default(), prev_id, BATCH).await?;
        if batch.is_empty() {
            break;
        }
        for row in batch {
            if row.id != prev_id + 1 {
                return Ok(Err(ChainBreak::Gap {
                    id: prev_id + 1,
                    prev_id,
                    next_id: row.id,
                }));
            }
            if row.prev_hash != prev_hash {
                return Ok(Err(ChainBreak::LinkMismatch {
                    id: row.id,
                    prev_id,
                }));
            }
            if entry_hash(&row) != row.hash {
                return Ok(Err(ChainBreak::HashMismatch { id: row.id }));
            }
            prev_id = row.id;
            prev_hash = row.hash;
            count += 1;
        }
    }
    if issued > prev_id {
        return Ok(Err(ChainBreak::Truncated {
            last_id: prev_id,
            highest_issued: issued,
        }));
    }
    Ok(Ok(Verified { entries: count }))
}

/// One entry as exported (JSONL and CSV share these columns).
#[derive(Debug, serde::Serialize)]
pub struct ExportRecord<'a> {
    pub id: i64,
    pub time: String,
    pub actor: &'a str,
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    pub details: Value,
    pub prev_hash: &'a str,
    pub hash: &'a str,
    /// The details as stored, for CSV: the cell shows the exact text that was hashed.
    #[serde(skip)]
    details_text: &'a str,
}

impl<'a> From<&'a AuditRow> for ExportRecord<'a> {
    fn from(r: &'a AuditRow) -> Self {
        Self {
            id: r.id,
            time: crate::domain::clock::format_utc(r.at),
            actor: &r.actor,
            action: &r.action,
            target_kind: &r.target_kind,
            target_id: &r.target_id,
            details: serde_json::from_str(&r.details).unwrap_or(Value::Null),
            prev_hash: &r.prev_hash,
            hash: &r.hash,
            details_text: &r.details,
        }
    }
}

impl export::Record for ExportRecord<'_> {
    const CSV_HEADER: &'static str = CSV_HEADER;

    fn csv_cells(&self) -> Vec<String> {
        [
            &self.id.to_string(),
            &self.time,
            self.actor,
            self.action,
            self.target_kind,
            self.target_id,
            self.details_text,
            self.prev_hash,
            self.hash,
        ]
        .map(str::to_owned)
        .to_vec()
    }
}

/// Entries read per batch while exporting: memory stays flat however long the log is.
const EXPORT_BATCH: i64 = 1000;

/// Walks every entry matching `filter`, oldest first, handing `sink` each batch already
/// encoded (the CSV header first). `sink` answers false to stop early (a client went away).
pub async fn export(
    ctx: &crate::context::Ctx,
    caller: &Caller,
    filter: &Filter,
    format: ExportFormat,
    sink: impl AsyncFnMut(String) -> bool,
) -> Result<(), OpError> {
    require_reader(caller)?;
    Ok(export_rows(&ctx.pool, &filter.to_rows(), format, sink).await?)
}

/// The walk behind [`export()`] and [`export_stream`]; the caller has checked the role.
async fn export_rows(
    pool: &sqlx::AnyPool,
    filter: &rows::AuditFilter,
    format: ExportFormat,
    mut sink: impl AsyncFnMut(String) -> bool,
) -> sqlx::Result<()> {
    let head = format.head::<ExportRecord<'_>>();
    if !head.is_empty() && !sink(head.to_owned()).await {
        return Ok(());
    }
    let mut after = 0;
    loop {
        let batch = {
            let mut conn = pool.acquire().await?;
            rows::batch_after(&mut conn, filter, after, EXPORT_BATCH).await?
        };
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.id;
        let chunk: String = batch
            .iter()
            .map(|r| format.line(&ExportRecord::from(r)))
            .collect();
        if !sink(chunk).await || (batch.len() as i64) < EXPORT_BATCH {
            return Ok(());
        }
    }
}

/// The download's name, before its extension.
pub const FILE_STEM: &str = "headroom-audit";

/// The CSV header row.
pub const CSV_HEADER: &str = "id,time,actor,action,target_kind,target_id,details,prev_hash,hash\n";

/// An audit search as submitted (the API's query string; the page's form); empty means any.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchInput<'a> {
    /// Exact actor name.
    pub actor: &'a str,
    /// Exact action, or a prefix ending in `.` or `*`.
    pub action: &'a str,
    /// `kind` or `kind:id`.
    pub target: &'a str,
    /// Inclusive lower time bound (UTC).
    pub from: &'a str,
    /// Exclusive upper time bound (UTC).
    pub to: &'a str,
    /// The `next_cursor` of the page before: entries older than it.
    pub cursor: &'a str,
    /// Entries per page.
    pub limit: &'a str,
}

/// A parsed audit search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// Who, what, which target, when.
    pub filter: Filter,
    /// Entries after this one (a `next_cursor`) in the page's order.
    pub before: Option<i64>,
    pub limit: i64,
}

/// Entries per page unless asked otherwise, and the most one page may hold.
pub const DEFAULT_PAGE: i64 = 50;
/// The most entries one page may hold.
pub const MAX_PAGE: i64 = 500;

impl Search {
    /// The newest `limit` entries, unfiltered.
    pub fn latest(limit: i64) -> Search {
        Search {
            filter: Filter::default(),
            before: None,
            limit,
        }
    }

    /// Parses every field, naming each one that breaks its rule.
    pub fn parse(input: &SearchInput<'_>) -> Result<Search, FieldErrors> {
        let mut errors = FieldErrors::default();
        let filter = Filter {
            actor: export::filter_text(&mut errors, "actor", input.actor),
            action: export::filter_text(&mut errors, "action", input.action),
            target: export::filter_text(&mut errors, "target", input.target),
            from: export::filter_time(&mut errors, "from", input.from),
            to: export::filter_time(&mut errors, "to", input.to),
        };
        let before = errors
            .check(export::parse_cursor(
                "cursor",
                input.cursor,
                "must be a next_cursor this API gave out (a positive entry id)",
            ))
            .flatten();
        let limit = errors
            .check(export::parse_limit(input.limit, MAX_PAGE, DEFAULT_PAGE))
            .unwrap_or(DEFAULT_PAGE);
        export::check_window(&mut errors, filter.from, filter.to);
        if errors.is_empty() {
            Ok(Search {
                filter,
                before,
                limit,
            })
        } else {
            Err(errors)
        }
    }
}

/// One page of a search, newest first.
#[derive(Debug, Clone)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Pass as `cursor` for the next (older) page; `None` on the last page.
    pub next_cursor: Option<i64>,
}

/// How long a refused export is told to wait: a running export usually ends within seconds.
pub const EXPORT_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// A page of entries matching `search`, for the audit page and `GET /api/v1/audit` (viewer
/// and up).
pub async fn search(
    ctx: &crate::context::Ctx,
    caller: &Caller,
    search: &Search,
) -> Result<Page, OpError> {
    require_reader(caller)?;
    let mut conn = ctx.pool.acquire().await?;
    // One extra row tells whether an older page exists.
    let mut entries = rows::page(
        &mut conn,
        &search.filter.to_rows(),
        search.before,
        search.limit + 1,
    )
    .await?
    .into_iter()
    .map(Entry::from)
    .collect::<Vec<_>>();
    let more = entries.len() > usize::try_from(search.limit).unwrap_or(usize::MAX);
    entries.truncate(usize::try_from(search.limit).unwrap_or(usize::MAX));
    let next_cursor = more.then(|| entries.last().map(|e| e.id)).flatten();
    Ok(Page {
        entries,
        next_cursor,
    })
}

/// The newest `limit` entries about `target` (`kind` or `kind:id`), newest first, for pages
/// that show an object's own trail; the caller has checked who may see the object.
pub async fn about(
    conn: &mut AnyConnection,
    target: &str,
    limit: i64,
) -> Result<Vec<Entry>, OpError> {
    let filter = rows::AuditFilter {
        target: Some(target.to_owned()),
        ..rows::AuditFilter::default()
    };
    let found = rows::page(conn, &filter, None, limit).await?;
    Ok(found.into_iter().map(Entry::from).collect())
}

/// The export as a stream of encoded chunks, fed by [`export()`] on its own task (so the walk
/// runs once, however the caller sends it); dropping the stream stops the walk.
pub fn export_stream(
    ctx: &crate::context::Ctx,
    caller: &Caller,
    filter: Filter,
    format: ExportFormat,
) -> Result<ExportStream, OpError> {
    require_reader(caller)?;
    // An export walks the whole (filtered) log: a few at a time, so that a flood of them from
    // one reader cannot slow every other request.
    let permit = ctx.exports.clone().try_acquire_owned().map_err(|_| {
        OpError::throttled(
            EXPORT_RETRY_AFTER,
            format!(
                "{} audit exports are already running; try again in a moment",
                crate::context::MAX_EXPORTS
            ),
        )
    })?;
    let pool = ctx.pool.clone();
    let filter = filter.to_rows();
    Ok(export::spawn_walk(
        "audit",
        permit,
        move |sink| async move {
            export_rows(&pool, &filter, format, async move |chunk: String| {
                sink.send(chunk).await
            })
            .await
        },
    ))
}

/// Reading the log needs the viewer role (so, a signed-in user).
fn require_reader(caller: &Caller) -> Result<(), OpError> {
    caller
        .require(Role::Viewer)
        .map_err(|_| OpError::Forbidden("reading the audit log needs the viewer role".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, prev: &str) -> AuditRow {
        let mut r = AuditRow {
            id,
            at: 1_000,
            actor: "alice".into(),
            action: "user.created".into(),
            target_kind: "user".into(),
            target_id: "bob".into(),
            details: r#"{"b":1,"a":2}"#.into(),
            prev_hash: prev.into(),
            hash: String::new(),
        };
        r.hash = entry_hash(&r);
        r
    }

    async fn append_one(pool: &sqlx::AnyPool, i: i64) {
        let mut tx = crate::db::begin_write(pool).await.unwrap();
        let entry = NewEntry {
            actor: &Actor::System,
            action: Action::UserCreated,
            target_kind: "user",
            target_id: "bob",
            details: serde_json::json!({ "i": i }),
        };
        append(&mut tx, 1_000 + i, entry).await.unwrap();
        tx.commit().await.unwrap();
    }

    /// A verification racing appends (a busy console) finds the chain whole every time: an
    /// entry committed after the walk's last batch must not read as a cut-off end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn verifying_while_entries_are_appended_finds_the_chain_whole() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("audit.db").display());
        let pool = crate::db::connect(&url).await.unwrap();
        append_one(&pool, 0).await;
        let appender = {
            let pool = pool.clone();
            tokio::spawn(async move {
                for i in 1..=300 {
                    append_one(&pool, i).await;
                }
            })
        };
        let mut conn = pool.acquire().await.unwrap();
        let mut verified = 0;
        while !appender.is_finished() {
            let outcome = verify_connection(&mut conn).await.unwrap();
            assert!(outcome.is_ok(), "after {verified} whole: {outcome:?}");
            verified += 1;
        }
        appender.await.unwrap();
        assert_eq!(
            verify_connection(&mut conn).await.unwrap(),
            Ok(Verified { entries: 301 })
        );
        assert!(
            verified > 10,
            "only {verified} verifications raced the appends"
        );
    }

    #[test]
    fn hash_covers_every_field_and_the_link() {
        let a = row(1, GENESIS);
        let mut b = a.clone();
        b.actor = "mallory".into();
        assert_ne!(entry_hash(&b), a.hash);
        let c = row(1, "ff");
        assert_ne!(c.hash, a.hash);
    }

    #[test]
    fn hash_ignores_json_spacing_and_key_order() {
        let a = row(1, GENESIS);
        let mut b = a.clone();
        b.details = r#"{ "a": 2, "b": 1 }"#.into();
        assert_eq!(entry_hash(&b), a.hash);
    }

    #[test]
    fn search_parses_filters_and_names_each_broken_field() {
        let ok = Search::parse(&SearchInput {
            actor: " alice ",
            action: "user.",
            target: "user:bob",
            from: "2026-12-01T00:00",
            to: "2026-12-02T00:00",
            cursor: "42",
            limit: "10",
        })
        .unwrap();
        assert_eq!(ok.filter.actor.as_deref(), Some("alice"));
        assert_eq!((ok.before, ok.limit), (Some(42), 10));
        assert_eq!(
            Search::parse(&SearchInput::default()).unwrap().limit,
            DEFAULT_PAGE
        );
        let fields = |input: SearchInput<'_>| -> Vec<String> {
            Search::parse(&input)
                .unwrap_err()
                .0
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        let long = "a".repeat(export::MAX_FILTER_CHARS + 1);
        assert_eq!(
            fields(SearchInput {
                actor: &long,
                ..Default::default()
            }),
            ["actor"]
        );
        assert_eq!(
            fields(SearchInput {
                action: "a\u{0}b",
                ..Default::default()
            }),
            ["action"]
        );
        assert_eq!(
            fields(SearchInput {
                from: "yesterday",
                ..Default::default()
            }),
            ["from"]
        );
        assert_eq!(
            fields(SearchInput {
                from: "2026-12-02T00:00",
                to: "2026-12-01T00:00",
                ..Default::default()
            }),
            ["to"]
        );
        for bad in ["0", "-1", "x"] {
            assert_eq!(
                fields(SearchInput {
                    cursor: bad,
                    ..Default::default()
                }),
                ["cursor"]
            );
        }
        for bad in ["0", "501", "ten"] {
            assert_eq!(
                fields(SearchInput {
                    limit: bad,
                    ..Default::default()
                }),
                ["limit"]
            );
        }
        assert_eq!(
            Search::parse(&SearchInput {
                limit: "500",
                ..Default::default()
            })
            .unwrap()
            .limit,
            500
        );
    }
}
