//! Outside input never panics the config contract: TOML made of the known keys with values
//! of any type (0, the largest integers, negative numbers, strings, lists), and TOML that is
//! hardly TOML, parsed through figment and converted. Settings that convert can be used:
//! each count fits the semaphore it sizes.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use tokio::sync::Semaphore;

use super::*;

/// A proptest config of `default_cases` cases, or `PROPTEST_CASES` when it is set.
pub(crate) fn config(default_cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    proptest::test_runner::Config {
        cases,
        ..proptest::test_runner::Config::default()
    }
}

/// Every key of the file, by table (`""` for the top level).
const KEYS: &[(&str, &str)] = &[
    ("", "group_id"),
    ("", "dispatcher_id"),
    ("", "endpoints_file"),
    ("", "shutdown_grace_ms"),
    ("", "dlq_compatibility"),
    ("kafka", "bootstrap_servers"),
    ("kafka.properties", "\"message.max.bytes\""),
    ("registry", "url"),
    ("registry", "timeout_ms"),
    ("topics", "events"),
    ("topics", "dlq"),
    ("topics", "endpoints"),
    ("topics", "retry_tiers"),
    ("retry", "strategy"),
    ("retry", "base_ms"),
    ("retry", "cap_ms"),
    ("retry", "max_attempts"),
    ("retry", "max_age_ms"),
    ("status", "retryable_4xx"),
    ("status", "non_retryable_4xx"),
    ("status", "non_retryable_5xx"),
    ("http", "timeout_ms"),
    ("http", "max_payload_bytes"),
    ("http", "max_response_bytes"),
    ("http", "user_agent"),
    ("http", "ca_file"),
    ("concurrency", "max_in_flight"),
    ("concurrency", "max_pending"),
    ("concurrency", "per_endpoint"),
    ("concurrency", "per_endpoint_queue"),
    ("concurrency", "slow_after_ms"),
    ("concurrency", "max_uncommitted_per_partition"),
    ("concurrency", "max_hold_ms"),
    ("breaker", "failure_rate_percent"),
    ("breaker", "minimum_requests"),
    ("breaker", "window_ms"),
    ("breaker", "open_ms"),
    ("breaker", "half_open_probes"),
    ("outbound", "allow_loopback"),
    ("outbound", "allow_private"),
    ("outbound", "allow_link_local"),
    ("outbound", "allow_cidrs"),
    ("outbound", "deny_cidrs"),
    ("outbound", "allowed_ports"),
    ("admin", "listen"),
    ("ledger", "redis_url"),
    ("ledger", "ttl_s"),
    ("ledger", "key_prefix"),
    ("ledger", "timeout_ms"),
    ("operator_webhooks", "endpoint_id"),
    ("operator_webhooks", "events"),
    ("operator_webhooks", "min_interval_ms"),
    ("operator_webhooks", "max_per_minute"),
];

fn string(text: &str) -> String {
    // A TOML basic string is a JSON string, escapes included.
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A TOML value of any type, edges first.
fn value() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(2),
        Just(100),
        Just(101),
        Just(255),
        Just(256),
        Just(i64::from(u32::MAX)),
        Just(i64::from(u32::MAX) + 1),
        Just(i64::MAX),
        Just(i64::MIN),
        any::<i64>(),
    ]
    .prop_map(|n| n.to_string());
    let text = prop_oneof![
        Just(String::new()),
        Just("5s".to_owned()),
        Just("0ms".to_owned()),
        Just("99999999999999999999h".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("-1".to_owned()),
        Just("exponential".to_owned()),
        Just("BACKWARD".to_owned()),
        Just("127.0.0.1:0".to_owned()),
        Just("[::1]:99999".to_owned()),
        Just("redis://127.0.0.1:6379/99999999999".to_owned()),
        Just("rediss://:pw@host:1".to_owned()),
        Just("http://x".to_owned()),
        any::<String>(),
    ]
    .prop_map(|s| string(&s));
    let list = vec(
        prop_oneof![
            Just("\"5s\"".to_owned()),
            Just("\"1h\"".to_owned()),
            Just("\"200ms\"".to_owned()),
            Just("\"0s\"".to_owned()),
            Just("\"5000000000000000h\"".to_owned()),
            Just("404".to_owned()),
            Just("503".to_owned()),
            Just("70000".to_owned()),
            Just("-1".to_owned()),
        ],
        0..6,
    )
    .prop_map(|items| format!("[{}]", items.join(", ")));
    prop_oneof![
        4 => number,
        1 => Just("18446744073709551615".to_owned()),
        1 => prop_oneof![Just("1.5"), Just("nan"), Just("-inf"), Just("1e400")]
            .prop_map(str::to_owned),
        1 => prop_oneof![Just("true"), Just("false")].prop_map(str::to_owned),
        3 => text,
        2 => list,
        1 => Just("{}".to_owned()),
        1 => Just("1979-05-27T07:32:00Z".to_owned()),
    ]
}

/// A file of known keys (and a few unknown ones), grouped by table.
fn file() -> impl Strategy<Value = String> {
    let entry = prop_oneof![
        8 => (select(KEYS), value()).prop_map(|((table, key), v)| (table.to_owned(), key.to_owned(), v)),
        1 => ("[a-z]{1,8}", "[a-z_]{1,12}", value()),
    ];
    vec(entry, 0..12).prop_map(|entries| {
        let mut tables: Vec<(String, Vec<String>)> = Vec::new();
        for (table, key, value) in entries {
            let line = format!("{key} = {value}");
            match tables.iter_mut().find(|(t, _)| *t == table) {
                Some((_, lines)) => lines.push(line),
                None => tables.push((table, vec![line])),
            }
        }
        // Top-level keys first: after a table header they would belong to the table.
        tables.sort_by_key(|(table, _)| !table.is_empty());
        let mut text = String::new();
        for (table, lines) in tables {
            if !table.is_empty() {
                text.push_str(&format!("[{table}]\n"));
            }
            for line in lines {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    })
}

fn check(toml: &str) {
    let config: Result<DispatcherConfig, _> =
        Figment::from(Serialized::defaults(DispatcherConfig::default()))
            .merge(Toml::string(toml))
            .extract();
    let Ok(config) = config else {
        return;
    };
    if let Ok(settings) = config.into_settings() {
        // What start-up does with the counts.
        for permits in [
            settings.max_pending,
            settings.max_in_flight,
            settings.per_endpoint_queue,
        ] {
            let _semaphore = Semaphore::new(permits);
        }
    }
}

/// Each key alone with each edge value, all of them.
#[test]
fn every_key_alone_with_every_edge_value() {
    let edges = [
        "0",
        "1",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "4294967296",
        "18446744073709551615",
        "1e400",
        "nan",
        "\"\"",
        "\"x\"",
        "[]",
        "[\"0s\"]",
        "[\"99999999999999999999h\"]",
        "{}",
    ];
    for (table, key) in KEYS {
        for value in edges {
            let line = format!("{key} = {value}\n");
            if table.is_empty() {
                check(&line);
            } else {
                check(&format!("[{table}]\n{line}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn files_of_known_keys_with_any_values(toml in file()) {
        check(&toml);
    }

    #[test]
    fn any_text(toml in prop_oneof![any::<String>(), "[\\[\\]a-z_.=\" 0-9\n-]{0,80}"]) {
        check(&toml);
    }
}
