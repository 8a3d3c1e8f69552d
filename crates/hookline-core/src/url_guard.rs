//! SSRF guard: which URLs and resolved addresses a delivery may go to (pure checks).
//!
//! [`check_url`] checks the URL's shape and [`check_port`] its port; the dispatcher
//! resolves the host and calls [`check_ip`] on every address before connecting (and
//! connects only to checked ones).
//!
//! Precedence of [`check_ip`], first match wins: `deny_cidrs` (refused) > cloud metadata
//! addresses (refused unless `allow_cidrs` names the address itself, e.g.
//! `169.254.169.254/32`) > `allow_cidrs` (allowed) > the class flags (`allow_loopback`,
//! `allow_private`, `allow_link_local`) > refused if not public. Every rule sees the IPv4
//! address inside IPv4-mapped, NAT64 and 6to4 IPv6 addresses too.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::envelope::ErrorReason;
use crate::event::MAX_URL_LEN;

/// The scheme of a delivery URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
}

/// The host of a delivery URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetHost {
    /// A domain name, to resolve (and check each address of).
    Domain(String),
    /// An IP literal (including WHATWG forms such as `0x7f.1`, already normalized).
    Ip(IpAddr),
}

/// A delivery URL that passed [`check_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTarget {
    /// The normalized URL.
    pub url: Url,
    /// Its scheme.
    pub scheme: Scheme,
    /// Its host.
    pub host: TargetHost,
    /// Its port, explicit or the scheme's default.
    pub port: u16,
}

impl ParsedTarget {
    /// The host's address when the URL names an IP literal.
    pub fn literal_ip(&self) -> Option<IpAddr> {
        match self.host {
            TargetHost::Ip(ip) => Some(ip),
            TargetHost::Domain(_) => None,
        }
    }
}

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// It does not parse.
    #[error("URL does not parse: {0}")]
    Parse(#[source] url::ParseError),
    /// It is longer than [`MAX_URL_LEN`].
    #[error("URL is {len} bytes, over the limit of {MAX_URL_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Its scheme is not http or https.
    #[error("URL scheme `{scheme}` is not http or https")]
    Scheme {
        /// The scheme found.
        scheme: String,
    },
    /// It carries a user name or password.
    #[error("URL must not carry a user name or password")]
    UserInfo,
    /// It has no host.
    #[error("URL has no host")]
    NoHost,
}

impl UrlError {
    /// A low-cardinality label: `unparseable`, `too_long`, `scheme`, `userinfo`, `no_host`.
    pub fn code(&self) -> &'static str {
        match self {
            UrlError::Parse(_) => "unparseable",
            UrlError::TooLong { .. } => "too_long",
            UrlError::Scheme { .. } => "scheme",
            UrlError::UserInfo => "userinfo",
            UrlError::NoHost => "no_host",
        }
    }

    /// The DLQ reason for a delivery refused for this: `BLOCKED_URL`.
    pub fn reason(&self) -> ErrorReason {
        ErrorReason::BlockedUrl
    }
}

/// Checks a delivery URL's shape: http or https, a host, no user info, at most
/// [`MAX_URL_LEN`] bytes. It does not resolve or check addresses.
pub fn check_url(url: &str) -> Result<ParsedTarget, UrlError> {
    if url.len() > MAX_URL_LEN {
        return Err(UrlError::TooLong { len: url.len() });
    }
    let parsed = Url::parse(url).map_err(UrlError::Parse)?;
    let scheme = match parsed.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(UrlError::Scheme {
                scheme: other.to_owned(),
            });
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlError::UserInfo);
    }
    let host = match parsed.host() {
        Some(Host::Domain(d)) => TargetHost::Domain(d.to_owned()),
        Some(Host::Ipv4(ip)) => TargetHost::Ip(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => TargetHost::Ip(IpAddr::V6(ip)),
        None => return Err(UrlError::NoHost),
    };
    let port = parsed.port_or_known_default().ok_or(UrlError::NoHost)?;
    Ok(ParsedTarget {
        url: parsed,
        scheme,
        host,
        port,
    })
}

/// The URL fit for logs and DLQ records: no user info, and the query string and fragment
/// replaced by `?redacted` (they may carry tokens).
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return "<unparseable url>".to_owned();
    };
    let had_query = parsed.query().is_some() || parsed.fragment().is_some();
    // Both calls fail only for URLs that cannot have user info, which then have none.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    let mut out = parsed.to_string();
    if had_query {
        out.push_str("?redacted");
    }
    out
}

