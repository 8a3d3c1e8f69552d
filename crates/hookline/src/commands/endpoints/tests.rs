use std::collections::BTreeMap;

use clap::Parser;

use super::*;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    put: PutArgs,
}

/// The config `endpoints put ep --url … --secret … <args>` writes.
fn put(args: &[&str]) -> anyhow::Result<EndpointConfig> {
    let base = [
        "put",
        "ep",
        "--url",
        "https://a.example/hook",
        "--secret",
        SECRET,
    ];
    let cli = Cli::try_parse_from([&base[..], args].concat()).expect("valid flags");
    config_of(&cli.put, Some(&[])).map(|(config, _)| config)
}

#[test]
fn put_builds_the_tenant_and_its_subscription_from_comma_lists() {
    let config = put(&[
        "--tenant",
        "acme",
        "--types",
        "invoice.*, customer.created",
        "--channels",
        "eu,beta",
        "--description",
        "billing sync",
    ])
    .expect("valid");
    assert_eq!(config.tenant.as_deref(), Some("acme"));
    assert_eq!(config.event_types, ["invoice.*", "customer.created"]);
    assert_eq!(config.channels, ["eu", "beta"]);
    assert_eq!(config.description.as_deref(), Some("billing sync"));
    let repeated = put(&["--tenant", "acme", "--types", "a.b", "--types", "*"]).expect("valid");
    assert_eq!(repeated.event_types, ["a.b", "*"]);
    let plain = put(&[]).expect("valid");
    assert_eq!((plain.tenant, plain.event_types.len()), (None, 0));
}

#[test]
fn bad_subscriptions_are_refused_naming_the_flag() {
    let message = |args: &[&str]| put(args).expect_err("refused").to_string();
    let text = message(&["--tenant", "acme", "--types", "invoice.*,invoice..paid"]);
    assert!(
        text.starts_with("--types: item 2 `invoice..paid`: ") && text.contains("empty dot"),
        "{text}"
    );
    let text = message(&["--tenant", "acme", "--types", "inv*"]);
    assert!(text.starts_with("--types: item 1 `inv*`"), "{text}");
    let text = message(&["--tenant", "acme", "--types", "a,"]);
    assert!(text.starts_with("--types: item 2 ``: "), "{text}");
    let text = message(&["--tenant", "acme", "--channels", "eu,b*"]);
    assert!(text.starts_with("--channels: item 2 `b*`"), "{text}");
    assert_eq!(message(&["--types", "a.b"]), "--types: needs --tenant");
    assert_eq!(message(&["--channels", "eu"]), "--channels: needs --tenant");
    assert!(message(&["--tenant", ""]).starts_with("--tenant: "));
    let long = "x".repeat(2_000);
    assert!(message(&["--description", &long]).starts_with("--description: "));
}

