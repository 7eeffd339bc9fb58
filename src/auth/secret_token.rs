//! Random bearer secrets (session cookies, API tokens) and their stored digests.

use crate::domain::digest::{hex, sha256_hex};

/// A fresh random token: `prefix` then 64 hex characters (256 bits from the OS).
pub fn generate(prefix: &str) -> String {
    let mut bytes = [0_u8; 32];
    getrandom::getrandom(&mut bytes).expect("the OS random source is available");
    format!("{prefix}{}", hex(&bytes))
}

/// The stored form of a token: its sha256 in hex. Tokens are 256-bit random, so a fast hash
/// is enough (no guessable input to brute-force, unlike passwords).
pub fn digest(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Compares two strings in time independent of where they differ.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_digests_differ_from_them() {
        let a = generate("hr_");
        let b = generate("hr_");
        assert_ne!(a, b);
        assert_eq!(a.len(), 3 + 64);
        assert_ne!(digest(&a), a);
        assert!(constant_time_eq(&a, &a.clone()));
        assert!(!constant_time_eq(&a, &b));
    }
}
