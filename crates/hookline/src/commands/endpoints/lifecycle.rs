//! `hookline endpoints enable` and `disable`: turning an endpoint's deliveries on and off
//! by hand, and how listings show why one is off. Records that arrive for a disabled
//! endpoint are parked (`endpoint_disabled`); redrive them once it is enabled again.

use anyhow::{Context as _, bail};
use hookline_core::endpoint::{EndpointConfig, MAX_DISABLED_REASON_LEN};
use hookline_dlq::filter::{format_ms, now_ms};
use hookline_producer::{EndpointStore, PutIf};

/// Arguments of `hookline endpoints enable`.
#[derive(Debug, clap::Args)]
pub struct EnableArgs {
    /// The endpoint id.
    id: String,
}

/// Arguments of `hookline endpoints disable`.
#[derive(Debug, clap::Args)]
pub struct DisableArgs {
    /// The endpoint id.
    id: String,
    /// Why, for whoever lists the endpoints (stored as `manual: TEXT`).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// Enables endpoint `id`: `enabled = true`, its disabled reason and time cleared.
pub async fn enable(store: &EndpointStore, args: &EnableArgs) -> anyhow::Result<()> {
    let current = current(store, &args.id).await?;
    if current.enabled {
        println!("endpoint {} is enabled already", args.id);
        return Ok(());
    }
    let config = EndpointConfig {
        enabled: true,
        disabled_reason: None,
        disabled_at_ms: None,
        ..current.clone()
    };
    write(store, &args.id, &current, &config).await?;
    println!(
        "enabled endpoint {} (redrive what was parked meanwhile: hookline dlq redrive --reason endpoint_disabled --endpoint {})",
        args.id, args.id
    );
    Ok(())
}

/// Disables endpoint `id`, with the reason and the time.
pub async fn disable(store: &EndpointStore, args: &DisableArgs) -> anyhow::Result<()> {
    let reason = match &args.reason {
        Some(text) => format!("manual: {text}"),
        None => "manual".to_owned(),
    };
    if reason.len() > MAX_DISABLED_REASON_LEN || reason.chars().any(char::is_control) {
        bail!(
            "--reason: must be at most {} bytes without control characters",
            MAX_DISABLED_REASON_LEN - "manual: ".len()
        );
    }
    let current = current(store, &args.id).await?;
    let config = EndpointConfig {
        enabled: false,
        disabled_reason: Some(reason),
        disabled_at_ms: Some(now_ms()),
        ..current.clone()
    };
    write(store, &args.id, &current, &config).await?;
    println!("disabled endpoint {} ({})", args.id, state_cell(&config));
    Ok(())
}

/// The ENABLED cell of a listing: `yes`, `no`, or `disabled (gone: HTTP 410, <time>)`.
pub fn state_cell(config: &EndpointConfig) -> String {
    if config.enabled {
        return "yes".to_owned();
    }
    match (&config.disabled_reason, config.disabled_at_ms) {
        (Some(reason), Some(at)) => format!("disabled ({reason}, {})", format_ms(at)),
        (Some(reason), None) => format!("disabled ({reason})"),
        (None, Some(at)) => format!("disabled ({})", format_ms(at)),
        (None, None) => "no".to_owned(),
    }
}

async fn current(store: &EndpointStore, id: &str) -> anyhow::Result<EndpointConfig> {
    match store.get(id).await? {
        Some(config) => Ok(config),
        None => bail!("no endpoint {id} in {}", store.topic()),
    }
}

async fn write(
    store: &EndpointStore,
    id: &str,
    seen: &EndpointConfig,
    config: &EndpointConfig,
) -> anyhow::Result<()> {
    match store
        .put_if_current(id, seen, config)
        .await
        .with_context(|| format!("writing endpoint {id}"))?
    {
        PutIf::Written => Ok(()),
        PutIf::Changed(_) => {
            bail!("endpoint {id} changed while it was written; nothing written, try again")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_cell_says_why() {
        let on = EndpointConfig::new("https://example.com/h", vec!["whsec_x".into()]);
        assert_eq!(state_cell(&on), "yes");
        let off = EndpointConfig {
            enabled: false,
            ..on.clone()
        };
        assert_eq!(state_cell(&off), "no");
        let gone = EndpointConfig {
            disabled_reason: Some("gone: HTTP 410".into()),
            disabled_at_ms: Some(1_796_119_200_000),
            ..off
        };
        assert_eq!(
            state_cell(&gone),
            "disabled (gone: HTTP 410, 2026-12-01T10:00:00.000Z)"
        );
    }
}