#[test]
fn the_list_shows_tenant_types_and_channels() {
    let mut table = list();
    let subscribed = EndpointConfig {
        tenant: Some("acme".into()),
        event_types: vec!["invoice.*".into(), "customer.created".into()],
        channels: vec!["eu".into()],
        ..EndpointConfig::new("https://b.example/hook", vec![SECRET.into()])
    };
    let every_type = EndpointConfig {
        tenant: Some("globex".into()),
        ..EndpointConfig::new("https://c.example/hook", vec![SECRET.into()])
    };
    table.endpoints.insert("ep_b".into(), subscribed);
    table.endpoints.insert("ep_c".into(), every_type);
    let text = table_text(&table);
    let lines: Vec<&str> = text.lines().collect();
    let column = |name: &str| lines[0].find(name).expect("a column");
    assert!(lines[0].starts_with("ID    ENABLED  URL"), "{text}");
    assert_eq!(
        lines[1].find("  -  ").map(|i| i + 2),
        Some(column("TENANT"))
    );
    assert_eq!(lines[2].find("acme"), Some(column("TENANT")), "{text}");
    assert_eq!(
        lines[2].find("invoice.*,customer.created"),
        Some(column("TYPES"))
    );
    assert_eq!(lines[2].find("eu "), Some(column("CHANNELS")));
    assert_eq!(lines[3].find("* "), Some(column("TYPES")), "{text}");
    let json = table_json(&table);
    assert_eq!(json[1]["tenant"], "acme");
    assert_eq!(json[1]["event_types"][0], "invoice.*");
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn list() -> EndpointList {
    let config = EndpointConfig {
        max_concurrency: Some(4),
        ..EndpointConfig::new("https://a.example/hook?token=t0p", vec![SECRET.into()])
    };
    EndpointList {
        endpoints: BTreeMap::from([("ep_a".to_owned(), config)]),
        ..EndpointList::default()
    }
}

#[test]
fn listings_never_show_secrets_or_query_strings() {
    let text = table_text(&list());
    let json = table_json(&list()).to_string();
    for out in [&text, &json] {
        assert!(!out.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{out}");
        assert!(!out.contains("t0p"), "{out}");
        assert!(out.contains("whsec_…LaSw"), "{out}");
    }
    assert!(text.starts_with("ID    ENABLED  URL"), "{text}");
    assert!(text.contains("concurrency=4"), "{text}");
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(parsed[0]["id"], "ep_a");
    assert_eq!(parsed[0]["max_concurrency"], 4);
}

#[test]
fn listings_show_public_keys_never_signing_keys() {
    const WHSK: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const WHPK: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    let mut table = list();
    let keyed = EndpointConfig {
        signing_keys: vec![WHSK.into()],
        ..EndpointConfig::new("https://k.example/hook", Vec::new())
    };
    table.endpoints.insert("ep_k".into(), keyed);
    let text = table_text(&table);
    let json = table_json(&table);
    for out in [text.clone(), json.to_string()] {
        assert!(!out.contains(&WHSK[5..40]), "{out}");
        assert!(out.contains(WHPK), "{out}");
    }
    let lines: Vec<&str> = text.lines().collect();
    let column = lines[0].find("PUBLIC_KEYS").expect("a column");
    assert_eq!(lines[2].find(WHPK), Some(column), "{text}");
    assert_eq!(json[1]["public_keys"][0], WHPK);
    assert!(json[1].get("signing_keys").is_none());
    assert_eq!(json[0]["public_keys"].as_array().map(Vec::len), Some(0));
}

#[test]
fn credential_flags_read_files_and_references_and_list_shows_only_hints() {
    let pki = hookline_testkit::TestPki::new("cli test CA");
    let client = pki.client("cli-client");
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = (dir.path().join("client.pem"), dir.path().join("client.key"));
    std::fs::write(&cert, &client.certificate_pem).expect("write");
    std::fs::write(&key, &client.key_pem).expect("write");
    let token = "tok_cli_3f9a8b7c6d5e4f3a2b1c";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).expect("write");
    let reference = format!("${{file:{}}}", token_file.display());
    let config = put(&[
        "--client-cert",
        cert.to_str().expect("utf-8"),
        "--client-key",
        key.to_str().expect("utf-8"),
        "--bearer-token",
        &reference,
    ])
    .expect("valid");
    assert_eq!(
        config.client_key.as_ref().map(|k| k.expose().to_owned()),
        Some(client.key_pem.clone())
    );
    assert_eq!(
        config
            .auth
            .as_ref()
            .map(|a| a.header_value().expose().to_owned()),
        Some(format!("Bearer {token}"))
    );
    let mut table = list();
    table.endpoints.insert("ep_m".into(), config);
    let text = table_text(&table);
    let json = table_json(&table).to_string();
    let key_body = client
        .key_pem
        .lines()
        .nth(1)
        .expect("a base64 line")
        .to_owned();
    for out in [&text, &json] {
        assert!(!out.contains(token), "{out}");
        assert!(!out.contains(&key_body), "{out}");
    }
    assert!(text.contains("mtls,bearer(…2b1c)"), "{text}");
    // A key of another certificate, and a custom Authorization header, name their flag.
    let other = pki.client("other");
    std::fs::write(&key, &other.key_pem).expect("write");
    let error = put(&[
        "--client-cert",
        cert.to_str().expect("utf-8"),
        "--client-key",
        key.to_str().expect("utf-8"),
    ])
    .expect_err("mismatched key")
    .to_string();
    assert!(error.starts_with("--client-key: "), "{error}");
    assert!(
        !error.contains(other.key_pem.lines().nth(1).expect("line")),
        "{error}"
    );
    let error = put(&[
        "--bearer-token",
        token,
        "--header",
        "Authorization=Bearer x",
    ])
    .expect_err("conflict")
    .to_string();
    assert!(error.starts_with("--header: "), "{error}");
    let error = put(&["--basic-auth", "${env:HOOKLINE_NO_SUCH_VAR_7Q}"])
        .expect_err("unset")
        .to_string();
    assert!(error.contains("HOOKLINE_NO_SUCH_VAR_7Q"), "{error}");
}

#[test]
fn short_secrets_show_nothing() {
    assert_eq!(secret_hint("whsec_abc"), "whsec_…");
}

#[test]
fn header_values_are_shown_as_hints() {
    let mut table = list();
    let config = table.endpoints.get_mut("ep_a").expect("ep_a");
    config.headers.insert(
        "Authorization".into(),
        "Bearer tok_live_TOPSECRET_9f3a".into(),
    );
    config.headers.insert("X-Team".into(), "TOPSECRET".into());
    let json = table_json(&table);
    let text = json.to_string();
    assert!(!text.contains("TOPSECRET"), "{text}");
    assert_eq!(json[0]["headers"]["Authorization"], "…9f3a");
    assert_eq!(
        json[0]["headers"]["X-Team"], "…",
        "nothing of a short value"
    );
    assert!(!table_text(&table).contains("TOPSECRET"));
}

#[test]
fn put_can_allow_url_overrides() {
    assert!(!put(&[]).expect("valid").allow_url_override);
    let config = put(&["--allow-url-override"]).expect("valid");
    assert!(config.allow_url_override);
    let text = table_text(&EndpointList {
        endpoints: BTreeMap::from([("ep".to_owned(), config)]),
        ..EndpointList::default()
    });
    assert!(text.contains("url-override"), "{text}");
}

#[test]
fn url_and_header_values_may_come_from_references_kept_off_the_command_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (url_file, key_file) = (dir.path().join("url"), dir.path().join("key"));
    std::fs::write(&url_file, "https://b.example/hook?token=tok_URLSECRET\n").expect("write");
    std::fs::write(&key_file, "key_HEADERSECRET").expect("write");
    let url = format!("${{file:{}}}", url_file.display());
    let header = format!("X-Api-Key=${{file:{}}}", key_file.display());
    let args = [
        "put", "ep", "--url", &url, "--secret", SECRET, "--header", &header,
    ];
    let cli = Cli::try_parse_from(args).expect("valid flags");
    let (config, _) = config_of(&cli.put, Some(&[])).expect("valid");
    assert_eq!(config.url, "https://b.example/hook?token=tok_URLSECRET");
    assert_eq!(config.headers["X-Api-Key"], "key_HEADERSECRET");
    let missing = put(&["--header", "X-Api-Key=${env:HOOKLINE_NO_SUCH_VAR_3K}"])
        .expect_err("unset")
        .to_string();
    assert!(
        missing.starts_with("--header X-Api-Key: ") && missing.contains("HOOKLINE_NO_SUCH_VAR_3K"),
        "{missing}"
    );
}