/// Which special-purpose range an address is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10.
    Private,
    /// 100.64.0.0/10, carrier-grade NAT shared space.
    SharedCgnat,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Cloud metadata and instance credential services, see [`METADATA_ADDRESSES`].
    Metadata,
    /// 0.0.0.0, ::.
    Unspecified,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// Documentation ranges: 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// Other reserved space: 0/8, 192.0.0/24, 198.18/15, 240/4, 64:ff9b:1::/48, 100::/64,
    /// 2001::/23, IPv4-compatible ::/96.
    Reserved,
    /// In the policy's `deny_cidrs` (whatever its class; public addresses too).
    Denied,
}

impl AddressClass {
    /// A low-cardinality label, e.g. `loopback`, `private`, `metadata`.
    pub fn code(self) -> &'static str {
        match self {
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "cgnat",
            AddressClass::LinkLocal => "link_local",
            AddressClass::Metadata => "metadata",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Documentation => "documentation",
            AddressClass::Reserved => "reserved",
            AddressClass::Denied => "denied",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Which non-public addresses deliveries may reach. Everything else non-public is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AddressPolicy {
    /// Allow loopback addresses (local development). Default false.
    pub allow_loopback: bool,
    /// Allow private (RFC 1918, fc00::/7) and carrier-grade NAT addresses. Default false.
    pub allow_private: bool,
    /// Allow link-local addresses (not the metadata services). Default false.
    pub allow_link_local: bool,
    /// Networks allowed whatever their class, e.g. `["10.1.2.0/24"]`; the only way to allow
    /// a multicast or reserved address. A metadata address is allowed only by a network
    /// that is the address itself (`169.254.169.254/32`), never by a wider one.
    pub allow_cidrs: Vec<IpNet>,
    /// Networks always refused, whatever the other fields, e.g. `["10.0.0.0/8"]`.
    pub deny_cidrs: Vec<IpNet>,
    /// The only ports URLs may use (explicit or the scheme's default), e.g. `[443, 8443]`.
    /// Empty (the default): any port.
    pub allowed_ports: Vec<u16>,
}

/// Cloud metadata and instance credential services: refused whatever the class flags and
/// however wide an `allow_cidrs` network, since a webhook that reaches one hands out the
/// host's cloud credentials.
pub const METADATA_ADDRESSES: &[IpAddr] = &[
    // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, IBM, Hetzner instance metadata.
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    // AWS ECS task credentials.
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    // AWS EKS Pod Identity agent.
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    // Tencent Cloud metadata.
    IpAddr::V4(Ipv4Addr::new(169, 254, 0, 23)),
    // Alibaba Cloud metadata (in the CGNAT range that `allow_private` opens).
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    // Oracle Cloud legacy metadata.
    IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
    // Azure WireServer (host agent; a public address reachable only from inside Azure).
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
    // AWS IMDS over IPv6 (Nitro).
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    // AWS EKS Pod Identity agent over IPv6.
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
    // GCP metadata over IPv6.
    IpAddr::V6(Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254)),
    // OpenStack metadata over IPv6 (link-local).
    IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0xa9fe, 0xa9fe)),
];

/// A port refused by the [`AddressPolicy`]'s `allowed_ports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("port {port} is not in the allowed ports")]
pub struct PortBlocked {
    /// The URL's port (explicit or the scheme's default).
    pub port: u16,
}

/// Checks a URL's port (explicit or default) against `allowed_ports`.
pub fn check_port(port: u16, policy: &AddressPolicy) -> Result<(), PortBlocked> {
    if policy.allowed_ports.is_empty() || policy.allowed_ports.contains(&port) {
        Ok(())
    } else {
        Err(PortBlocked { port })
    }
}

/// An address refused by the [`AddressPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("address {ip} is refused ({class})")]
pub struct Blocked {
    /// The address.
    pub ip: IpAddr,
    /// Its class.
    pub class: AddressClass,
}

impl Blocked {
    /// The class's low-cardinality label.
    pub fn code(&self) -> &'static str {
        self.class.code()
    }

    /// The DLQ reason for a delivery refused for this: `BLOCKED_URL`.
    pub fn reason(&self) -> ErrorReason {
        ErrorReason::BlockedUrl
    }
}

