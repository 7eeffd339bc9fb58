//! The tamper-evident audit log: append inside the caller's transaction, verify the chain.
//!
//! `hash = sha256(prev_hash ‖ "\n" ‖ canonical entry)`, where the canonical entry is the JSON
//! array `[id, at, actor, action, target_kind, target_id, details]` with `details` re-encoded
//! with sorted keys. The first entry chains from [`GENESIS`].

use crate::domain::digest::hex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::SqliteConnection;

use crate::db::audit::{self as rows, AuditRow};
use crate::domain::UnixMillis;

/// The `prev_hash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Who did something: a user by name, or the console itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A signed-in user (or their API token).
    User(String),
    /// headroom itself, the CLI, or an anonymous visitor's attempt.
    System,
    /// Someone not signed in (failed logins).
    Anonymous,
}

impl Actor {
    /// The stored name.
    pub fn name(&self) -> &str {
        match self {
            Actor::User(n) => n,
            Actor::System => "system",
            Actor::Anonymous => "anonymous",
        }
    }
}

/// An entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    pub actor: &'a Actor,
    /// Dotted verb, e.g. `user.role_changed`.
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target_id: &'a str,
    /// Already free of secrets.
    pub details: Value,
}

/// Appends an entry. Call inside the write transaction of the change it records.
pub async fn append(
    conn: &mut SqliteConnection,
    at: UnixMillis,
    entry: NewEntry<'_>,
) -> sqlx::Result<i64> {
    let (id, prev) = rows::head(conn).await?;
    let prev_hash = prev.unwrap_or_else(|| GENESIS.to_owned());
    let mut row = AuditRow {
        id,
        at,
        actor: entry.actor.name().to_owned(),
        action: entry.action.to_owned(),
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
pub async fn verify(conn: &mut SqliteConnection) -> anyhow::Result<Result<Verified, ChainBreak>> {
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
    let highest = rows::highest_issued_id(conn).await?;
    if highest > prev_id {
        return Ok(Err(ChainBreak::Truncated {
            last_id: prev_id,
            highest_issued: highest,
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
        }
    }
}

/// Export encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One JSON object per line.
    Jsonl,
    /// RFC 4180 CSV with a header row.
    Csv,
}

/// Entries read per batch while exporting: memory stays flat however long the log is.
const EXPORT_BATCH: i64 = 1000;

/// Walks every entry matching `filter`, oldest first, handing `sink` each batch already
/// encoded (the CSV header first). `sink` answers false to stop early (a client went away).
pub async fn export(
    pool: &sqlx::SqlitePool,
    filter: &rows::AuditFilter,
    format: ExportFormat,
    mut sink: impl AsyncFnMut(String) -> bool,
) -> sqlx::Result<()> {
    if format == ExportFormat::Csv && !sink(CSV_HEADER.to_owned()).await {
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
            .map(|r| match format {
                ExportFormat::Jsonl => to_jsonl(r),
                ExportFormat::Csv => to_csv(r),
            })
            .collect();
        if !sink(chunk).await || (batch.len() as i64) < EXPORT_BATCH {
            return Ok(());
        }
    }
}

/// The CSV header row.
pub const CSV_HEADER: &str = "id,time,actor,action,target_kind,target_id,details,prev_hash,hash\n";

/// One entry as a JSON line (with trailing newline).
pub fn to_jsonl(row: &AuditRow) -> String {
    let mut s = serde_json::to_string(&ExportRecord::from(row)).unwrap_or_default();
    s.push('\n');
    s
}

/// One entry as an RFC 4180 CSV line (with trailing CRLF-free newline). Cells that a
/// spreadsheet would run as a formula are prefixed with `'`.
pub fn to_csv(row: &AuditRow) -> String {
    let cells = [
        row.id.to_string(),
        crate::domain::clock::format_utc(row.at),
        row.actor.clone(),
        row.action.clone(),
        row.target_kind.clone(),
        row.target_id.clone(),
        row.details.clone(),
        row.prev_hash.clone(),
        row.hash.clone(),
    ];
    let mut line = cells
        .iter()
        .map(|c| csv_cell(c))
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}

fn csv_cell(raw: &str) -> String {
    let defused = if raw.starts_with(['=', '+', '-', '@']) && raw.parse::<f64>().is_err() {
        format!("'{raw}")
    } else {
        raw.to_owned()
    };
    if defused.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", defused.replace('"', "\"\""))
    } else {
        defused
    }
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
    fn csv_quotes_and_defuses_formulas() {
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("=cmd()"), "'=cmd()");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("-5"), "-5");
    }
}
