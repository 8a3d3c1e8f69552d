//! The `[outbound]` section: the outbound address policy (SSRF guard) as configured; it is
//! converted into the core `AddressPolicy` in `settings::outbound`.
//!
//! Precedence, first match wins: `deny_cidrs` (refused) > cloud metadata addresses
//! (refused unless `allow_cidrs` names the address itself, e.g. `169.254.169.254/32`) >
//! `allow_cidrs` (allowed) > `allow_loopback` / `allow_private` / `allow_link_local` >
//! refused unless public. `allowed_ports`, when set, restricts every URL's port.

use serde::{Deserialize, Serialize};

/// Outbound address policy (SSRF guard). Public addresses are allowed unless denied.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboundConfig {
    /// Allow 127.0.0.0/8 and ::1 (tests, sidecars).
    pub allow_loopback: bool,
    /// Allow RFC 1918, CGNAT and unique-local addresses (not cloud metadata addresses).
    pub allow_private: bool,
    /// Allow link-local addresses (not cloud metadata addresses).
    pub allow_link_local: bool,
    /// Networks allowed whatever their class, e.g. `["10.1.2.0/24", "fd12::/64"]`. A cloud
    /// metadata address is opened only by naming it exactly (`169.254.169.254/32`).
    pub allow_cidrs: Vec<String>,
    /// Networks always refused, public ones included, e.g. `["10.0.0.0/8"]`; they win over
    /// every other rule.
    pub deny_cidrs: Vec<String>,
    /// The only ports delivery URLs may use (explicit or the scheme's default), e.g.
    /// `[443, 8443]`. Empty (the default): any port.
    pub allowed_ports: Vec<u16>,
}
