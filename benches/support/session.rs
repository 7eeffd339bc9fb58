//! A signed-in admin for benches that load pages over HTTP: a session row behind a cookie,
//! the way the login form leaves things (no password hashing in the way).

use headroom::auth::secret_token;
use headroom::domain::{Role, Username};

/// Inserts admin `name` and a session for it; returns the `Cookie` header's value.
pub async fn admin_cookie(ctx: &headroom::context::Ctx, name: &str) -> String {
    let mut conn = ctx.pool.acquire().await.expect("connection");
    let user = headroom::db::users::insert(
        &mut conn,
        &Username::parse(name).expect("name"),
        Role::Admin,
        "not-a-password-hash",
        ctx.now(),
    )
    .await
    .expect("insert user")
    .expect("new user");
    let token = secret_token::generate("hs_");
    headroom::db::sessions::insert(&mut conn, &secret_token::digest(&token), user.id, ctx.now())
        .await
        .expect("insert session");
    format!("{}={token}", headroom::auth::sessions::COOKIE)
}
