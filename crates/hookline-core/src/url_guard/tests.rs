//! Tests of the SSRF guard.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn class(s: &str) -> Option<AddressClass> {
    classify_ip(ip(s))
}

#[test]
fn urls() {
    let t = check_url("https://Example.COM/hook?x=1").expect("valid");
    assert_eq!(t.scheme, Scheme::Https);
    assert_eq!(t.host, TargetHost::Domain("example.com".into()));
    assert_eq!(t.port, 443);
    assert_eq!(t.literal_ip(), None);
    let t = check_url("http://127.0.0.1:8080/").expect("valid");
    assert_eq!((t.scheme, t.port), (Scheme::Http, 8080));
    assert_eq!(t.literal_ip(), Some(ip("127.0.0.1")));
    let t = check_url("http://[::1]/").expect("valid");
    assert_eq!(t.literal_ip(), Some(ip("::1")));
    // WHATWG numeric hosts are normalized, so the IP check sees the real address.
    let t = check_url("http://0x7f.1/").expect("valid");
    assert_eq!(t.literal_ip(), Some(ip("127.0.0.1")));
}

#[test]
fn refused_urls() {
    assert!(matches!(check_url("not a url"), Err(UrlError::Parse(_))));
    assert_eq!(
        check_url("ftp://example.com/"),
        Err(UrlError::Scheme {
            scheme: "ftp".into()
        })
    );
    assert!(matches!(
        check_url("file:///etc/passwd"),
        Err(UrlError::Scheme { .. })
    ));
    assert_eq!(
        check_url("https://user:pw@example.com/"),
        Err(UrlError::UserInfo)
    );
    assert_eq!(
        check_url("https://user@example.com/"),
        Err(UrlError::UserInfo)
    );
    let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
    assert!(matches!(check_url(&long), Err(UrlError::TooLong { .. })));
    assert_eq!(UrlError::UserInfo.code(), "userinfo");
    assert_eq!(UrlError::NoHost.reason(), ErrorReason::BlockedUrl);
}

#[test]
fn redaction() {
    assert_eq!(
        redact_url("https://u:p@example.com:8443/a/b?token=s3cret#frag"),
        "https://example.com:8443/a/b?redacted"
    );
    assert_eq!(redact_url("https://example.com/a"), "https://example.com/a");
    assert_eq!(redact_url("::"), "<unparseable url>");
}

#[test]
fn v4_classes() {
    use AddressClass as C;
    let cases = [
        ("127.0.0.1", C::Loopback),
        ("127.255.255.254", C::Loopback),
        ("10.1.2.3", C::Private),
        ("172.16.0.1", C::Private),
        ("172.31.255.255", C::Private),
        ("192.168.1.1", C::Private),
        ("100.64.0.1", C::SharedCgnat),
        ("100.127.255.255", C::SharedCgnat),
        ("169.254.1.1", C::LinkLocal),
        ("169.254.169.254", C::Metadata),
        ("0.0.0.0", C::Unspecified),
        ("0.1.2.3", C::Reserved),
        ("224.0.0.1", C::Multicast),
        ("239.255.255.250", C::Multicast),
        ("255.255.255.255", C::Broadcast),
        ("240.0.0.1", C::Reserved),
        ("198.18.0.1", C::Reserved),
        ("192.0.2.7", C::Documentation),
    ];
    for (addr, expected) in cases {
        assert_eq!(class(addr), Some(expected), "{addr}");
    }
    for public in [
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "172.15.255.255",
        "93.184.216.34",
    ] {
        assert_eq!(class(public), None, "{public}");
    }
}

#[test]
fn v6_classes() {
    use AddressClass as C;
    let cases = [
        ("::1", C::Loopback),
        ("::", C::Unspecified),
        ("fc00::1", C::Private),
        ("fd12:3456::1", C::Private),
        ("fe80::1", C::LinkLocal),
        ("ff02::1", C::Multicast),
        ("2001:db8::1", C::Documentation),
        ("fd00:ec2::254", C::Metadata),
        ("::ffff:127.0.0.1", C::Loopback),
        ("::ffff:10.0.0.1", C::Private),
        ("::ffff:169.254.169.254", C::Metadata),
        ("64:ff9b::a9fe:a9fe", C::Metadata),
        ("2002:7f00:1::", C::Loopback),
        ("::127.0.0.1", C::Reserved),
    ];
    for (addr, expected) in cases {
        assert_eq!(class(addr), Some(expected), "{addr}");
    }
    for public in [
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
    ] {
        assert_eq!(class(public), None, "{public}");
    }
}

#[test]
fn default_policy_refuses_everything_non_public() {
    let deny = AddressPolicy::default();
    check_ip(ip("8.8.8.8"), &deny).expect("public");
    check_ip(ip("2606:4700:4700::1111"), &deny).expect("public");
    let blocked = check_ip(ip("127.0.0.1"), &deny).expect_err("loopback");
    assert_eq!(blocked.code(), "loopback");
    assert_eq!(blocked.reason(), ErrorReason::BlockedUrl);
    assert_eq!(
        blocked.to_string(),
        "address 127.0.0.1 is refused (loopback)"
    );
    assert_eq!(
        check_ip(ip("169.254.169.254"), &deny).map_err(|b| b.code()),
        Err("metadata")
    );
    assert_eq!(
        check_ip(ip("::ffff:192.168.0.1"), &deny).map_err(|b| b.code()),
        Err("private")
    );
}

