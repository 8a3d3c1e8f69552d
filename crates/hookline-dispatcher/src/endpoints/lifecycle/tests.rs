use std::time::Duration;

use hookline_core::classify::{Classification, FailureKind};

use super::*;
use crate::config::LifecycleConfig;

fn after(ms: u64) -> LifecycleSettings {
    LifecycleSettings {
        disable_after_failing: Some(Duration::from_millis(ms)),
    }
}

fn server_error() -> Classification {
    Classification::Retryable {
        reason: FailureKind::ServerError { status: 500 },
        retry_after: None,
    }
}

#[test]
fn gone_disables_at_once() {
    let mut state = LifecycleState::default();
    let gone = Classification::NonRetryable {
        reason: FailureKind::ClientError { status: 410 },
    };
    let reason = state.observe(&gone, 1_000, &after(0)).expect("disabled");
    assert_eq!(reason.text(), "gone: HTTP 410");
    // Even with the failing clock off.
    let never = LifecycleSettings {
        disable_after_failing: None,
    };
    let mut state = LifecycleState::default();
    assert_eq!(
        state.observe(&gone, 1_000, &never).map(|r| r.code),
        Some("gone")
    );
}

#[test]
fn failing_for_the_configured_time_disables() {
    let settings = after(5_000);
    let mut state = LifecycleState::default();
    assert_eq!(state.observe(&server_error(), 10_000, &settings), None);
    assert_eq!(state.failing_since_ms(), Some(10_000));
    assert_eq!(state.observe(&server_error(), 14_999, &settings), None);
    // The clock counts from the first failure, not the last.
    assert_eq!(state.failing_since_ms(), Some(10_000));
    let timeout = Classification::Retryable {
        reason: FailureKind::Timeout,
        retry_after: None,
    };
    let reason = state
        .observe(&timeout, 15_000, &settings)
        .expect("disabled");
    assert_eq!(reason.text(), "failing: timeout");
}

#[test]
fn a_success_resets_the_clock() {
    let settings = after(5_000);
    let mut state = LifecycleState::default();
    state.observe(&server_error(), 10_000, &settings);
    assert_eq!(
        state.observe(&Classification::Success, 14_000, &settings),
        None
    );
    assert_eq!(state.failing_since_ms(), None);
    assert_eq!(state.observe(&server_error(), 16_000, &settings), None);
    assert_eq!(state.failing_since_ms(), Some(16_000));
    assert_eq!(state.observe(&server_error(), 20_999, &settings), None);
    assert!(state.observe(&server_error(), 21_000, &settings).is_some());
}

#[test]
fn zero_never_disables_a_failing_endpoint() {
    let settings = LifecycleConfig {
        disable_after_failing_ms: 0,
    }
    .to_settings();
    let mut state = LifecycleState::default();
    assert_eq!(state.observe(&server_error(), 0, &settings), None);
    assert_eq!(state.observe(&server_error(), i64::MAX, &settings), None);
    assert_eq!(
        LifecycleSettings::default().disable_after_failing,
        Some(Duration::from_secs(5 * 24 * 3600))
    );
}

#[test]
fn a_clock_going_back_never_disables() {
    let settings = after(5_000);
    let mut state = LifecycleState::default();
    state.observe(&server_error(), 10_000, &settings);
    assert_eq!(state.observe(&server_error(), i64::MIN, &settings), None);
}

#[test]
fn the_disabled_config_keeps_every_other_field() {
    let seen = EndpointConfig {
        description: Some("orders".into()),
        ..EndpointConfig::new("https://example.com/h", vec![String::from("whsec_x")])
    };
    let config = disabled(&seen, "gone: HTTP 410".into(), 7);
    assert!(!config.enabled);
    assert_eq!(config.disabled_reason.as_deref(), Some("gone: HTTP 410"));
    assert_eq!(config.disabled_at_ms, Some(7));
    assert_eq!(
        EndpointConfig {
            enabled: true,
            disabled_reason: None,
            disabled_at_ms: None,
            ..config
        },
        seen
    );
}
