//! Server-side sessions with idle and absolute expiry.

use std::time::Duration;

use sqlx::SqlitePool;

use super::principal::{Principal, Via};
use super::{csrf, secret_token, ACTIVITY_WRITE_EVERY_MS};
use crate::db;
use crate::domain::{Role, UnixMillis};

/// Cookie carrying the session token.
pub const COOKIE: &str = "headroom_session";

/// Expiry rules.
#[derive(Debug, Clone, Copy)]
pub struct Lifetimes {
    pub idle: Duration,
    pub absolute: Duration,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Looks up the session behind a cookie token; expired sessions are deleted and yield `None`.
#[tracing::instrument(skip_all, err)]
pub async fn resolve(
    pool: &SqlitePool,
    token: &str,
    now: UnixMillis,
    life: Lifetimes,
) -> sqlx::Result<Option<Principal>> {
    let hash = secret_token::digest(token);
    let mut conn = pool.acquire().await?;
    let Some(row) = db::sessions::by_token_hash(&mut conn, &hash).await? else {
        return Ok(None);
    };
    let idle_expired = now - row.last_seen_at > ms(life.idle);
    let absolute_expired = now - row.created_at > ms(life.absolute);
    if idle_expired || absolute_expired || row.disabled {
        db::sessions::delete(&mut conn, row.id).await?;
        return Ok(None);
    }
    if now - row.last_seen_at > ACTIVITY_WRITE_EVERY_MS {
        db::sessions::touch(&mut conn, row.id, now).await?;
    }
    Ok(Some(Principal {
        user_id: row.user_id,
        username: row.username,
        role: row.role.parse().unwrap_or(Role::Viewer),
        via: Via::Session {
            session_id: row.id,
            csrf_token: csrf::for_session(token),
            has_flash: row.has_flash,
        },
    }))
}

/// Removes every expired session (run periodically; lookups also expire lazily).
pub async fn purge_expired(
    pool: &SqlitePool,
    now: UnixMillis,
    life: Lifetimes,
) -> sqlx::Result<u64> {
    let mut conn = pool.acquire().await?;
    db::sessions::delete_expired(&mut conn, now - ms(life.idle), now - ms(life.absolute)).await
}
