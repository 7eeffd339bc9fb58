//! The `audit_log` table: append and read. Hashing lives in `crate::audit`.

use sqlx::SqliteConnection;

use crate::domain::UnixMillis;

/// One stored audit entry.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: UnixMillis,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target_id: String,
    pub details: String,
    pub prev_hash: String,
    pub hash: String,
}

/// The id the next entry will get and the hash it chains from.
pub async fn head(conn: &mut SqliteConnection) -> sqlx::Result<(i64, Option<String>)> {
    // sqlite_sequence keeps the highest id ever issued even after rows vanish.
    let seq: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'")
            .fetch_optional(&mut *conn)
            .await?;
    let last: Option<String> =
        sqlx::query_scalar("SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;
    Ok((seq.unwrap_or(0) + 1, last))
}

/// The highest id ever issued.
pub async fn highest_issued_id(conn: &mut SqliteConnection) -> sqlx::Result<i64> {
    let seq: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'")
            .fetch_optional(conn)
            .await?;
    Ok(seq.unwrap_or(0))
}

/// Inserts a fully computed entry.
pub async fn insert(conn: &mut SqliteConnection, row: &AuditRow) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO audit_log (id, at, actor, action, target_kind, target_id, details, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .bind(row.id)
    .bind(row.at)
    .bind(&row.actor)
    .bind(&row.action)
    .bind(&row.target_kind)
    .bind(&row.target_id)
    .bind(&row.details)
    .bind(&row.prev_hash)
    .bind(&row.hash)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Entries in id order after `after_id`, at most `limit` (for walking the chain in batches).
pub async fn after(
    conn: &mut SqliteConnection,
    after_id: i64,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    sqlx::query_as("SELECT * FROM audit_log WHERE id > ?1 ORDER BY id LIMIT ?2")
        .bind(after_id)
        .bind(limit)
        .fetch_all(conn)
        .await
}

/// What the audit page and export filter on. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
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

/// Newest-first page of entries matching `filter` with id below `before` (the cursor).
/// Every condition is indexed (actor, action, at) and the cursor walks the primary key, so a
/// page costs the same on the millionth entry as on the first.
pub async fn page(
    conn: &mut SqliteConnection,
    filter: &AuditFilter,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    let (action_exact, action_prefix) = match filter.action.as_deref() {
        Some(a) if a.ends_with('*') => (None, Some(a.trim_end_matches('*').to_owned())),
        Some(a) if a.ends_with('.') => (None, Some(a.to_owned())),
        Some(a) => (Some(a.to_owned()), None),
        None => (None, None),
    };
    let (target_kind, target_id) = match filter.target.as_deref() {
        Some(t) => match t.split_once(':') {
            Some((k, i)) => (Some(k.to_owned()), Some(i.to_owned())),
            None => (Some(t.to_owned()), None),
        },
        None => (None, None),
    };
    // Only the conditions in use go into the SQL: `?n IS NULL OR …` would keep SQLite from
    // using the indexes. The text is assembled from static fragments; every value is bound.
    // A prefix is matched as a range so the action index serves it; U+10FFFF sorts after
    // every character an action can contain.
    let mut sql = String::from("SELECT * FROM audit_log WHERE 1 = 1");
    let mut binds: Vec<Bind> = Vec::new();
    let mut add = |fragment: &str, value: Bind| {
        binds.push(value);
        sql.push_str(&fragment.replace('?', &format!("?{}", binds.len())));
    };
    if let Some(actor) = &filter.actor {
        add(" AND actor = ?", Bind::Text(actor.clone()));
    }
    if let Some(a) = action_exact {
        add(" AND action = ?", Bind::Text(a));
    }
    if let Some(p) = action_prefix {
        add(" AND action >= ?", Bind::Text(p.clone()));
        add(" AND action < ?", Bind::Text(format!("{p}\u{10FFFF}")));
    }
    if let Some(k) = target_kind {
        add(" AND target_kind = ?", Bind::Text(k));
    }
    if let Some(i) = target_id {
        add(" AND target_id = ?", Bind::Text(i));
    }
    if let Some(from) = filter.from {
        add(" AND at >= ?", Bind::Int(from));
    }
    if let Some(to) = filter.to {
        add(" AND at < ?", Bind::Int(to));
    }
    if let Some(before) = before {
        add(" AND id < ?", Bind::Int(before));
    }
    add(" ORDER BY id DESC LIMIT ?", Bind::Int(limit));
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::Text(t) => query.bind(t),
            Bind::Int(i) => query.bind(i),
        };
    }
    query.fetch_all(conn).await
}

enum Bind {
    Text(String),
    Int(i64),
}
