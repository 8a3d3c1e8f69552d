//! Filling the endpoint table: from the compacted endpoints topic (read to its end before
//! deliveries start, then followed: `crate::compacted`), or from a static file for small
//! setups.

use std::path::Path;

use hookline_core::endpoint::{EndpointConfig, from_json_slice};

use super::table::EndpointTable;
use crate::compacted::Records;
use crate::error::{DispatchError, Result};

/// Loads every endpoint of a file; any invalid entry stops start-up with its id and reason.
pub fn load_file(path: &Path, table: &EndpointTable) -> Result<usize> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| DispatchError::EndpointsFile {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.into()))?;
    let json = path.extension().is_some_and(|ext| ext == "json");
    let file = super::file::parse(&text, json).map_err(|e| failed(e.into()))?;
    let count = file.endpoints.len();
    for (id, config) in file.endpoints {
        table
            .upsert(id.as_str(), config)
            .map_err(|e| failed(e.into()))?;
    }
    Ok(count)
}

impl Records for EndpointTable {
    const WHAT: &'static str = "endpoints";

    fn apply(&self, partition: i32, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        apply(self, key, value);
        self.read_to(partition, offset + 1);
    }

    fn held(&self) -> usize {
        self.len()
    }
}

/// Applies one record of the endpoints topic: a config replaces, a tombstone removes.
fn apply(table: &EndpointTable, key: Option<&[u8]>, value: Option<&[u8]>) {
    let Some(id) = key.and_then(|key| std::str::from_utf8(key).ok()) else {
        tracing::warn!("skipping an endpoints record without a UTF-8 key");
        return;
    };
    match value {
        None => {
            table.remove(id);
            tracing::info!(endpoint = id, "endpoint removed");
        }
        // The error names the field, never its value (serde_json's own message quotes it).
        Some(bytes) => match from_json_slice::<EndpointConfig>(bytes) {
            Ok(config) => match table.upsert(id, config) {
                Ok(()) => tracing::info!(endpoint = id, "endpoint updated"),
                Err(error) => tracing::warn!(endpoint = id, %error, "endpoint config refused"),
            },
            Err(error) => tracing::warn!(endpoint = id, %error, "endpoint config unreadable"),
        },
    }
}

/// Outside input never panics the endpoints topic reader: records of any key and value,
/// valid configs with edge values (rates, concurrency, retry overrides), and tombstones,
/// applied in any order; every endpoint taken then decides a retry.
#[cfg(test)]
mod fuzz {
    use hookline_core::breaker::BreakerPolicy;
    use hookline_core::policy::RetryConfig;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::time::Duration;

    use super::*;
    use crate::config::fuzz::config;
    use crate::endpoints::EndpointDefaults;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn table() -> EndpointTable {
        EndpointTable::new(EndpointDefaults {
            max_concurrency: 16,
            max_concurrency_share: 64,
            max_cap: Duration::from_secs(3600),
            timeout: Duration::from_secs(10),
            retry: RetryConfig::default().to_policy().expect("valid"),
            slow_after: Duration::from_secs(1),
            breaker: BreakerPolicy::default(),
            clients: crate::http::ClientFactory::new(
                std::sync::Arc::new(hookline_core::url_guard::AddressPolicy::default()),
                hyper::header::HeaderValue::from_static("hookline-test"),
                crate::http::Roots::default(),
            ),
        })
    }

    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("0".to_owned()),
            Just("1".to_owned()),
            Just("-1".to_owned()),
            Just("0.001".to_owned()),
            Just("0.0009".to_owned()),
            Just("1e308".to_owned()),
            Just("5e-324".to_owned()),
            Just(u32::MAX.to_string()),
            Just(u64::MAX.to_string()),
            Just(i64::MAX.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
        ]
    }

    /// A config value: valid but for the fields set to edge numbers, or any bytes.
    fn value() -> impl Strategy<Value = Option<Vec<u8>>> {
        const FIELDS: [&str; 3] = ["max_concurrency", "rate_limit_per_s", "timeout_ms"];
        const RETRY: [&str; 4] = ["base_ms", "cap_ms", "max_attempts", "max_age_ms"];
        let config = (
            vec((proptest::sample::select(&FIELDS[..]), number()), 0..3),
            vec((proptest::sample::select(&RETRY[..]), number()), 0..4),
            proptest::sample::select(
                &["fixed", "exponential", "exponential_jitter", "full_jitter"][..],
            ),
        )
            .prop_map(|(fields, retry, strategy)| {
                let mut text = format!(r#"{{"url":"https://example.com/h","secrets":["{SECRET}"]"#);
                for (name, value) in fields {
                    text.push_str(&format!(r#","{name}":{value}"#));
                }
                text.push_str(&format!(r#","retry":{{"strategy":"{strategy}""#));
                for (name, value) in retry {
                    text.push_str(&format!(r#","{name}":{value}"#));
                }
                text.push_str("}}");
                text.into_bytes()
            });
        prop_oneof![
            6 => config.prop_map(Some),
            1 => vec(any::<u8>(), 0..128).prop_map(Some),
            1 => Just(None),
        ]
    }

    fn key() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop_oneof![
            4 => proptest::sample::select(&["ep-a", "ep-b"][..]).prop_map(|k| Some(k.as_bytes().to_vec())),
            1 => Just(Some(vec![0xff, 0xfe])),
            1 => Just(None),
            1 => vec(any::<u8>(), 0..8).prop_map(Some),
        ]
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn records_of_any_key_and_value(
            records in vec((key(), value()), 1..6),
            attempts in 1u32..20,
            now in any::<i64>(),
            retry_after_ms in proptest::option::of(any::<u64>()),
        ) {
            let table = table();
            for (key, value) in &records {
                apply(&table, key.as_deref(), value.as_deref());
            }
            let mut rng = StdRng::seed_from_u64(7);
            for id in ["ep-a", "ep-b"] {
                if let Some(endpoint) = table.get(id) {
                    let retry_after = retry_after_ms.map(Duration::from_millis);
                    let _ = endpoint.retry.decide(attempts, 0, now, retry_after, &mut rng);
                    let _ = endpoint.limiter.as_ref().map(|l| l.check());
                }
            }
        }
    }
}
