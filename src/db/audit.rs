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
/// Every condition is indexed (actor, action, target, at) and the page walks its index from
/// the cursor, so a page costs the same on the millionth entry as on the first
/// (`benches/history.rs`). With only a time bound the page is in time order, which is id
/// order for entries appended as they happen.
pub async fn page(
    conn: &mut SqliteConnection,
    filter: &AuditFilter,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    select(conn, filter, before.map(Cursor::Before), limit).await
}

/// Oldest-first batch of entries matching `filter` with id above `after` (exports).
pub async fn batch_after(
    conn: &mut SqliteConnection,
    filter: &AuditFilter,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    select(conn, filter, Some(Cursor::After(after)), limit).await
}

/// Runs a filtered page. An action prefix (`user.`) is expanded into the actions that exist
/// with it — one index seek each, and there are few — and each is paged through the
/// `(action, id)` index, then merged by id. The cost is (distinct actions × page), however
/// long the log: neither a sort of every match nor a walk past non-matching history.
async fn select(
    conn: &mut SqliteConnection,
    filter: &AuditFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    let Some(prefix) = filter.action.as_deref().and_then(action_prefix) else {
        return filtered(conn, filter, cursor, limit).await;
    };
    if prefix.is_empty() {
        // `*` matches every action: a plain walk, not one query per action merged.
        let every = AuditFilter {
            action: None,
            ..filter.clone()
        };
        return filtered(conn, &every, cursor, limit).await;
    }
    let mut merged = Vec::new();
    for action in actions_with_prefix(conn, prefix).await? {
        let exact = AuditFilter {
            action: Some(action),
            ..filter.clone()
        };
        merged.extend(filtered(conn, &exact, cursor, limit).await?);
    }
    match cursor {
        Some(Cursor::After(_)) => merged.sort_by_key(|r| r.id),
        _ => merged.sort_by_key(|r| std::cmp::Reverse(r.id)),
    }
    merged.truncate(usize::try_from(limit).unwrap_or(0));
    Ok(merged)
}

/// The prefix of a prefix filter (`user.` or `user*`), or `None` for an exact action.
fn action_prefix(action: &str) -> Option<&str> {
    if let Some(p) = action.strip_suffix('*') {
        Some(p)
    } else if action.ends_with('.') {
        Some(action)
    } else {
        None
    }
}

/// Distinct actions starting with `prefix`, found by seeking the action index once per action.
async fn actions_with_prefix(
    conn: &mut SqliteConnection,
    prefix: &str,
) -> sqlx::Result<Vec<String>> {
    // U+10FFFF sorts after every character an action can contain.
    let end = format!("{prefix}\u{10FFFF}");
    let mut found: Vec<String> = Vec::new();
    loop {
        let next: Option<String> = match found.last() {
            None => sqlx::query_scalar("SELECT action FROM audit_log WHERE action >= ?1 AND action < ?2 ORDER BY action LIMIT 1").bind(prefix).bind(&end),
            Some(last) => sqlx::query_scalar("SELECT action FROM audit_log WHERE action > ?1 AND action < ?2 ORDER BY action LIMIT 1").bind(last.clone()).bind(&end),
        }
        .fetch_optional(&mut *conn)
        .await?;
        match next {
            Some(a) if found.len() < 1000 => found.push(a),
            _ => return Ok(found),
        }
    }
}

/// Where a page starts; the direction follows from it.
#[derive(Debug, Clone, Copy)]
enum Cursor {
    Before(i64),
    After(i64),
}

async fn filtered(
    conn: &mut SqliteConnection,
    filter: &AuditFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    let (target_kind, target_id) = match filter.target.as_deref() {
        Some(t) => match t.split_once(':') {
            Some((k, i)) => (Some(k.to_owned()), Some(i.to_owned())),
            None => (Some(t.to_owned()), None),
        },
        None => (None, None),
    };
    // A time bound alone is answered from `audit_log_at` in time order (the same as id order
    // for a log appended as things happen): walking ids instead would pass over every entry
    // outside the bound first (all history after `to`, or before `from` for an export). With
    // another filter, that filter's `(…, id)` index walks ids and checks the time.
    let by_time = (filter.from.is_some() || filter.to.is_some())
        && filter.actor.is_none()
        && filter.action.is_none()
        && target_kind.is_none();
    let (mut from, mut to) = (filter.from, filter.to);
    let mut tie = None;
    if let (true, Some(c)) = (by_time, cursor) {
        // Seek to the cursor's own time (one primary-key read), so a deep page starts there
        // instead of walking down from the bound; `tie` orders entries of that same time.
        let (Cursor::Before(id) | Cursor::After(id)) = c;
        let at: Option<UnixMillis> = sqlx::query_scalar("SELECT at FROM audit_log WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(at) = at {
            match c {
                Cursor::Before(_) => to = Some(to.map_or(at + 1, |t| t.min(at + 1))),
                Cursor::After(_) => from = Some(from.map_or(at, |f| f.max(at))),
            }
            tie = Some(at);
        }
    }
    // Only the conditions in use go into the SQL: `?n IS NULL OR …` would keep SQLite from
    // using the indexes. The text is assembled from static fragments; every value is bound.
    let mut sql = String::from("SELECT * FROM audit_log WHERE 1 = 1");
    let mut binds: Vec<Bind> = Vec::new();
    let mut add = |fragment: &str, value: Bind| {
        binds.push(value);
        sql.push_str(&fragment.replace('?', &format!("?{}", binds.len())));
    };
    if let Some(actor) = &filter.actor {
        add(" AND actor = ?", Bind::Text(actor.clone()));
    }
    if let Some(a) = &filter.action {
        add(" AND action = ?", Bind::Text(a.clone()));
    }
    if let Some(k) = target_kind {
        add(" AND target_kind = ?", Bind::Text(k));
    }
    if let Some(i) = target_id {
        add(" AND target_id = ?", Bind::Text(i));
    }
    if let Some(from) = from {
        add(" AND at >= ?", Bind::Int(from));
    }
    if let Some(to) = to {
        add(" AND at < ?", Bind::Int(to));
    }
    match (cursor, tie) {
        (Some(Cursor::Before(id)), Some(at)) => {
            add(" AND (at < ?", Bind::Int(at));
            add(" OR id < ?)", Bind::Int(id));
        }
        (Some(Cursor::After(id)), Some(at)) => {
            add(" AND (at > ?", Bind::Int(at));
            add(" OR id > ?)", Bind::Int(id));
        }
        (Some(Cursor::Before(id)), None) => add(" AND id < ?", Bind::Int(id)),
        (Some(Cursor::After(id)), None) => add(" AND id > ?", Bind::Int(id)),
        (None, _) => {}
    }
    let order = if matches!(cursor, Some(Cursor::After(_))) {
        "ASC"
    } else {
        "DESC"
    };
    let order = if by_time {
        format!(" ORDER BY at {order}, id {order} LIMIT ?")
    } else {
        format!(" ORDER BY id {order} LIMIT ?")
    };
    add(&order, Bind::Int(limit));
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
