//! argon2id hashing, run off the async workers (it is deliberately slow).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Hashes a password with argon2id and a random salt (PHC string).
pub async fn hash(password: String) -> anyhow::Result<String> {
    tokio::task::spawn_blocking(move || {
        let mut salt_bytes = [0_u8; 16];
        getrandom::getrandom(&mut salt_bytes).map_err(|e| anyhow::anyhow!("random salt: {e}"))?;
        let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("hashing password: {e}"))
    })
    .await?
}

/// Whether `password` matches `phc`. A missing user is checked against a fixed dummy hash so
/// "no such user" and "wrong password" take the same time.
pub async fn verify(password: String, phc: Option<String>) -> anyhow::Result<bool> {
    tokio::task::spawn_blocking(move || {
        let stored = phc.as_deref().unwrap_or(DUMMY_HASH);
        let parsed = PasswordHash::new(stored).map_err(|e| anyhow::anyhow!("stored hash: {e}"))?;
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        Ok(ok && phc.is_some())
    })
    .await?
}

// argon2id of a random string nobody knows, with the default parameters.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Yq0i3HkqM2qvS0vJ2Xy7rC3dA0pR7F3c0qfQmY2bQ0o";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn verifies_only_the_right_password() {
        let h = hash("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse battery".into(), Some(h.clone()))
            .await
            .unwrap());
        assert!(!verify("wrong horse battery".into(), Some(h)).await.unwrap());
        assert!(!verify("anything".into(), None).await.unwrap());
    }
}
