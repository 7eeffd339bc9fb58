//! The `audit_log` table: append and read. Hashing lives in `crate::audit`.

use sqlx::AnyConnection;

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
pub async fn head(conn: &mut AnyConnection) -> sqlx::Result<(i64, Option<String>)> {
    let seq = highest_issued_id(&mut *conn).await?;
    let last: Option<String> =
        sqlx::query_scalar("SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;
    Ok((seq + 1, last))
}

/// The highest id ever issued, even after rows vanished: SQLite keeps it in
/// `sqlite_sequence`, PostgreSQL in `audit_head` (a trigger on every insert, migration 0023).
pub async fn highest_issued_id(conn: &mut AnyConnection) -> sqlx::Result<i64> {
    let sql = super::Dialect::of(conn).pick(
        "SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'",
        "SELECT seq FROM audit_head",
    );
    let seq: Option<i64> = sqlx::query_scalar(sql).fetch_optional(conn).await?;
    Ok(seq.unwrap_or(0))
}

/// Inserts a fully computed entry.
pub async fn insert(conn: &mut AnyConnection, row: &AuditRow) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO audit_log (id, at, actor, action, target_kind, target_id, details, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
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

/// Newest-first page of entries matching `filter` after `before` (the cursor: the last id a
/// page gave out). Every condition is indexed by `(…, at, id)` (actor, action, target kind
/// and id, time) and the page walks its index from the cursor, so a page costs the same on
/// the millionth entry as on the first, with or without a time window
/// (`benches/history.rs`). With no filter at all the page walks ids (the chain's order);
/// with any filter it is in time order, ties by id — the same order for entries appended as
/// things happen.
pub async fn page(
    conn: &mut AnyConnection,
    filter: &AuditFilter,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    select(conn, filter, before.map(Cursor::Before), limit).await
}

/// Oldest-first batch of entries matching `filter` after `after` (exports), in the order of
/// [`page`] reversed.
pub async fn batch_after(
    conn: &mut AnyConnection,
    filter: &AuditFilter,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    select(conn, filter, Some(Cursor::After(after)), limit).await
}

/// Runs a filtered page. An action prefix (`user.`) is expanded into the actions that exist
/// with it — one index seek each, and there are few — and each is paged through the
/// `(action, at, id)` index, then merged in time order. The cost is (distinct actions ×
/// page), however long the log: neither a sort of every match nor a walk past non-matching
/// history.
async fn select(
    conn: &mut AnyConnection,
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
        Some(Cursor::After(_)) => merged.sort_by_key(|r| (r.at, r.id)),
        _ => merged.sort_by_key(|r| std::cmp::Reverse((r.at, r.id))),
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
async fn actions_with_prefix(conn: &mut AnyConnection, prefix: &str) -> sqlx::Result<Vec<String>> {
    // U+10FFFF sorts after every character an action can contain.
    let end = format!("{prefix}\u{10FFFF}");
    let mut found: Vec<String> = Vec::new();
    loop {
        let next: Option<String> = match found.last() {
            None => sqlx::query_scalar("SELECT action FROM audit_log WHERE action >= $1 AND action < $2 ORDER BY action LIMIT 1").bind(prefix).bind(&end),
            Some(last) => sqlx::query_scalar("SELECT action FROM audit_log WHERE action > $1 AND action < $2 ORDER BY action LIMIT 1").bind(last.clone()).bind(&end),
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
    conn: &mut AnyConnection,
    filter: &AuditFilter,
    cursor: Option<Cursor>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    let tie = cursor_time(conn, filter, cursor).await?;
    let (sql, binds) = filtered_sql(filter, cursor, tie, limit);
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::Text(t) => query.bind(t),
            Bind::Int(i) => query.bind(i),
        };
    }
    query.fetch_all(conn).await
}

/// SQLite's `EXPLAIN QUERY PLAN` of a page for `filter` (an exact action), one line per step.
pub async fn explain_page(
    conn: &mut AnyConnection,
    filter: &AuditFilter,
    before: Option<i64>,
) -> sqlx::Result<Vec<String>> {
    let cursor = before.map(Cursor::Before);
    let tie = cursor_time(conn, filter, cursor).await?;
    let (sql, binds) = filtered_sql(filter, cursor, tie, 50);
    let sql = format!("EXPLAIN QUERY PLAN {sql}");
    let mut query = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::Text(t) => query.bind(t),
            Bind::Int(i) => query.bind(i),
        };
    }
    Ok(query
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(|r| r.3)
        .collect())
}

/// The target filter as (kind, id).
fn target_parts(filter: &AuditFilter) -> (Option<String>, Option<String>) {
    match filter.target.as_deref() {
        Some(t) => match t.split_once(':') {
            Some((k, i)) => (Some(k.to_owned()), Some(i.to_owned())),
            None => (Some(t.to_owned()), None),
        },
        None => (None, None),
    }
}

/// Whether a page for `filter` is in time order: any filter is answered from its
/// `(…, at, id)` index in time order (the same as id order for a log appended as things
/// happen), a time bound alone from `audit_log_at`. With a window the walk is then a range
/// seek, where walking ids would first pass over every entry outside it (all history after
/// `to`, or before `from` for an export). No filter at all walks the primary key, the
/// chain's order.
fn in_time_order(filter: &AuditFilter) -> bool {
    filter.from.is_some()
        || filter.to.is_some()
        || filter.actor.is_some()
        || filter.action.is_some()
        || filter.target.is_some()
}

/// The cursor entry's time when the page is in time order (`None` when it does not exist).
async fn cursor_time(
    conn: &mut AnyConnection,
    filter: &AuditFilter,
    cursor: Option<Cursor>,
) -> sqlx::Result<Option<UnixMillis>> {
    match cursor {
        Some(Cursor::Before(id) | Cursor::After(id)) if in_time_order(filter) => {
            sqlx::query_scalar("SELECT at FROM audit_log WHERE id = $1")
                .bind(id)
                .fetch_optional(conn)
                .await
        }
        _ => Ok(None),
    }
}

/// The page's SQL and its values; `tie` is the cursor's time for a page in time order.
fn filtered_sql(
    filter: &AuditFilter,
    cursor: Option<Cursor>,
    tie: Option<UnixMillis>,
    limit: i64,
) -> (String, Vec<Bind>) {
    let (target_kind, target_id) = target_parts(filter);
    let (mut from, mut to) = (filter.from, filter.to);
    if let (Some(c), Some(at)) = (cursor, tie) {
        // Seek to the cursor's own time, so a deep page starts there instead of walking down
        // from the bound; `tie` orders entries of that same time by id.
        match c {
            Cursor::Before(_) => to = Some(to.map_or(at + 1, |t| t.min(at + 1))),
            Cursor::After(_) => from = Some(from.map_or(at, |f| f.max(at))),
        }
    }
    // Only the conditions in use go into the SQL: `$n IS NULL OR …` would keep SQLite from
    // using the indexes. The text is assembled from static fragments; every value is bound.
    let mut sql = String::from("SELECT * FROM audit_log WHERE 1 = 1");
    let mut binds: Vec<Bind> = Vec::new();
    let mut add = |fragment: &str, value: Bind| {
        binds.push(value);
        sql.push_str(&fragment.replace('?', &format!("${}", binds.len())));
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
    let order = if in_time_order(filter) {
        format!(" ORDER BY at {order}, id {order} LIMIT ?")
    } else {
        format!(" ORDER BY id {order} LIMIT ?")
    };
    add(&order, Bind::Int(limit));
    (sql, binds)
}

enum Bind {
    Text(String),
    Int(i64),
}
