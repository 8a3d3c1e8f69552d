//! Turning an endpoint's deliveries on and off by hand, as `hookline endpoints enable` and
//! `disable` and the console do: the stored `enabled`, `disabled_reason` and
//! `disabled_at_ms`, written only over the config read just before (never over a change
//! made meanwhile). Records that arrive for a disabled endpoint are parked
//! (`endpoint_disabled`); redrive them once it is enabled again.

use std::time::{SystemTime, UNIX_EPOCH};

use hookline_core::endpoint::{EndpointConfig, MAX_DISABLED_REASON_LEN};

use super::{EndpointStore, EndpointStoreError, PutIf};

/// Why an endpoint could not be enabled or disabled. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The table has no such endpoint.
    #[error("no endpoint {id} in {topic}")]
    NotFound {
        /// The endpoint id.
        id: String,
        /// The endpoint table's topic.
        topic: String,
    },
    /// The reason, with its `manual` prefix, is too long or holds control characters.
    #[error("the reason must be at most {max_bytes} bytes without control characters")]
    InvalidReason {
        /// The longest reason allowed, in bytes, for this prefix.
        max_bytes: usize,
    },
    /// The endpoint changed between the read and the write.
    #[error("endpoint {id} changed while it was written; nothing written, try again")]
    Changed {
        /// The endpoint id.
        id: String,
    },
    /// The table could not be read or written.
    #[error("writing endpoint {id}")]
    Store {
        /// The endpoint id.
        id: String,
        /// What the store said.
        #[source]
        source: Box<EndpointStoreError>,
    },
}

/// What [`enable`] or [`disable`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Switched {
    /// Whether a config was written (false: it was enabled already).
    pub written: bool,
    /// The endpoint's config now.
    pub config: EndpointConfig,
}

/// The stored reason of a manual disable: `manual`, `manual: TEXT`, `manual by USER` or
/// `manual by USER: TEXT`. Fails when it would be over [`MAX_DISABLED_REASON_LEN`] bytes
/// or hold a control character.
pub fn manual_reason(text: Option<&str>, by: Option<&str>) -> Result<String, SwitchError> {
    let prefix = match by {
        Some(user) => format!("manual by {user}"),
        None => "manual".to_owned(),
    };
    let reason = match text {
        Some(text) => format!("{prefix}: {text}"),
        None => prefix.clone(),
    };
    if reason.len() > MAX_DISABLED_REASON_LEN || reason.chars().any(char::is_control) {
        return Err(SwitchError::InvalidReason {
            max_bytes: MAX_DISABLED_REASON_LEN.saturating_sub(prefix.len() + ": ".len()),
        });
    }
    Ok(reason)
}

/// Enables endpoint `id`: `enabled = true`, its disabled reason and time cleared. An
/// endpoint enabled already is left as it is (`written: false`).
pub async fn enable(store: &EndpointStore, id: &str) -> Result<Switched, SwitchError> {
    let current = current(store, id).await?;
    if current.enabled {
        return Ok(Switched {
            written: false,
            config: current,
        });
    }
    let config = EndpointConfig {
        enabled: true,
        disabled_reason: None,
        disabled_at_ms: None,
        ..current.clone()
    };
    write(store, id, &current, &config).await?;
    Ok(Switched {
        written: true,
        config,
    })
}

/// Disables endpoint `id` with `reason` (see [`manual_reason`]: the text and who acted)
/// and the time now. Disabling it again writes the new reason and time.
pub async fn disable(
    store: &EndpointStore,
    id: &str,
    reason: Option<&str>,
    by: Option<&str>,
) -> Result<Switched, SwitchError> {
    let reason = manual_reason(reason, by)?;
    let current = current(store, id).await?;
    let config = EndpointConfig {
        enabled: false,
        disabled_reason: Some(reason),
        disabled_at_ms: Some(now_ms()),
        ..current.clone()
    };
    write(store, id, &current, &config).await?;
    Ok(Switched {
        written: true,
        config,
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

async fn current(store: &EndpointStore, id: &str) -> Result<EndpointConfig, SwitchError> {
    match store.get(id).await {
        Ok(Some(config)) => Ok(config),
        Ok(None) => Err(SwitchError::NotFound {
            id: id.to_owned(),
            topic: store.topic().to_owned(),
        }),
        Err(source) => Err(SwitchError::Store {
            id: id.to_owned(),
            source: Box::new(source),
        }),
    }
}

async fn write(
    store: &EndpointStore,
    id: &str,
    seen: &EndpointConfig,
    config: &EndpointConfig,
) -> Result<(), SwitchError> {
    match store.put_if_current(id, seen, config).await {
        Ok(PutIf::Written) => Ok(()),
        Ok(PutIf::Changed(_)) => Err(SwitchError::Changed { id: id.to_owned() }),
        Err(source) => Err(SwitchError::Store {
            id: id.to_owned(),
            source: Box::new(source),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_reason_says_who_and_why() {
        assert_eq!(manual_reason(None, None).expect("valid"), "manual");
        assert_eq!(
            manual_reason(Some("receiver moving"), None).expect("valid"),
            "manual: receiver moving"
        );
        assert_eq!(
            manual_reason(Some("INC-42"), Some("alice")).expect("valid"),
            "manual by alice: INC-42"
        );
        assert_eq!(
            manual_reason(None, Some("alice")).expect("valid"),
            "manual by alice"
        );
    }

    #[test]
    fn a_manual_reason_is_bounded_and_printable() {
        let longest = "x".repeat(MAX_DISABLED_REASON_LEN - "manual: ".len());
        assert!(manual_reason(Some(&longest), None).is_ok());
        let over = format!("{longest}x");
        match manual_reason(Some(&over), None) {
            Err(SwitchError::InvalidReason { max_bytes }) => assert_eq!(max_bytes, 248),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            manual_reason(Some("a\nb"), None),
            Err(SwitchError::InvalidReason { .. })
        ));
        assert!(matches!(
            manual_reason(None, Some("eve\u{1b}[31m")),
            Err(SwitchError::InvalidReason { .. })
        ));
    }
}
