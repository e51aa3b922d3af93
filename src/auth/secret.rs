//! Bearer secrets: session cookies, API tokens, Keystone tokens and CSRF tokens are 256 random
//! bits, hex-encoded, with a short prefix saying what they are (so a leaked one is
//! recognisable). Only their SHA-256 is stored, so the database never holds a usable secret.

use sha2::Digest;

use super::AuthError;
use crate::model::hex;

/// What a secret is for; its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Session,
    ApiToken,
    Keystone,
    Csrf,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Session => "sks_",
            Kind::ApiToken => "skt_",
            Kind::Keystone => "skk_",
            Kind::Csrf => "",
        }
    }
}

/// A new secret and its hash (what is stored).
pub fn new(kind: Kind) -> Result<(String, String), AuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
    let secret = format!("{}{}", kind.prefix(), hex(&bytes));
    let hash = hash(&secret);
    Ok((secret, hash))
}

/// SHA-256 of a secret, hex-encoded.
pub fn hash(secret: &str) -> String {
    hex(&sha2::Sha256::digest(secret.as_bytes()))
}

/// Compare two strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_hashed() {
        let (a, ha) = new(Kind::ApiToken).unwrap();
        let (b, _) = new(Kind::ApiToken).unwrap();
        assert!(a.starts_with("skt_") && a.len() == 68, "{a}");
        assert_ne!(a, b);
        assert_eq!(hash(&a), ha);
        assert_ne!(ha, a);
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
    }
}
