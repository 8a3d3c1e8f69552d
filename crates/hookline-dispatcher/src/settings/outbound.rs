//! The `[outbound]` section's conversion into the core [`AddressPolicy`]: networks parsed
//! (host bits refused), ports checked, each refusal naming its field.

use hookline_core::url_guard::AddressPolicy;
use ipnet::IpNet;

use crate::config::OutboundConfig;
use crate::error::{DispatchError, Result};

impl OutboundConfig {
    /// The validated policy; a bad network or port is refused naming it
    /// (`outbound.allow_cidrs[1]`).
    pub(crate) fn to_policy(&self) -> Result<AddressPolicy> {
        for (index, port) in self.allowed_ports.iter().enumerate() {
            if *port == 0 {
                return Err(DispatchError::config(
                    &format!("outbound.allowed_ports[{index}]"),
                    "must be 1 to 65535",
                ));
            }
        }
        Ok(AddressPolicy {
            allow_loopback: self.allow_loopback,
            allow_private: self.allow_private,
            allow_link_local: self.allow_link_local,
            allow_cidrs: networks("outbound.allow_cidrs", &self.allow_cidrs)?,
            deny_cidrs: networks("outbound.deny_cidrs", &self.deny_cidrs)?,
            allowed_ports: self.allowed_ports.clone(),
        })
    }
}

/// Parses CIDRs (a bare address is that one address). Host bits set below the prefix are
/// refused: `10.1.2.3/8` is more likely a typo than a wish for all of 10/8.
fn networks(field: &str, texts: &[String]) -> Result<Vec<IpNet>> {
    texts
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let at = || format!("{field}[{index}]");
            let trimmed = text.trim();
            let net = match trimmed.parse::<IpNet>() {
                Ok(net) => net,
                Err(_) => match trimmed.parse::<std::net::IpAddr>() {
                    Ok(ip) => IpNet::from(ip),
                    Err(_) => {
                        return Err(DispatchError::config(
                            &at(),
                            format!("{text:?} is not a CIDR such as 10.0.0.0/8 or fd00::/8"),
                        ));
                    }
                },
            };
            if net.trunc() != net {
                return Err(DispatchError::config(
                    &at(),
                    format!("{text:?} has host bits set; did you mean {}?", net.trunc()),
                ));
            }
            Ok(net)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use figment::Figment;
    use figment::providers::{Format, Serialized, Toml};
    use hookline_core::url_guard::check_ip;

    use crate::config::DispatcherConfig;

    fn from_toml(toml: &str) -> DispatcherConfig {
        Figment::from(Serialized::defaults(DispatcherConfig::default()))
            .merge(Toml::string(toml))
            .extract()
            .expect("the keys exist")
    }

    #[test]
    fn cidrs_and_ports_reach_the_policy() {
        let config = from_toml(
            "[outbound]\nallow_loopback = true\nallow_cidrs = [\"10.1.0.0/16\", \"169.254.169.254\"]\n\
             deny_cidrs = [\"127.0.0.2/32\"]\nallowed_ports = [443, 8443]\n",
        );
        let policy = config.into_settings().expect("valid").address_policy;
        assert_eq!(policy.allowed_ports, [443, 8443]);
        check_ip("10.1.2.3".parse().expect("ip"), &policy).expect("allowed");
        check_ip("169.254.169.254".parse().expect("ip"), &policy).expect("named");
        check_ip("127.0.0.1".parse().expect("ip"), &policy).expect("loopback");
        assert!(check_ip("127.0.0.2".parse().expect("ip"), &policy).is_err());
    }

    #[test]
    fn bad_networks_and_ports_name_their_field() {
        let cases = [
            (
                "allow_cidrs = [\"10.0.0.0/8\", \"10.0.0/8\"]",
                "outbound.allow_cidrs[1]",
            ),
            ("deny_cidrs = [\"fd00::/300\"]", "outbound.deny_cidrs[0]"),
            ("deny_cidrs = [\"10.1.2.3/8\"]", "outbound.deny_cidrs[0]"),
            ("allowed_ports = [443, 0]", "outbound.allowed_ports[1]"),
        ];
        for (line, field) in cases {
            let error = from_toml(&format!("[outbound]\n{line}\n"))
                .into_settings()
                .expect_err(line)
                .to_string();
            assert!(error.contains(field), "{line}: {error}");
        }
    }
}
