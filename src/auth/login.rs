//! Password login: throttling (the attempt counted before the check), verification behind
//! the hashing bound, session creation and audit, in that order.

use std::time::Duration;

use serde_json::json;

use super::secret_token;
use super::throttle::{self, Admission};
use crate::audit::{self, Action, Actor, NewEntry};
use crate::context::Ctx;
use crate::db;
use crate::domain::{FieldErrors, NewPassword, Username};
use crate::password_hashing::PasswordError;

/// Why a login did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Empty or oversized fields: safe to say which.
    #[error("{0}")]
    Invalid(FieldErrors),
    /// Wrong name or password, or a disabled account: one generic answer for all.
    #[error("wrong username or password")]
    Rejected,
    /// Too many recent failures for this account or address.
    #[error("too many failed attempts; try again in {} s", .0.as_secs().max(1))]
    Throttled(Duration),
    /// Too many password checks are running; nothing was counted against anyone.
    #[error("headroom is busy checking other passwords; try again in {} s", .0.as_secs().max(1))]
    Busy(Duration),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for LoginError {
    fn from(e: sqlx::Error) -> Self {
        LoginError::Internal(e.into())
    }
}

/// A successful login.
#[derive(Debug)]
pub struct LoggedIn {
    pub username: String,
    /// The raw session token for the cookie; only its digest is stored.
    pub session_token: String,
}

/// Checks the credentials and opens a session. `client_addr` is the peer address.
#[tracing::instrument(skip_all, fields(client.addr = %client_addr), err(level = "info"))]
pub async fn login(
    ctx: &Ctx,
    username: &str,
    pass: &str,
    client_addr: &str,
) -> Result<LoggedIn, LoginError> {
    // Syntax checks first: a name that could never exist or a password that breaks the policy
    // is a field error (naming the field), not a failed attempt against an account.
    let mut errors = FieldErrors::default();
    errors.check(Username::parse(username));
    if pass.is_empty() {
        errors.push("password", "is required");
    } else if pass.chars().count() > NewPassword::MAX_LEN {
        errors.push(
            "password",
            format!("must be at most {} characters", NewPassword::MAX_LEN),
        );
    } else if pass.chars().any(char::is_control) {
        errors.push("password", "must not contain control characters");
    }
    if !errors.is_empty() {
        return Err(LoginError::Invalid(errors));
    }
    let username = username.trim();
    let cfg = ctx.settings.throttle;
    let now = ctx.clock.now();
    let account = throttle::Limit::account(username, &cfg);
    let address = throttle::Limit::address(client_addr, &cfg);
    let limits = [account.clone(), address.clone()];

    // Counted before argon2 runs, so parallel guesses cannot all pass the lock check.
    if let Admission::Locked(wait) = throttle::admit(&ctx.pool, &limits, &cfg, now).await? {
        return Err(LoginError::Throttled(wait));
    }
    let credentials = {
        let mut conn = ctx.pool.acquire().await?;
        db::users::credentials(&mut conn, username).await?
    };
    let (user, hash) = match credentials {
        Some((u, h)) => (Some(u), Some(h)),
        None => (None, None),
    };
    let password_ok = match ctx.hashing.verify(pass.to_owned(), hash).await {
        Ok(ok) => ok,
        Err(PasswordError::Busy(busy)) => {
            // The password was never checked, so this was no guess: give the attempt back.
            let mut tx = db::begin_write(&ctx.pool).await?;
            for limit in &limits {
                throttle::take_back(&mut tx, limit).await?;
            }
            tx.commit().await?;
            return Err(LoginError::Busy(busy.retry_after));
        }
        Err(PasswordError::Internal(e)) => return Err(e.into()),
    };
    let enabled = user.as_ref().is_some_and(|u| !u.disabled);

    let mut tx = db::begin_write(&ctx.pool).await?;
    let result = match user {
        Some(user) if password_ok && enabled => {
            throttle::clear(&mut tx, &account.key).await?;
            // A legitimate user must not lock their own address by signing in often.
            throttle::take_back(&mut tx, &address).await?;
            let token = secret_token::generate("hs_");
            let session_id =
                db::sessions::insert(&mut tx, &secret_token::digest(&token), user.id, now).await?;
            audit::append(
                &mut tx,
                now,
                NewEntry {
                    actor: &Actor::User(user.username.clone()),
                    action: Action::AuthLoginSucceeded,
                    target_kind: "session",
                    target_id: &session_id.to_string(),
                    details: json!({ "client_addr": client_addr }),
                },
            )
            .await?;
            Ok(LoggedIn {
                username: user.username,
                session_token: token,
            })
        }
        user => {
            // The attempt was counted before the check and stays counted.
            let reason = match &user {
                None => "unknown user",
                Some(u) if u.disabled => "account disabled",
                Some(_) => "wrong password",
            };
            // The attempted name is attacker-controlled: keep it short and printable.
            let attempted: String = username
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect();
            audit::append(
                &mut tx,
                now,
                NewEntry {
                    actor: &Actor::Anonymous,
                    action: Action::AuthLoginFailed,
                    target_kind: "user",
                    target_id: &attempted,
                    details: json!({ "client_addr": client_addr, "reason": reason }),
                },
            )
            .await?;
            Err(LoginError::Rejected)
        }
    };
    tx.commit().await?;
    result
}

/// Ends a session, recording who logged out.
pub async fn logout(ctx: &Ctx, session_id: i64, username: &str) -> anyhow::Result<()> {
    let now = ctx.clock.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    db::sessions::delete(&mut tx, session_id).await?;
    audit::append(
        &mut tx,
        now,
        NewEntry {
            actor: &Actor::User(username.to_owned()),
            action: Action::AuthLogout,
            target_kind: "session",
            target_id: &session_id.to_string(),
            details: json!({}),
        },
    )
    .await?;
    tx.commit().await?;
    // After the commit: the session's row may still be cached.
    ctx.auth_epoch.bump();
    Ok(())
}
