//! Start-up's patience with a registry that is slow or overloaded: the schemas a process
//! registers before it serves are tried again for a while when the registry times out or
//! answers 408, 429 or 5xx, instead of failing start-up on one slow answer. Any other error
//! (unreachable, refused credentials, an untrusted certificate, an incompatible schema)
//! fails at once, so a misconfiguration still stops start-up with its reason.

use std::future::Future;
use std::time::Duration;

use hookline_core::pause::Pauses;

use crate::error::{Error, Result};

/// How long start-up waits out a slow or overloaded registry.
pub const STARTUP_PATIENCE: Duration = Duration::from_secs(60);

const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

impl Error {
    /// Whether the registry was slow (a timeout) or said it is overloaded or failing (408,
    /// 429, 5xx): worth another try soon, unlike an answer that shows a misconfiguration.
    pub fn is_registry_overload(&self) -> bool {
        match self {
            Error::RegistryHttp { source, .. } => source.is_timeout(),
            Error::RegistryRefused { status, .. } => matches!(status, 408 | 429 | 500..=599),
            _ => false,
        }
    }
}

/// Runs `op` until it succeeds, fails with anything but an overload, or `patience` has
/// passed; pauses between tries grow from 250 ms to 5 s, each with a random part (replicas
/// starting together do not try again together). `what` names the step in the log.
pub async fn with_patience<T, F, Fut>(what: &str, patience: Duration, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let give_up = tokio::time::Instant::now() + patience;
    let mut pauses = Pauses::new(FIRST_PAUSE, LONGEST_PAUSE);
    loop {
        let error = match op().await {
            Err(error) if error.is_registry_overload() => error,
            other => return other,
        };
        let pause = pauses.next_pause();
        if tokio::time::Instant::now() + pause >= give_up {
            return Err(error);
        }
        tracing::warn!(%error, what, retry_in = ?pause, "the schema registry is slow or overloaded; trying again");
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn refused(status: u16) -> Error {
        Error::RegistryRefused {
            context: "registering".to_owned(),
            status,
            body: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_overloaded_registry_is_tried_again_until_it_answers() {
        let tries = AtomicU32::new(0);
        let id = with_patience("test", STARTUP_PATIENCE, || async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0 => Err(refused(503)),
                1 => Err(refused(429)),
                _ => Ok(7),
            }
        })
        .await
        .expect("the third try succeeds");
        assert_eq!(id, 7);
        assert_eq!(tries.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_misconfiguration_fails_at_once() {
        for status in [401, 403, 404, 409, 422] {
            let tries = AtomicU32::new(0);
            let error = with_patience("test", STARTUP_PATIENCE, || async {
                tries.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(refused(status))
            })
            .await
            .expect_err("refused");
            assert!(
                error.to_string().contains(&format!("HTTP {status}")),
                "{error}"
            );
            assert_eq!(
                tries.load(Ordering::SeqCst),
                1,
                "{status} is not tried again"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn patience_ends() {
        let tries = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let error = with_patience("test", Duration::from_secs(10), || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(refused(503))
        })
        .await
        .expect_err("still overloaded");
        assert!(error.is_registry_overload());
        assert!(
            started.elapsed() <= Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(tries.load(Ordering::SeqCst) > 2);
    }
}
