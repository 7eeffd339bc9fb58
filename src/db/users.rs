//! The `users` table.

use sqlx::AnyConnection;

use crate::domain::{Role, UnixMillis, Username};

/// A stored user, without the password hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub disabled: bool,
    pub created_at: UnixMillis,
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    role: String,
    #[sqlx(try_from = "super::flag::Flag")]
    disabled: bool,
    created_at: i64,
}

impl From<UserRow> for User {
    fn from(r: UserRow) -> Self {
        Self {
            id: r.id,
            username: r.username,
            // The CHECK constraint keeps the column to the four names.
            role: r.role.parse().unwrap_or(Role::Viewer),
            disabled: r.disabled,
            created_at: r.created_at,
        }
    }
}

const COLUMNS: &str = "id, username, role, disabled, created_at";

/// Inserts a user; `Ok(None)` when the name is taken.
pub async fn insert(
    conn: &mut AnyConnection,
    username: &Username,
    role: Role,
    password_hash: &str,
    now: UnixMillis,
) -> sqlx::Result<Option<User>> {
    let row: Option<UserRow> = sqlx::query_as(
        "INSERT INTO users (username, role, password_hash, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $4)
         ON CONFLICT (username) DO NOTHING
         RETURNING id, username, role, disabled, created_at",
    )
    .bind(username.as_str())
    .bind(role.as_str())
    .bind(password_hash)
    .bind(now)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(User::from))
}

/// Looks a user up by name.
pub async fn by_name(conn: &mut AnyConnection, username: &str) -> sqlx::Result<Option<User>> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE username = $1");
    let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(username)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(User::from))
}

/// Looks a user up by id.
pub async fn by_id(conn: &mut AnyConnection, id: i64) -> sqlx::Result<Option<User>> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1");
    let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(User::from))
}

/// The user and their password hash, for login.
pub async fn credentials(
    conn: &mut AnyConnection,
    username: &str,
) -> sqlx::Result<Option<(User, String)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        user: UserRow,
        password_hash: String,
    }
    let sql = format!("SELECT {COLUMNS}, password_hash FROM users WHERE username = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(username)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|r| (User::from(r.user), r.password_hash)))
}

/// Every user, by name.
pub async fn list(conn: &mut AnyConnection) -> sqlx::Result<Vec<User>> {
    let sql = format!("SELECT {COLUMNS} FROM users ORDER BY username");
    let rows: Vec<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(User::from).collect())
}

/// How many enabled admins there are.
pub async fn count_active_admins(conn: &mut AnyConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE role = 'admin' AND NOT disabled")
        .fetch_one(conn)
        .await
}

/// Sets a user's role.
pub async fn set_role(
    conn: &mut AnyConnection,
    id: i64,
    role: Role,
    now: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE users SET role = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(role.as_str())
        .bind(now)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Enables or disables a user.
pub async fn set_disabled(
    conn: &mut AnyConnection,
    id: i64,
    disabled: bool,
    now: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE users SET disabled = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(disabled)
        .bind(now)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Replaces a user's password hash.
pub async fn set_password_hash(
    conn: &mut AnyConnection,
    id: i64,
    hash: &str,
    now: UnixMillis,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(hash)
        .bind(now)
        .execute(conn)
        .await
        .map(|_| ())
}
