//! Digests as text: the lower-case hex that pins, payload hashes, token digests and the audit
//! chain are written in.

use sha2::{Digest, Sha256};

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    // By table, not `write!("{:02x}")`: every signed-in request hashes its session token and
    // derives its CSRF token, and the formatter's per-byte call showed in the dashboard's
    // profile.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// Lower-case hex sha256 of bytes.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_the_empty_string_is_the_well_known_one() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
