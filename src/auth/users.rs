//! Users: accounts, roles and passwords. Every operation checks the caller's role here (not
//! only in the page or route), validates its input, and writes its audit entry in the same
//! transaction as the change. API tokens live in `tokens`.

use serde_json::json;
use sqlx::AnyConnection;

use super::principal::{Caller, Forbidden};
use super::throttle::{self, Admission, Limit};
use crate::audit::{self, Action};
use crate::context::Ctx;
use crate::db;
use crate::domain::{
    parse_stored, FieldError, FieldErrors, NewPassword, Role, UnixMillis, Username,
};
use crate::error::OpError;
use crate::password_hashing::PasswordError;

/// A user as the account pages and the API see them (never the password hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub username: Username,
    pub role: Role,
    pub disabled: bool,
    pub created_at: UnixMillis,
}

impl TryFrom<db::users::User> for User {
    type Error = OpError;
    fn try_from(u: db::users::User) -> Result<Self, OpError> {
        Ok(User {
            id: u.id,
            username: parse_stored("users.username", &u.username, Username::parse_field)?,
            role: u.role,
            disabled: u.disabled,
            created_at: u.created_at,
        })
    }
}

/// The password-hashing bound's refusal as a 503: headroom, not the caller, is short.
impl From<PasswordError> for OpError {
    fn from(e: PasswordError) -> Self {
        match e {
            PasswordError::Busy(b) => OpError::busy(
                b.retry_after,
                format!(
                    "headroom is busy checking other passwords; try again in {} s",
                    b.retry_after.as_secs().max(1)
                ),
            ),
            PasswordError::Internal(e) => OpError::Internal(e),
        }
    }
}

/// A user to create, as submitted.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct NewUserInput {
    pub username: String,
    pub role: String,
    pub password: String,
}

pub(super) async fn find_user(
    conn: &mut AnyConnection,
    field: &str,
    raw: &str,
) -> Result<User, OpError> {
    let name = Username::parse_field(field, raw)?;
    stored_user(conn, name.as_str()).await
}

/// The user stored as `name`, or not found.
async fn stored_user(conn: &mut AnyConnection, name: &str) -> Result<User, OpError> {
    db::users::by_name(conn, name)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("user {name}")))?
        .try_into()
}

/// Creates a user (admin only).
pub async fn create_user(
    ctx: &Ctx,
    caller: &Caller,
    input: &NewUserInput,
) -> Result<User, OpError> {
    let (pool, now) = (&ctx.pool, ctx.now());
    caller.require(Role::Admin)?;
    let mut errors = FieldErrors::default();
    let username = errors.check(Username::parse(&input.username));
    let role = errors.check(Role::parse_field("role", &input.role));
    let pass = errors.check(NewPassword::parse_field("password", &input.password));
    let (Some(username), Some(role), Some(pass)) = (username, role, pass) else {
        return Err(OpError::Invalid(errors));
    };
    let hash = ctx.hashing.hash(pass.expose().to_owned()).await?;
    let mut tx = db::begin_write(pool).await?;
    let Some(user) = db::users::insert(&mut tx, &username, role, &hash, now).await? else {
        return Err(FieldError::new("username", "is already taken").into());
    };
    audit::record(
        &mut tx,
        caller,
        now,
        Action::UserCreated,
        "user",
        user.username.as_str(),
        json!({ "role": role }),
    )
    .await?;
    tx.commit().await?;
    user.try_into()
}

/// Refuses a change that would leave no enabled admin.
async fn keep_an_admin(
    conn: &mut AnyConnection,
    target: &User,
    field: &str,
    what: &str,
) -> Result<(), OpError> {
    if target.role == Role::Admin
        && !target.disabled
        && db::users::count_active_admins(conn).await? <= 1
    {
        return Err(FieldError::new(
            field,
            format!(
                "{} is the last active admin and cannot be {what}",
                target.username
            ),
        )
        .into());
    }
    Ok(())
}

/// Changes a user's role (admin only); the last active admin cannot be demoted.
pub async fn set_role(
    ctx: &Ctx,
    caller: &Caller,
    username: &str,
    role: &str,
) -> Result<User, OpError> {
    let change = UserChange {
        role: Some(role.to_owned()),
        ..UserChange::default()
    };
    update(ctx, caller, username, &change).await
}

