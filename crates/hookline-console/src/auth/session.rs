//! Sessions: a signed cookie (`HttpOnly`, `SameSite=Strict`, `Path=/`; `Secure` and named
//! `__Host-...` unless the console is on loopback over plain HTTP) holding a random session
//! id, the user, its expiry and the session's CSRF token. A token user's role is looked up
//! in the settings on every request (a user removed from the config is out at the next
//! restart); a proxy user's comes from the trusted headers each time. Logging out revokes
//! the id ([`super::revoked`]). [`resolve`] decides who a request is from; it is pure, the
//! cookie jar is the server's.

use axum::http::HeaderMap;
use rand::RngCore;

use super::Role;
use super::csrf;
use super::token::hex;
use crate::config::ConsoleSettings;

/// The session cookie's name without `Secure` cookies.
pub const SESSION_COOKIE: &str = "hookline_console";
/// The login form's cookie (its CSRF token, before there is a session) without `Secure`
/// cookies.
pub const LOGIN_COOKIE: &str = "hookline_console_login";

/// The cookies' names: with `Secure` cookies, `__Host-` in front, which a browser accepts
/// only from this origin over HTTPS, with `Path=/` and no `Domain` (so no other host of the
/// site, nor plain HTTP, can set or shadow them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieNames {
    /// The session cookie.
    pub session: &'static str,
    /// The login form's cookie.
    pub login: &'static str,
}

impl CookieNames {
    /// The names for `Secure` cookies or not.
    pub fn new(secure: bool) -> CookieNames {
        if secure {
            CookieNames {
                session: "__Host-hookline_console",
                login: "__Host-hookline_console_login",
            }
        } else {
            CookieNames {
                session: SESSION_COOKIE,
                login: LOGIN_COOKIE,
            }
        }
    }
}

/// How a user was identified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// With a token, at the login page.
    Token,
    /// By the reverse proxy's trusted header.
    Proxy,
}

/// The user of an authenticated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Their name (recorded in the audit trail).
    pub user: String,
    /// Their role now.
    pub role: Role,
    /// The session's CSRF token.
    pub csrf: String,
    /// How they were identified.
    pub identity: Identity,
}

/// What the (signed) session cookie holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieValue {
    /// The session's id: 16 random bytes, hex (what logging out revokes).
    pub id: String,
    /// The user's name.
    pub user: String,
    /// When the session ends, epoch milliseconds.
    pub expires_ms: i64,
    /// The session's CSRF token.
    pub csrf: String,
    /// How the user was identified.
    pub identity: Identity,
}

impl CookieValue {
    /// A new session for `user` from `now_ms`, lasting `lifetime_ms`.
    pub fn new(user: &str, identity: Identity, now_ms: i64, lifetime_ms: i64) -> CookieValue {
        let mut id = [0_u8; 16];
        rand::rng().fill_bytes(&mut id);
        CookieValue {
            id: hex(&id),
            user: user.to_owned(),
            expires_ms: now_ms.saturating_add(lifetime_ms),
            csrf: csrf::new_token(),
            identity,
        }
    }

    /// The cookie's value: `v2.<t|p>.<expires_ms>.<id>.<csrf>.<user, hex>`, only
    /// characters a cookie may hold (the signature is added in front by the jar). A `v1`
    /// value (before session ids) is nobody's: it could not be revoked.
    pub fn encode(&self) -> String {
        let kind = match self.identity {
            Identity::Token => "t",
            Identity::Proxy => "p",
        };
        format!(
            "v2.{kind}.{}.{}.{}.{}",
            self.expires_ms,
            self.id,
            self.csrf,
            hex(self.user.as_bytes())
        )
    }

    /// Reads a value written by [`encode`](CookieValue::encode); `None` for anything else.
    pub fn decode(text: &str) -> Option<CookieValue> {
        let mut parts = text.split('.');
        if parts.next()? != "v2" {
            return None;
        }
        let identity = match parts.next()? {
            "t" => Identity::Token,
            "p" => Identity::Proxy,
            _ => return None,
        };
        let expires_ms = parts.next()?.parse().ok()?;
        let id = parts.next()?.to_owned();
        let csrf = parts.next()?.to_owned();
        let user = String::from_utf8(unhex(parts.next()?)?).ok()?;
        if parts.next().is_some() || id.is_empty() || csrf.is_empty() || user.is_empty() {
            return None;
        }
        Some(CookieValue {
            id,
            user,
            expires_ms,
            csrf,
            identity,
        })
    }
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect()
}

/// Who a request is from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// A user, and the session cookie to set when it is new.
    User(Session, Option<CookieValue>),
    /// Nobody: log in.
    Anonymous,
    /// The proxy named a user who has no role here (the reason, for the page).
    Refused(String),
}

