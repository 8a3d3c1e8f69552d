//! `hookline endpoints enable` and `disable`: turning an endpoint's deliveries on and off
//! by hand (through `hookline_producer::endpoints::lifecycle`, as the console), and how
//! listings show why one is off. Records that arrive for a disabled
//! endpoint are parked (`endpoint_disabled`); redrive them once it is enabled again.

use hookline_core::endpoint::EndpointConfig;
use hookline_dlq::filter::{format_ms, now_ms};
use hookline_producer::EndpointStore;
use hookline_producer::endpoints::lifecycle::{self, Enabled};

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
    match lifecycle::enable(store, &args.id).await? {
        Enabled::Already => println!("endpoint {} is enabled already", args.id),
        Enabled::Now(_) => println!(
            "enabled endpoint {} (redrive what was parked meanwhile: hookline dlq redrive --reason endpoint_disabled --endpoint {})",
            args.id, args.id
        ),
    }
    Ok(())
}

/// Disables endpoint `id`, with the reason and the time.
pub async fn disable(store: &EndpointStore, args: &DisableArgs) -> anyhow::Result<()> {
    let reason = lifecycle::manual_reason(args.reason.as_deref())
        .map_err(|error| anyhow::anyhow!("--reason: {error}"))?;
    let config = lifecycle::disable(store, &args.id, reason, now_ms()).await?;
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