/// Disables or re-enables a user (admin only). Disabling ends their sessions; their tokens stop
/// working while disabled. The last active admin cannot be disabled.
pub async fn set_disabled(
    ctx: &Ctx,
    caller: &Caller,
    username: &str,
    disabled: bool,
) -> Result<User, OpError> {
    let change = UserChange {
        disabled: Some(disabled),
        ..UserChange::default()
    };
    update(ctx, caller, username, &change).await
}

/// A change to a user's role and/or state; `None` leaves that part as it is.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    /// The new role, as submitted.
    pub role: Option<String>,
    /// Disable (true) or re-enable (false).
    pub disabled: Option<bool>,
}

/// Applies a role and/or state change (admin only) in one transaction, each part audited: a
/// refused part (the last active admin) leaves nothing changed.
pub async fn update(
    ctx: &Ctx,
    caller: &Caller,
    username: &str,
    change: &UserChange,
) -> Result<User, OpError> {
    caller.require(Role::Admin)?;
    let role = change
        .role
        .as_deref()
        .map(|r| Role::parse_field("role", r))
        .transpose()?;
    if role.is_none() && change.disabled.is_none() {
        return Err(FieldError::new("body", "must set role, disabled or both").into());
    }
    let now = ctx.now();
    let mut tx = db::begin_write(&ctx.pool).await?;
    let mut user = find_user(&mut tx, "username", username).await?;
    if let Some(role) = role.filter(|r| *r != user.role) {
        if role != Role::Admin {
            keep_an_admin(&mut tx, &user, "role", "demoted").await?;
        }
        db::users::set_role(&mut tx, user.id, role, now).await?;
        audit::record(
            &mut tx,
            caller,
            now,
            Action::UserRoleChanged,
            "user",
            user.username.as_str(),
            json!({ "from": user.role, "to": role }),
        )
        .await?;
        user.role = role;
    }
    if let Some(disabled) = change.disabled.filter(|d| *d != user.disabled) {
        if disabled {
            keep_an_admin(&mut tx, &user, "username", "disabled").await?;
            db::sessions::delete_for_user(&mut tx, user.id, None).await?;
        }
        db::users::set_disabled(&mut tx, user.id, disabled, now).await?;
        let action = if disabled {
            Action::UserDisabled
        } else {
            Action::UserEnabled
        };
        audit::record(
            &mut tx,
            caller,
            now,
            action,
            "user",
            user.username.as_str(),
            json!({}),
        )
        .await?;
        user.disabled = disabled;
    }
    tx.commit().await?;
    // After the commit: cached session rows still carry the old role or state.
    ctx.auth_epoch.bump();
    Ok(user)
}

/// A password change, as submitted.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct PasswordChange {
    pub current_password: String,
    pub new_password: String,
    pub confirm_password: String,
}

/// Where a password change comes from: which session stays signed in and the client address
/// for the audit log.
#[derive(Debug, Clone, Copy)]
pub struct ChangeOrigin<'a> {
    /// The session making the change (kept); `None` ends every session.
    pub keep_session: Option<i64>,
    /// The client address, as the throttle and audit log see it.
    pub client_addr: &'a str,
}