/// Checks a resolved address against the policy (precedence in the module docs).
pub fn check_ip(ip: IpAddr, allow: &AddressPolicy) -> Result<(), Blocked> {
    // The address as written and the IPv4 address it carries, if any: a rule matching
    // either applies.
    let forms = [Some(ip), embedded_v4(ip).map(IpAddr::V4)];
    let forms = forms.iter().flatten();
    let in_nets = |nets: &[IpNet]| {
        nets.iter()
            .any(|net| forms.clone().any(|form| net.contains(form)))
    };
    if in_nets(&allow.deny_cidrs) {
        return Err(Blocked {
            ip,
            class: AddressClass::Denied,
        });
    }
    let Some(class) = classify_ip(ip) else {
        return Ok(());
    };
    if class == AddressClass::Metadata {
        // Only a network that is the metadata address itself opens it.
        let named = allow.allow_cidrs.iter().any(|net| {
            net.prefix_len() == net.max_prefix_len() && forms.clone().any(|form| net.contains(form))
        });
        return if named {
            Ok(())
        } else {
            Err(Blocked { ip, class })
        };
    }
    let allowed = in_nets(&allow.allow_cidrs)
        || match class {
            AddressClass::Loopback => allow.allow_loopback,
            AddressClass::Private | AddressClass::SharedCgnat => allow.allow_private,
            AddressClass::LinkLocal => allow.allow_link_local,
            AddressClass::Metadata
            | AddressClass::Unspecified
            | AddressClass::Multicast
            | AddressClass::Broadcast
            | AddressClass::Documentation
            | AddressClass::Reserved
            | AddressClass::Denied => false,
        };
    if allowed {
        Ok(())
    } else {
        Err(Blocked { ip, class })
    }
}

/// The special-purpose class of an address, `None` for a public one. IPv4 addresses inside
/// IPv6 (mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the
/// IPv4 address.
pub fn classify_ip(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from_be_bytes(net) & mask
}

fn in_v6(ip: Ipv6Addr, net: u128, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(ip) & mask == net & mask
}

fn is_metadata(ip: IpAddr) -> bool {
    METADATA_ADDRESSES.contains(&ip)
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    use AddressClass as C;
    if is_metadata(IpAddr::V4(ip)) {
        return Some(C::Metadata);
    }
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        ([0, 0, 0, 0], 32, C::Unspecified),
        ([255, 255, 255, 255], 32, C::Broadcast),
        ([0, 0, 0, 0], 8, C::Reserved),
        ([127, 0, 0, 0], 8, C::Loopback),
        ([10, 0, 0, 0], 8, C::Private),
        ([172, 16, 0, 0], 12, C::Private),
        ([192, 168, 0, 0], 16, C::Private),
        ([100, 64, 0, 0], 10, C::SharedCgnat),
        ([169, 254, 0, 0], 16, C::LinkLocal),
        ([224, 0, 0, 0], 4, C::Multicast),
        ([240, 0, 0, 0], 4, C::Reserved),
        ([192, 0, 0, 0], 24, C::Reserved),
        ([192, 88, 99, 0], 24, C::Reserved),
        ([198, 18, 0, 0], 15, C::Reserved),
        ([192, 0, 2, 0], 24, C::Documentation),
        ([198, 51, 100, 0], 24, C::Documentation),
        ([203, 0, 113, 0], 24, C::Documentation),
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, class)| *class)
}

/// The IPv4 address carried inside an IPv6 one (mapped, NAT64 or 6to4).
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else {
        return None;
    };
    let bits = u128::from(v6);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if let Some(v4) = v6.to_ipv4_mapped() {
        Some(v4)
    } else if in_v6(v6, 0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96) {
        Some(low32)
    } else if in_v6(v6, 0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
        Some(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32))
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    use AddressClass as C;
    if let Some(v4) = embedded_v4(IpAddr::V6(ip)) {
        return classify_v4(v4);
    }
    if is_metadata(IpAddr::V6(ip)) {
        return Some(C::Metadata);
    }
    const TABLE: &[(u128, u32, AddressClass)] = &[
        (0, 128, C::Unspecified),
        (1, 128, C::Loopback),
        (0, 96, C::Reserved),
        (0x0064_ff9b_0001_0000_0000_0000_0000_0000, 48, C::Reserved),
        (0x0100_0000_0000_0000_0000_0000_0000_0000, 64, C::Reserved),
        (
            0x2001_0db8_0000_0000_0000_0000_0000_0000,
            32,
            C::Documentation,
        ),
        (0x2001_0000_0000_0000_0000_0000_0000_0000, 23, C::Reserved),
        (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7, C::Private),
        (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10, C::LinkLocal),
        (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, C::Private),
        (0xff00_0000_0000_0000_0000_0000_0000_0000, 8, C::Multicast),
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, *net, *prefix))
        .map(|(_, _, class)| *class)
}

#[cfg(test)]
mod tests;
