//! Passwords: argon2id hashes in PHC form (the `argon2` crate's defaults: 19 MiB, 2 passes),
//! verification, and the random password made for `admin` on first start.

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

use super::AuthError;

/// The shortest password accepted for a user.
pub const MIN_LENGTH: usize = 10;

/// Hash `password` with a fresh random salt.
pub fn hash(password: &str) -> Result<String, AuthError> {
    if password.chars().count() < MIN_LENGTH {
        return Err(AuthError::WeakPassword { min: MIN_LENGTH });
    }
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| AuthError::Hash(e.to_string()))
}

/// Whether `password` matches the stored PHC string. A malformed hash matches nothing.
pub fn verify(password: &str, phc: &str) -> bool {
    Argon2::default()
        .verify_password(password.as_bytes(), phc)
        .is_ok()
}

/// A hash nobody's password matches, verified instead of a real one when the user does not
/// exist, so a sign-in costs the same time either way and does not tell which names exist.
pub fn decoy() -> &'static str {
    "$argon2id$v=19$m=19456,t=2,p=1$c3Rva2VyLWRlY295$1kq4mXlrRFvMz0wbS6hV4ZqP9l8KQbh8x2lD1kJ4E0Q"
}

/// A random password of 24 characters from an alphabet without look-alikes (about 137 bits).
pub fn generate() -> Result<String, AuthError> {
    const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut out = String::with_capacity(24);
    while out.len() < 24 {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
        for b in bytes {
            // Rejection sampling keeps every character equally likely.
            let limit = 256 - 256 % ALPHABET.len();
            if usize::from(b) < limit && out.len() < 24 {
                out.push(char::from(ALPHABET[usize::from(b) % ALPHABET.len()]));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let h = hash("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify("correct horse battery", &h));
        assert!(!verify("correct horse batterx", &h));
        assert!(!verify("anything", "not a hash"));
        assert!(!verify("", decoy()));
        assert_eq!(
            hash("short"),
            Err(AuthError::WeakPassword { min: MIN_LENGTH })
        );
    }

    #[test]
    fn generated_passwords_differ_and_are_strong() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 24);
        assert_ne!(a, b);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