/// Changes the caller's own password after checking the current one; ends their other sessions.
/// Current-password attempts go through the throttle (counted before the check, per account)
/// and every failed one is audited as `auth.password_change_failed`.
pub async fn change_own_password(
    ctx: &Ctx,
    caller: &Caller,
    origin: ChangeOrigin<'_>,
    input: &PasswordChange,
) -> Result<(), OpError> {
    let (pool, now) = (&ctx.pool, ctx.now());
    caller.require(Role::Viewer)?;
    let user_id = caller.user_id.ok_or(Forbidden {
        rule: None,
        required: Role::Viewer,
    })?;
    let mut errors = FieldErrors::default();
    let new = errors.check(NewPassword::parse_field(
        "new_password",
        &input.new_password,
    ));
    if input.new_password != input.confirm_password {
        errors.push("confirm_password", "does not match the new password");
    }
    if input.current_password.is_empty() {
        errors.push("current_password", "is required");
    }
    let (Some(new), true) = (new, errors.is_empty()) else {
        return Err(OpError::Invalid(errors));
    };
    let mut conn = pool.acquire().await?;
    let user = db::users::by_id(&mut conn, user_id)
        .await?
        .ok_or_else(|| OpError::NotFound("user".into()))?;
    let (_, stored) = db::users::credentials(&mut conn, &user.username)
        .await?
        .ok_or_else(|| OpError::NotFound("user".into()))?;
    drop(conn);

    let limit = Limit::password_change(&user.username, &ctx.settings.throttle);
    if let Admission::Locked(wait) = throttle::admit(
        pool,
        std::slice::from_ref(&limit),
        &ctx.settings.throttle,
        now,
    )
    .await?
    {
        audit_change_failure(pool, caller, now, &user.username, "throttled", origin).await?;
        return Err(OpError::throttled(
            wait,
            format!(
                "too many wrong current passwords; try again in {} s",
                wait.as_secs().max(1)
            ),
        ));
    }
    // Far over any password we would have set: wrong without spending argon2 on it.
    let verified = if input.current_password.len() > NewPassword::MAX_LEN * 4 {
        Ok(false)
    } else {
        ctx.hashing
            .verify(input.current_password.clone(), Some(stored))
            .await
    };
    match verified {
        Ok(true) => {}
        Ok(false) => {
            audit_change_failure(
                pool,
                caller,
                now,
                &user.username,
                "wrong current password",
                origin,
            )
            .await?;
            return Err(FieldError::new("current_password", "is not your current password").into());
        }
        Err(e) => {
            // Unchecked (busy) is no guess; an internal failure is not the user's either.
            give_back(pool, &limit).await?;
            return Err(e.into());
        }
    }
    let hash = match ctx.hashing.hash(new.expose().to_owned()).await {
        Ok(hash) => hash,
        Err(e) => {
            // The current password was right: this attempt must not count against the user.
            give_back(pool, &limit).await?;
            return Err(e.into());
        }
    };
    let mut tx = db::begin_write(pool).await?;
    db::users::set_password_hash(&mut tx, user.id, &hash, now).await?;
    let ended = db::sessions::delete_for_user(&mut tx, user.id, origin.keep_session).await?;
    throttle::clear(&mut tx, &limit.key).await?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::UserPasswordChanged,
        "user",
        user.username.as_str(),
        json!({ "other_sessions_ended": ended }),
    )
    .await?;
    tx.commit().await?;
    // After the commit: the ended sessions may still be cached.
    ctx.auth_epoch.bump();
    Ok(())
}

/// Records a failed password-change attempt; the details name the reason, never the guess.
async fn audit_change_failure(
    pool: &sqlx::AnyPool,
    caller: &Caller,
    now: UnixMillis,
    username: &str,
    reason: &str,
    origin: ChangeOrigin<'_>,
) -> Result<(), OpError> {
    let mut tx = db::begin_write(pool).await?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::AuthPasswordChangeFailed,
        "user",
        username,
        json!({ "reason": reason, "client_addr": origin.client_addr }),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Un-counts an attempt whose password was never judged wrong.
async fn give_back(pool: &sqlx::AnyPool, limit: &Limit) -> Result<(), OpError> {
    let mut tx = db::begin_write(pool).await?;
    throttle::take_back(&mut tx, limit).await?;
    tx.commit().await?;
    Ok(())
}

/// Sets a user's password without the old one (CLI and demo seeding only: system caller).
pub async fn reset_password(
    ctx: &Ctx,
    caller: &Caller,
    username: &str,
    new_password: &str,
) -> Result<(), OpError> {
    let (pool, now) = (&ctx.pool, ctx.now());
    caller.require(Role::Admin)?;
    let pass = NewPassword::parse_field("password", new_password)?;
    let hash = ctx.hashing.hash(pass.expose().to_owned()).await?;
    let mut tx = db::begin_write(pool).await?;
    let user = find_user(&mut tx, "username", username).await?;
    db::users::set_password_hash(&mut tx, user.id, &hash, now).await?;
    db::sessions::delete_for_user(&mut tx, user.id, None).await?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::UserPasswordReset,
        "user",
        user.username.as_str(),
        json!({}),
    )
    .await?;
    tx.commit().await?;
    // After the commit: the ended sessions may still be cached.
    ctx.auth_epoch.bump();
    Ok(())
}

/// One user by name (admin only, like the list).
pub async fn get(ctx: &Ctx, caller: &Caller, username: &str) -> Result<User, OpError> {
    caller.require(Role::Admin)?;
    let mut conn = ctx.pool.acquire().await?;
    stored_user(&mut conn, username).await
}

/// Lists users (viewer may not: the list is an admin page).
pub async fn list_users(ctx: &Ctx, caller: &Caller) -> Result<Vec<User>, OpError> {
    let pool = &ctx.pool;
    caller.require(Role::Admin)?;
    let mut conn = pool.acquire().await?;
    let users = db::users::list(&mut conn).await?;
    users.into_iter().map(User::try_from).collect()
}
