//! Who is asking and what they may do: roles and their permissions, token users and the
//! reverse proxy's trusted header, token logins' limits, sessions in signed cookies and
//! their revocation, and CSRF tokens.

pub mod backoff;
pub mod config;
pub mod csrf;
pub mod gate;
pub mod revoked;
pub mod session;
pub mod token;

use serde::{Deserialize, Serialize};

pub use config::{LoginConfig, LoginLimits};
pub use gate::{LoginGate, Refusal};
pub use revoked::Revoked;
pub use session::{CookieNames, Identity, Session};

/// What a viewer sees instead of text that may echo a payload (an endpoint's answer, and
/// the error messages quoting it) when payloads are hidden from viewers.
pub const ECHO_HIDDEN: &str = "(hidden: may echo the payload)";

/// What a user may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads every page (payloads only when not hidden from viewers).
    Viewer,
    /// Also redrives, resolves, annotates and archives DLQ records.
    Operator,
    /// Also enables and disables endpoints.
    Admin,
}

/// Something a page or an action needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Read the DLQ, events, endpoints and the overview.
    Read,
    /// Redrive, resolve, annotate and archive DLQ records.
    Act,
    /// Enable and disable endpoints.
    ManageEndpoints,
}

impl Role {
    /// The name in the config, the audit trail and on the page.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `text` (as in the config; case and surrounding spaces ignored).
    pub fn parse(text: &str) -> Option<Role> {
        match text.trim().to_ascii_lowercase().as_str() {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    /// Whether the role has `permission`.
    pub fn allows(self, permission: Permission) -> bool {
        match (self, permission) {
            (_, Permission::Read) => true,
            (Role::Viewer, Permission::Act | Permission::ManageEndpoints) => false,
            (Role::Operator, Permission::Act) => true,
            (Role::Operator, Permission::ManageEndpoints) => false,
            (Role::Admin, Permission::Act | Permission::ManageEndpoints) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_has_its_permissions_and_those_below() {
        use Permission::*;
        let table = [
            (Role::Viewer, [true, false, false]),
            (Role::Operator, [true, true, false]),
            (Role::Admin, [true, true, true]),
        ];
        for (role, expected) in table {
            let got = [Read, Act, ManageEndpoints].map(|p| role.allows(p));
            assert_eq!(got, expected, "{role:?}");
        }
    }

    #[test]
    fn roles_parse_by_name_only() {
        assert_eq!(Role::parse(" Admin "), Some(Role::Admin));
        assert_eq!(Role::parse("operator"), Some(Role::Operator));
        for bad in ["", "root", "admins", "view"] {
            assert_eq!(Role::parse(bad), None, "{bad}");
        }
        for role in [Role::Viewer, Role::Operator, Role::Admin] {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
    }
}
