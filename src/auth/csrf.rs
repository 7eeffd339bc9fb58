//! CSRF tokens. A session's token is derived from its secret cookie token, so nothing extra is
//! stored and a leaked database yields no CSRF token. Before login, a double-submit cookie
//! protects the login form itself; its token is signed with a per-instance key, because a
//! plain double-submit trusts any cookie, and a sibling subdomain can set cookies on ours:
//! with the signature, a cookie/field pair an attacker made up is refused.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::SqlitePool;

use super::secret_token;
use crate::domain::digest::hex;
use crate::domain::UnixMillis;

/// Form field carrying the token.
pub const FIELD: &str = "csrf_token";
/// Header carrying the token (htmx sends it through `hx-headers`).
pub const HEADER: &str = "x-csrf-token";
/// Cookie holding the pre-login token.
pub const LOGIN_COOKIE: &str = "headroom_login_csrf";

/// How long a pre-login token is accepted: long enough for a login tab left open over a
/// working day, short enough that a harvested token does not work forever.
pub const LOGIN_TOKEN_TTL_MS: UnixMillis = 12 * 60 * 60 * 1000;

/// Clock skew tolerated for a token issued "in the future" (several instances, one key).
const FUTURE_SKEW_MS: UnixMillis = 60 * 1000;

/// `instance_keys.purpose` of the login-form key.
const KEY_PURPOSE: &str = "login_csrf";

/// Domain separation: a MAC made for anything else with the same key never verifies here.
const MAC_CONTEXT: &[u8] = b"headroom login csrf v1\0";

/// The CSRF token of the session whose cookie token is `session_token`.
pub fn for_session(session_token: &str) -> String {
    secret_token::digest(&format!("csrf\0{session_token}"))
}

/// The per-instance key that signs pre-login tokens with HMAC-SHA256. It lives in the
/// database (`instance_keys`), so every instance on one database and every restart agree.
#[derive(Clone)]
pub struct LoginKey(Arc<[u8; 32]>);

impl std::fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginKey(«secret»)")
    }
}

impl LoginKey {
    /// Reads the instance's key, creating it from the OS random source on first start.
    pub async fn load_or_create(pool: &SqlitePool, now: UnixMillis) -> anyhow::Result<Self> {
        let mut fresh = [0_u8; 32];
        getrandom::getrandom(&mut fresh)
            .map_err(|e| anyhow::anyhow!("the OS random source failed: {e}"))?;
        let mut conn = pool.acquire().await?;
        let stored =
            crate::db::instance_keys::get_or_insert(&mut conn, KEY_PURPOSE, &fresh, now).await?;
        let bytes: [u8; 32] = stored.try_into().map_err(|v: Vec<u8>| {
            anyhow::anyhow!(
                "instance_keys: the {KEY_PURPOSE} key must be 32 bytes, found {}",
                v.len()
            )
        })?;
        Ok(Self::from_bytes(bytes))
    }

    /// A key from raw bytes (tests, and the database row).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Arc::new(bytes))
    }

    /// A new pre-login token: `issued-at.nonce.mac`.
    pub fn issue(&self, now: UnixMillis) -> String {
        let body = format!("{now}.{}", secret_token::generate(""));
        let mac = self.mac(&body);
        format!("{body}.{mac}")
    }

    /// Whether `token` was issued by this instance and has not expired. Malformed tokens are
    /// simply not valid.
    pub fn verify(&self, token: &str, now: UnixMillis) -> bool {
        let Some((body, mac)) = token.rsplit_once('.') else {
            return false;
        };
        let Some((issued, nonce)) = body.split_once('.') else {
            return false;
        };
        let well_formed = issued.len() <= 15
            && !issued.is_empty()
            && issued.bytes().all(|b| b.is_ascii_digit())
            && nonce.len() == 64
            && nonce
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let Ok(issued) = issued.parse::<UnixMillis>() else {
            return false;
        };
        // The MAC is compared even for a stale token so timing does not reveal which check
        // failed.
        let genuine = secret_token::constant_time_eq(&self.mac(body), mac);
        let fresh = issued <= now + FUTURE_SKEW_MS && now - issued <= LOGIN_TOKEN_TTL_MS;
        well_formed && genuine && fresh
    }

    fn mac(&self, body: &str) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0[..]).expect("HMAC takes a key of any length");
        mac.update(MAC_CONTEXT);
        mac.update(body.as_bytes());
        hex(&mac.finalize().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMillis = 1_796_000_000_000;

    fn key(byte: u8) -> LoginKey {
        LoginKey::from_bytes([byte; 32])
    }

    #[test]
    fn an_issued_token_verifies_with_its_own_key_only() {
        let token = key(1).issue(NOW);
        assert!(key(1).verify(&token, NOW));
        assert!(!key(2).verify(&token, NOW), "another instance's key");
    }

    #[test]
    fn made_up_and_altered_tokens_are_refused() {
        let k = key(7);
        let token = k.issue(NOW);
        let (body, mac) = token.rsplit_once('.').unwrap();
        let flipped = format!(
            "{body}.{}{}",
            &mac[..63],
            if mac.ends_with('0') { '1' } else { '0' }
        );
        let other_time = token.replacen(&NOW.to_string(), &(NOW + 1).to_string(), 1);
        for forged in [
            "0000000000000000000000000000000000000000000000000000000000000000".to_owned(),
            secret_token::generate(""),
            String::new(),
            "..".to_owned(),
            body.to_owned(),
            flipped,
            other_time,
            format!("{token}.extra"),
            token.to_uppercase(),
        ] {
            assert!(!k.verify(&forged, NOW), "{forged:?}");
        }
    }

    #[test]
    fn tokens_expire_and_are_not_valid_before_they_are_issued() {
        let k = key(3);
        let token = k.issue(NOW);
        assert!(k.verify(&token, NOW + LOGIN_TOKEN_TTL_MS));
        assert!(!k.verify(&token, NOW + LOGIN_TOKEN_TTL_MS + 1));
        assert!(k.verify(&token, NOW - FUTURE_SKEW_MS));
        assert!(!k.verify(&token, NOW - FUTURE_SKEW_MS - 1));
    }

    #[test]
    fn the_key_never_appears_in_debug_output() {
        assert_eq!(format!("{:?}", key(9)), "LoginKey(«secret»)");
    }
}
