//! Turning an endpoint's deliveries on and off by hand (`hookline endpoints enable` and
//! `disable`, the console's buttons): the config re-read, changed, and written only if it
//! did not change meanwhile. Records that arrive for a disabled endpoint are parked
//! (`endpoint_disabled`); redrive them once it is enabled again.

use hookline_core::endpoint::{EndpointConfig, MAX_DISABLED_REASON_LEN};

use super::{EndpointStore, EndpointStoreError, PutIf};

/// The prefix of a reason given by hand.
pub const MANUAL: &str = "manual";

/// Why an endpoint could not be enabled or disabled; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The table has no such endpoint.
    #[error("no endpoint {id} in {topic}")]
    NotFound {
        /// The endpoint id.
        id: String,
        /// The endpoint table's topic.
        topic: String,
    },
    /// The endpoint's config changed between the read and the write.
    #[error("endpoint {id} changed while it was written; nothing written, try again")]
    Changed {
        /// The endpoint id.
        id: String,
    },
    /// The reason is too long or holds control characters.
    #[error("the reason must be at most {max} bytes without control characters")]
    InvalidReason {
        /// Most bytes of the text given.
        max: usize,
    },
    /// The table could not be read or written.
    #[error(transparent)]
    Store(#[from] EndpointStoreError),
}

/// What an enable did.
#[derive(Clone, Debug, PartialEq)]
pub enum Enabled {
    /// It was disabled and is enabled now.
    Now(Box<EndpointConfig>),
    /// It was enabled already; nothing was written.
    Already,
}

/// The reason stored for a manual disable: `manual`, or `manual: TEXT`; checked against
/// the config's limit.
pub fn manual_reason(text: Option<&str>) -> Result<String, LifecycleError> {
    let reason = match text.map(str::trim).filter(|t| !t.is_empty()) {
        Some(text) => format!("{MANUAL}: {text}"),
        None => MANUAL.to_owned(),
    };
    if reason.len() > MAX_DISABLED_REASON_LEN || reason.chars().any(char::is_control) {
        return Err(LifecycleError::InvalidReason {
            max: MAX_DISABLED_REASON_LEN - "manual: ".len(),
        });
    }
    Ok(reason)
}

/// Enables endpoint `id`: `enabled = true`, its disabled reason and time cleared.
pub async fn enable(store: &EndpointStore, id: &str) -> Result<Enabled, LifecycleError> {
    let current = current(store, id).await?;
    if current.enabled {
        return Ok(Enabled::Already);
    }
    let config = EndpointConfig {
        enabled: true,
        disabled_reason: None,
        disabled_at_ms: None,
        ..current.clone()
    };
    write(store, id, &current, &config).await?;
    Ok(Enabled::Now(Box::new(config)))
}

/// Disables endpoint `id` with `reason` (see [`manual_reason`]) at `now_ms`; returns the
/// config written.
pub async fn disable(
    store: &EndpointStore,
    id: &str,
    reason: String,
    now_ms: i64,
) -> Result<EndpointConfig, LifecycleError> {
    let current = current(store, id).await?;
    let config = EndpointConfig {
        enabled: false,
        disabled_reason: Some(reason),
        disabled_at_ms: Some(now_ms),
        ..current.clone()
    };
    write(store, id, &current, &config).await?;
    Ok(config)
}

async fn current(store: &EndpointStore, id: &str) -> Result<EndpointConfig, LifecycleError> {
    store
        .get(id)
        .await?
        .ok_or_else(|| LifecycleError::NotFound {
            id: id.to_owned(),
            topic: store.topic().to_owned(),
        })
}

async fn write(
    store: &EndpointStore,
    id: &str,
    seen: &EndpointConfig,
    config: &EndpointConfig,
) -> Result<(), LifecycleError> {
    match store.put_if_current(id, seen, config).await? {
        PutIf::Written => Ok(()),
        PutIf::Changed(_) => Err(LifecycleError::Changed { id: id.to_owned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_reasons_are_prefixed_and_bounded() {
        assert_eq!(manual_reason(None).expect("valid"), "manual");
        assert_eq!(manual_reason(Some("  ")).expect("valid"), "manual");
        assert_eq!(
            manual_reason(Some("receiver migrating")).expect("valid"),
            "manual: receiver migrating"
        );
        assert!(manual_reason(Some("a\u{1b}b")).is_err());
        let longest = "x".repeat(MAX_DISABLED_REASON_LEN - "manual: ".len());
        assert!(manual_reason(Some(&longest)).is_ok());
        assert!(manual_reason(Some(&format!("{longest}x"))).is_err());
    }
}
