//! Waiting on observable outcomes with a deadline, never blindly.

use std::future::Future;
use std::time::Duration;

/// Polls `check` every 50 ms until it yields `Some`, or fails with `what` after `deadline`.
pub async fn wait_until<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let give_up = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
