//! Login tokens: hashed with argon2 (Argon2id, a random salt, the PHC string format) for
//! the config file, and checked against those hashes at login. A token is never stored.

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use rand::RngCore;

use crate::error::{ConsoleError, Result};

/// The shortest token `hash-token` accepts, in characters.
pub const MIN_TOKEN_CHARS: usize = 16;

/// A validated argon2 PHC string (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenHash(String);

impl TokenHash {
    /// Checks that `text` is an argon2 hash in the PHC string format; the reason otherwise
    /// (never echoing `text`, which may be a token pasted by mistake).
    pub fn parse(text: &str) -> std::result::Result<TokenHash, String> {
        let text = text.trim();
        let parsed = PasswordHash::new(text).map_err(|_| {
            "is not an argon2 PHC string ($argon2id$v=19$...): make it with `hookline console \
             hash-token`"
                .to_owned()
        })?;
        match parsed.algorithm.as_str() {
            "argon2id" | "argon2i" | "argon2d" => {}
            other => return Err(format!("is a {other} hash, not argon2")),
        }
        if parsed.hash.is_none() || parsed.salt.is_none() {
            return Err("has no salt or no hash".to_owned());
        }
        Ok(TokenHash(text.to_owned()))
    }

    /// The PHC string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `token` is the one hashed. Slow by design (tens of milliseconds): call it
    /// off the async runtime.
    pub fn verify(&self, token: &str) -> bool {
        match PasswordHash::new(&self.0) {
            Ok(hash) => Argon2::default()
                .verify_password(token.as_bytes(), &hash)
                .is_ok(),
            Err(_) => false,
        }
    }
}

/// The hash of `token` for the config file: Argon2id with the crate's default cost and a
/// random 16-byte salt, as a PHC string.
pub fn hash_token(token: &str) -> Result<String> {
    let mut salt = [0_u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| ConsoleError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(token.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| ConsoleError::Hash(e.to_string()))
}

/// Checks a token given to `hash-token`: at least [`MIN_TOKEN_CHARS`] characters, no
/// spaces or control characters (so that it survives copy and paste).
pub fn check_new_token(token: &str) -> std::result::Result<(), String> {
    if token.chars().count() < MIN_TOKEN_CHARS {
        return Err(format!(
            "the token must be at least {MIN_TOKEN_CHARS} characters (--generate makes one)"
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the token must not hold spaces or control characters".to_owned());
    }
    Ok(())
}

/// A new random token: 32 random bytes, hex.
pub fn generate_token() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_token_only() {
        let hash = hash_token("correct-horse-battery").expect("hash");
        assert!(hash.starts_with("$argon2id$v=19$"), "{hash}");
        assert!(!hash.contains("correct-horse-battery"));
        let parsed = TokenHash::parse(&hash).expect("a PHC string");
        assert!(parsed.verify("correct-horse-battery"));
        assert!(!parsed.verify("correct-horse-batterY"));
        assert!(!parsed.verify(""));
        // Two hashes of one token differ (random salts) and both verify.
        let again = hash_token("correct-horse-battery").expect("hash");
        assert_ne!(hash, again);
        assert!(
            TokenHash::parse(&again)
                .expect("valid")
                .verify("correct-horse-battery")
        );
    }

    #[test]
    fn only_argon2_phc_strings_are_hashes() {
        for bad in [
            "",
            "correct-horse-battery",
            "$argon2id$",
            "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
        ] {
            assert!(TokenHash::parse(bad).is_err(), "{bad}");
        }
        // A token pasted by mistake is not echoed back.
        let reason = TokenHash::parse("correct-horse-battery").expect_err("not a hash");
        assert!(!reason.contains("correct-horse-battery"), "{reason}");
    }

    #[test]
    fn new_tokens_are_long_enough_and_generated_ones_are() {
        assert!(check_new_token("short").is_err());
        assert!(check_new_token("sixteen chars ok").is_err(), "a space");
        assert!(check_new_token("sixteen-chars-ok").is_ok());
        let token = generate_token();
        assert_eq!(token.len(), 64);
        assert!(check_new_token(&token).is_ok());
        assert_ne!(token, generate_token());
    }
}
