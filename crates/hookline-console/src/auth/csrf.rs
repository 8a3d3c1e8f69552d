//! CSRF tokens: a random token per session (and one per login form), sent back by every
//! form as the `csrf` field (or the `X-CSRF-Token` header) and compared in constant time.

use rand::RngCore;
use subtle::ConstantTimeEq;

use super::token::hex;

/// The form field that carries the token.
pub const FIELD: &str = "csrf";
/// The header that may carry it instead (for scripts).
pub const HEADER: &str = "x-csrf-token";

/// A new token: 32 random bytes, hex.
pub fn new_token() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex(&bytes)
}

/// Whether `given` is the session's token: same length and bytes, compared in constant
/// time. An empty expected token never matches.
pub fn matches(expected: &str, given: Option<&str>) -> bool {
    let Some(given) = given else {
        return false;
    };
    !expected.is_empty()
        && expected.len() == given.len()
        && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sessions_own_token_matches() {
        let token = new_token();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token());
        assert!(matches(&token, Some(&token)));
        assert!(!matches(&token, None));
        assert!(!matches(&token, Some("")));
        assert!(!matches(&token, Some(&token[..63])));
        let mut other = token.clone().into_bytes();
        other[10] = if other[10] == b'0' { b'1' } else { b'0' };
        assert!(!matches(
            &token,
            Some(std::str::from_utf8(&other).expect("hex"))
        ));
        assert!(!matches("", Some("")), "an empty token never matches");
    }
}