#[test]
fn policy_allowances() {
    let allow = AddressPolicy {
        allow_loopback: true,
        allow_private: true,
        allow_link_local: true,
        ..AddressPolicy::default()
    };
    for ok in [
        "127.0.0.1",
        "::1",
        "10.0.0.1",
        "100.64.0.1",
        "fd00::1",
        "169.254.1.1",
        "fe80::1",
    ] {
        check_ip(ip(ok), &allow).expect(ok);
    }
    // Flags never open the metadata service or unroutable space.
    for refused in [
        "169.254.169.254",
        "fd00:ec2::254",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
    ] {
        assert!(check_ip(ip(refused), &allow).is_err(), "{refused}");
    }
    let cidrs: AddressPolicy =
        serde_json::from_str(r#"{"allow_cidrs":["10.1.2.0/24","169.254.169.254/32"]}"#)
            .expect("parse");
    check_ip(ip("10.1.2.3"), &cidrs).expect("in an allowed network");
    check_ip(ip("::ffff:10.1.2.3"), &cidrs).expect("mapped into an allowed network");
    check_ip(ip("169.254.169.254"), &cidrs).expect("explicitly allowed");
    assert!(check_ip(ip("10.1.3.1"), &cidrs).is_err());
    assert!(serde_json::from_str::<AddressPolicy>(r#"{"allow_all":true}"#).is_err());
}

/// Every cloud metadata address, in the forms an attacker may write it.
fn metadata_forms() -> Vec<IpAddr> {
    let mut forms = Vec::new();
    for addr in METADATA_ADDRESSES {
        forms.push(*addr);
        if let IpAddr::V4(v4) = addr {
            let bits = u32::from(*v4);
            forms.push(IpAddr::V6(v4.to_ipv6_mapped()));
            forms.push(IpAddr::V6(Ipv6Addr::from(
                0x0064_ff9b_0000_0000_0000_0000_0000_0000 | u128::from(bits),
            )));
            forms.push(IpAddr::V6(Ipv6Addr::from(
                0x2002_0000_0000_0000_0000_0000_0000_0000 | (u128::from(bits) << 80),
            )));
        }
    }
    forms
}

#[test]
fn metadata_stays_blocked_whatever_the_flags_and_wide_networks() {
    let open = AddressPolicy {
        allow_loopback: true,
        allow_private: true,
        allow_link_local: true,
        allow_cidrs: [
            "0.0.0.0/0",
            "::/0",
            "169.254.0.0/16",
            "100.64.0.0/10",
            "fd00::/8",
        ]
        .iter()
        .map(|net| net.parse().expect("net"))
        .collect(),
        ..AddressPolicy::default()
    };
    for addr in [
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "100.100.100.200",
        "192.0.0.192",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "fe80::a9fe:a9fe",
    ] {
        assert_eq!(class(addr), Some(AddressClass::Metadata), "{addr}");
    }
    for form in metadata_forms() {
        assert_eq!(
            check_ip(form, &open).map_err(|b| b.code()),
            Err("metadata"),
            "{form}"
        );
    }
    // Numeric URL forms normalise to the same address, which is then refused.
    for url in [
        "http://2852039166/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[64:ff9b::a9fe:a9fe]/",
    ] {
        let target = check_url(url).expect(url);
        let ip = target.literal_ip().expect("an address");
        assert!(check_ip(ip, &open).is_err(), "{url}");
    }
    // Its neighbours are ordinary link-local and CGNAT addresses again.
    check_ip(ip("169.254.169.253"), &open).expect("link-local");
    check_ip(ip("100.100.100.201"), &open).expect("cgnat");
}

#[test]
fn a_metadata_address_opens_only_when_named_exactly() {
    let named: AddressPolicy =
        serde_json::from_str(r#"{"allow_cidrs":["169.254.169.254/32","fd00:ec2::254/128"]}"#)
            .expect("parse");
    check_ip(ip("169.254.169.254"), &named).expect("named");
    check_ip(ip("::ffff:169.254.169.254"), &named).expect("named, mapped");
    check_ip(ip("64:ff9b::a9fe:a9fe"), &named).expect("named, NAT64");
    check_ip(ip("fd00:ec2::254"), &named).expect("named v6");
    // The others stay blocked.
    for other in ["169.254.170.2", "fd00:ec2::23", "100.100.100.200"] {
        assert!(check_ip(ip(other), &named).is_err(), "{other}");
    }
}

#[test]
fn deny_cidrs_win_over_everything() {
    let policy: AddressPolicy = serde_json::from_str(
        r#"{"allow_loopback":true,"allow_cidrs":["10.0.0.0/8","169.254.169.254/32"],
            "deny_cidrs":["127.0.0.2/32","10.9.0.0/16","8.8.8.0/24","169.254.169.254/32"]}"#,
    )
    .expect("parse");
    check_ip(ip("127.0.0.1"), &policy).expect("loopback allowed");
    check_ip(ip("10.1.0.1"), &policy).expect("in allow_cidrs");
    check_ip(ip("8.8.4.4"), &policy).expect("public");
    for denied in [
        "127.0.0.2",
        "::ffff:127.0.0.2",
        "10.9.1.1",
        "64:ff9b::a09:101",
        "8.8.8.8",
        "169.254.169.254",
    ] {
        assert_eq!(
            check_ip(ip(denied), &policy).map_err(|b| b.code()),
            Err("denied"),
            "{denied}"
        );
    }
}

#[test]
fn ports_are_checked_when_restricted() {
    let any = AddressPolicy::default();
    check_port(8080, &any).expect("any port by default");
    let policy = AddressPolicy {
        allowed_ports: vec![443, 8443],
        ..AddressPolicy::default()
    };
    let port = |url: &str| check_url(url).expect("url").port;
    check_port(port("https://example.com/"), &policy).expect("default 443");
    check_port(port("https://example.com:8443/"), &policy).expect("explicit");
    assert_eq!(
        check_port(port("http://example.com/"), &policy),
        Err(PortBlocked { port: 80 })
    );
    assert!(check_port(port("https://example.com:22/"), &policy).is_err());
}
