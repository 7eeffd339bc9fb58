//! The two SQL dialects: which one a connection speaks, and SQLite statements made
//! PostgreSQL's where the difference is only a planner pin.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use sqlx::{AnyConnection, AnyPool};

/// Which SQL a connection speaks, for the few statements the stores spell differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The dialect of an open connection (or transaction).
    pub fn of(conn: &AnyConnection) -> Dialect {
        if conn.backend_name() == <sqlx::Postgres as sqlx::Database>::NAME {
            Dialect::Postgres
        } else {
            Dialect::Sqlite
        }
    }

    /// Statement `sqlite`, or its PostgreSQL twin `postgres`, as this dialect speaks.
    pub fn pick<'a>(self, sqlite: &'a str, postgres: &'a str) -> &'a str {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }

    /// The dialect of a pool's connections.
    pub fn of_pool(pool: &AnyPool) -> Dialect {
        match pool.connect_options().database_url.scheme() {
            "postgres" | "postgresql" => Dialect::Postgres,
            _ => Dialect::Sqlite,
        }
    }
}

/// Statement `sql`, written for SQLite, as the connection's store takes it: unchanged on
/// SQLite; on PostgreSQL without the planner pins SQLite needs ([`without_index_hints`]),
/// translated once per statement and kept for the life of the process (statements are the
/// program's own constants, so the cache is bounded by them).
pub fn portable(conn: &AnyConnection, sql: &'static str) -> &'static str {
    if Dialect::of(conn) == Dialect::Sqlite {
        return sql;
    }
    static TRANSLATED: LazyLock<Mutex<HashMap<(usize, usize), &'static str>>> =
        LazyLock::new(Mutex::default);
    let key = (sql.as_ptr() as usize, sql.len());
    let mut cache = TRANSLATED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(key)
        .or_insert_with(|| Box::leak(without_index_hints(sql).into_boxed_str()))
}

/// `sql` as PostgreSQL takes it: SQLite's `INDEXED BY name` hints removed, and its
/// `CROSS JOIN … ON` (which pins the join order) a plain `JOIN … ON`. PostgreSQL has no hints
/// and plans on its own.
pub fn without_index_hints(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find(" INDEXED BY ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " INDEXED BY ".len()..];
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        rest = &after[name_end..];
    }
    out.push_str(rest);
    out.replace(" CROSS JOIN ", " JOIN ")
}

#[cfg(test)]
mod tests {
    use super::without_index_hints;

    #[test]
    fn index_hints_are_removed_and_nothing_else() {
        assert_eq!(
            without_index_hints("SELECT id FROM t INDEXED BY t_at WHERE at < $1"),
            "SELECT id FROM t WHERE at < $1"
        );
        assert_eq!(
            without_index_hints("FROM a INDEXED BY a_x\n JOIN b INDEXED BY b_y"),
            "FROM a\n JOIN b"
        );
        assert_eq!(without_index_hints("SELECT 1"), "SELECT 1");
        assert_eq!(
            without_index_hints("FROM s INDEXED BY s_open\n     CROSS JOIN d ON d.id = s.d"),
            "FROM s\n     JOIN d ON d.id = s.d"
        );
    }
}
