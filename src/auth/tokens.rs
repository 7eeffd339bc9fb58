//! API tokens: created by admins for a user, shown once, stored as a sha256, revocable.

use serde_json::json;

use super::principal::Caller;
use super::secret_token;
use super::users::find_user;
use crate::audit::{self, Action};
use crate::context::Ctx;
use crate::db;
use crate::db::tokens::TokenRow;
use crate::domain::field_error::reject_control_chars;
use crate::domain::{parse_stored, FieldError, FieldErrors, Role, UnixMillis, Username};
use crate::error::OpError;

/// A token as pages and the API show it (never the token, nor its digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub id: i64,
    /// Who the token acts as.
    pub username: Username,
    /// What the token is for.
    pub label: String,
    pub created_at: UnixMillis,
    /// The actor name of the admin who created it.
    pub created_by: String,
    pub last_used_at: Option<UnixMillis>,
    pub revoked_at: Option<UnixMillis>,
}

impl TryFrom<TokenRow> for Token {
    type Error = OpError;
    fn try_from(t: TokenRow) -> Result<Self, OpError> {
        Ok(Token {
            id: t.id,
            username: parse_stored("api_tokens.username", &t.username, Username::parse_field)?,
            label: t.label,
            created_at: t.created_at,
            created_by: t.created_by,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
        })
    }
}

/// A token to create, as submitted.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct NewTokenInput {
    pub username: String,
    pub label: String,
}

/// Creates an API token acting as `username` (admin only). Returns the raw token, which is
/// shown once and never stored.
pub async fn create_token(
    ctx: &Ctx,
    caller: &Caller,
    input: &NewTokenInput,
) -> Result<(String, Token), OpError> {
    let (pool, now) = (&ctx.pool, ctx.now());
    caller.require(Role::Admin)?;
    let mut errors = FieldErrors::default();
    let username = errors.check(Username::parse(&input.username));
    let label = input.label.trim();
    if label.is_empty() {
        errors.push("label", "is required (say what the token is for)");
    } else if label.chars().count() > 100 {
        errors.push("label", "must be at most 100 characters");
    } else {
        errors.check(reject_control_chars("label", label));
    }
    let (Some(username), true) = (username, errors.is_empty()) else {
        return Err(OpError::Invalid(errors));
    };
    let mut tx = db::begin_write(pool).await?;
    let user = find_user(&mut tx, "username", username.as_str()).await?;
    if user.disabled {
        return Err(FieldError::new("username", "is disabled").into());
    }
    let token = secret_token::generate("hr_");
    let id = db::tokens::insert(
        &mut tx,
        user.id,
        label,
        &secret_token::digest(&token),
        caller.actor.name(),
        now,
    )
    .await?;
    audit::record(
        &mut tx,
        caller,
        now,
        Action::TokenCreated,
        "token",
        &id.to_string(),
        json!({ "user": user.username.as_str(), "label": label }),
    )
    .await?;
    let row = db::tokens::by_id(&mut tx, id)
        .await?
        .ok_or_else(|| OpError::NotFound("token".into()))?;
    tx.commit().await?;
    Ok((token, row.try_into()?))
}

/// Revokes an API token (admin only).
pub async fn revoke_token(ctx: &Ctx, caller: &Caller, id: i64) -> Result<Token, OpError> {
    let (pool, now) = (&ctx.pool, ctx.now());
    caller.require(Role::Admin)?;
    let mut tx = db::begin_write(pool).await?;
    let token = db::tokens::by_id(&mut tx, id)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("token {id}")))?;
    if db::tokens::revoke(&mut tx, id, now).await? {
        audit::record(
            &mut tx,
            caller,
            now,
            Action::TokenRevoked,
            "token",
            &id.to_string(),
            json!({ "user": token.username.as_str(), "label": token.label }),
        )
        .await?;
    }
    let token = db::tokens::by_id(&mut tx, id).await?.unwrap_or(token);
    tx.commit().await?;
    token.try_into()
}

/// Lists API tokens (admin only).
pub async fn list_tokens(ctx: &Ctx, caller: &Caller) -> Result<Vec<Token>, OpError> {
    let pool = &ctx.pool;
    caller.require(Role::Admin)?;
    let mut conn = pool.acquire().await?;
    let tokens = db::tokens::list(&mut conn).await?;
    tokens.into_iter().map(Token::try_from).collect()
}

/// What the tokens page shows: every token and the users one can be made for (admin only).
pub async fn overview(
    ctx: &Ctx,
    caller: &Caller,
) -> Result<(Vec<Token>, Vec<super::users::User>), OpError> {
    Ok((
        list_tokens(ctx, caller).await?,
        super::users::list_users(ctx, caller).await?,
    ))
}