/// Decides who a request is from: the trusted header when it is enabled and present,
/// otherwise a valid, unexpired token session of a configured user.
pub fn resolve(
    settings: &ConsoleSettings,
    cookie: Option<CookieValue>,
    headers: &HeaderMap,
    now_ms: i64,
) -> Resolved {
    let cookie = cookie.filter(|c| c.expires_ms > now_ms);
    if let Some(trusted) = &settings.trusted_header {
        let named = headers
            .get(trusted.user_header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty());
        if let Some(user) = named {
            let from_header = || {
                trusted
                    .role_header
                    .as_ref()
                    .and_then(|h| headers.get(h.as_str()))
                    .and_then(|v| v.to_str().ok())
                    .and_then(Role::parse)
            };
            let Some(role) = trusted.roles.get(user).copied().or_else(from_header) else {
                return Resolved::Refused(format!(
                    "the proxy says you are {user}, who has no role in this console"
                ));
            };
            let kept = cookie.filter(|c| c.identity == Identity::Proxy && c.user == user);
            let (csrf, new) = match kept {
                Some(c) => (c.csrf, None),
                None => {
                    let lifetime =
                        i64::try_from(settings.session_lifetime.as_millis()).unwrap_or(i64::MAX);
                    let c = CookieValue::new(user, Identity::Proxy, now_ms, lifetime);
                    (c.csrf.clone(), Some(c))
                }
            };
            let session = Session {
                user: user.to_owned(),
                role,
                csrf,
                identity: Identity::Proxy,
            };
            return Resolved::User(session, new);
        }
    }
    let Some(cookie) = cookie.filter(|c| c.identity == Identity::Token) else {
        return Resolved::Anonymous;
    };
    match settings.users.iter().find(|u| u.name == cookie.user) {
        Some(user) => Resolved::User(
            Session {
                user: user.name.clone(),
                role: user.role,
                csrf: cookie.csrf,
                identity: Identity::Token,
            },
            None,
        ),
        None => Resolved::Anonymous,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::http::HeaderValue;
    use hookline_core::secret::Secret;

    use super::*;
    use crate::auth::token::{TokenHash, hash_token};
    use crate::config::{ConsoleConfig, TrustedHeader};

    fn settings(trusted: bool) -> ConsoleSettings {
        let mut settings = ConsoleConfig {
            session_key: Some(Secret::new("k".repeat(32))),
            trusted_header: Some("X-Forwarded-User".into()),
            ..ConsoleConfig::default()
        }
        .into_settings()
        .expect("valid");
        settings.users.push(crate::config::User {
            name: "alice".into(),
            role: Role::Operator,
            token_hash: TokenHash::parse(&hash_token("alice-token-123456").expect("hash"))
                .expect("valid"),
        });
        settings.trusted_header = trusted.then(|| TrustedHeader {
            user_header: "x-forwarded-user".into(),
            role_header: Some("x-forwarded-role".into()),
            roles: BTreeMap::from([("bob".to_owned(), Role::Admin)]),
        });
        settings
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn cookie_values_round_trip_and_garbage_is_nobody() {
        let value = CookieValue::new("Zoë O'Brien; x=1", Identity::Token, 1_000, 500);
        let text = value.encode();
        assert!(
            text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'),
            "{text}"
        );
        assert_ne!(value.id, CookieValue::new("a", Identity::Token, 1, 1).id);
        assert_eq!(value.id.len(), 32);
        assert_eq!(CookieValue::decode(&text), Some(value));
        for bad in [
            "",
            "v2",
            "v1.t.1.ab.61",
            "v3.t.1.cd.ab.61",
            "v2.x.1.cd.ab.61",
            "v2.t.x.cd.ab.61",
            "v2.t.1.cd.ab.6",
            "v2.t.1..ab.61",
            "v2.t.1.cd..61",
            "v2.t.1.cd.ab.61.x",
        ] {
            assert_eq!(CookieValue::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn token_sessions_last_until_they_expire_and_take_the_configured_role() {
        let s = settings(false);
        let cookie = CookieValue::new("alice", Identity::Token, 1_000, 500);
        match resolve(&s, Some(cookie.clone()), &HeaderMap::new(), 1_499) {
            Resolved::User(session, None) => {
                assert_eq!(session.role, Role::Operator);
                assert_eq!(session.csrf, cookie.csrf);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            resolve(&s, Some(cookie.clone()), &HeaderMap::new(), 1_500),
            Resolved::Anonymous
        );
        let gone = CookieValue::new("mallory", Identity::Token, 1_000, 500);
        assert_eq!(
            resolve(&s, Some(gone), &HeaderMap::new(), 1_200),
            Resolved::Anonymous
        );
        // The trusted header is ignored when it is not enabled.
        let forged = headers(&[("x-forwarded-user", "bob")]);
        assert_eq!(resolve(&s, None, &forged, 1_200), Resolved::Anonymous);
    }

    #[test]
    fn the_trusted_header_names_the_user_and_the_map_or_header_the_role() {
        let s = settings(true);
        let bob = headers(&[("x-forwarded-user", "bob"), ("x-forwarded-role", "viewer")]);
        let Resolved::User(session, Some(new)) = resolve(&s, None, &bob, 1_000) else {
            panic!("bob is let in with a new session");
        };
        assert_eq!(session.role, Role::Admin, "the map wins over the header");
        assert_eq!(session.identity, Identity::Proxy);
        assert_eq!(new.csrf, session.csrf);
        // The session's CSRF token is kept while the cookie is valid and for the same user.
        let Resolved::User(again, None) = resolve(&s, Some(new.clone()), &bob, 1_001) else {
            panic!("the same session");
        };
        assert_eq!(again.csrf, new.csrf);
        let carol = headers(&[
            ("x-forwarded-user", "carol"),
            ("x-forwarded-role", "Operator"),
        ]);
        let Resolved::User(c, Some(fresh)) = resolve(&s, Some(new), &carol, 1_002) else {
            panic!("carol gets a session of her own");
        };
        assert_eq!(c.role, Role::Operator);
        assert_ne!(fresh.user, "bob");
        let nobody = headers(&[("x-forwarded-user", "dave")]);
        assert!(matches!(
            resolve(&s, None, &nobody, 1_000),
            Resolved::Refused(_)
        ));
        let bad_role = headers(&[("x-forwarded-user", "dave"), ("x-forwarded-role", "root")]);
        assert!(matches!(
            resolve(&s, None, &bad_role, 1_000),
            Resolved::Refused(_)
        ));
        // Without the header, token sessions still work.
        let cookie = CookieValue::new("alice", Identity::Token, 1_000, 500);
        assert!(matches!(
            resolve(&s, Some(cookie), &HeaderMap::new(), 1_100),
            Resolved::User(..)
        ));
    }
}
