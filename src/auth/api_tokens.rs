//! Resolving `Authorization: Bearer` tokens (creation and revocation are in `accounts`).

use sqlx::AnyPool;

use super::principal::{Principal, Via};
use super::{secret_token, ACTIVITY_WRITE_EVERY_MS};
use crate::db;
use crate::domain::{Role, UnixMillis};

/// The user an unrevoked token of an enabled user acts as; records its use.
#[tracing::instrument(skip_all, err)]
pub async fn resolve(
    pool: &AnyPool,
    token: &str,
    now: UnixMillis,
) -> sqlx::Result<Option<Principal>> {
    let mut conn = pool.acquire().await?;
    let Some(owner) = db::tokens::live_owner(&mut conn, &secret_token::digest(token)).await? else {
        return Ok(None);
    };
    if owner
        .last_used_at
        .is_none_or(|t| now - t > ACTIVITY_WRITE_EVERY_MS)
    {
        db::tokens::touch(&mut conn, owner.token_id, now).await?;
    }
    Ok(Some(Principal {
        user_id: owner.user_id,
        username: owner.username,
        role: owner.role.parse().unwrap_or(Role::Viewer),
        via: Via::Token {
            token_id: owner.token_id,
        },
    }))
}
