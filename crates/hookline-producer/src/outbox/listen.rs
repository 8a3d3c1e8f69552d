//! Waking the relay on `NOTIFY hookline_outbox` (sent by the insert trigger).

use std::sync::Arc;
use std::time::Duration;

use hookline_core::pause::Pauses;
use sqlx::postgres::PgListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{NOTIFY_CHANNEL, OutboxStore};

/// Listens until `shutdown`, waking `wake` on each notification for `store`'s schema;
/// reconnects with a growing pause while PostgreSQL is unreachable (the relay polls
/// meanwhile).
pub(crate) async fn listen(
    store: OutboxStore,
    wake: Arc<Notify>,
    backoff_base: Duration,
    backoff_max: Duration,
    shutdown: CancellationToken,
) {
    let mut backoff = Pauses::new(backoff_base, backoff_max);
    while !shutdown.is_cancelled() {
        let error = match connect(&store).await {
            Ok(mut listener) => {
                backoff.reset();
                // Tasks inserted while no one listened are found by the claim right away.
                wake.notify_one();
                loop {
                    let received = tokio::select! {
                        received = listener.recv() => received,
                        () = shutdown.cancelled() => return,
                    };
                    match received {
                        Ok(notification) if notification.payload() == store.schema() => {
                            wake.notify_one();
                        }
                        Ok(_) => {}
                        Err(error) => break error.to_string(),
                    }
                }
            }
            Err(error) => error,
        };
        let pause = backoff.next_pause();
        tracing::warn!(%error, ?pause, "outbox: LISTEN failed; polling until it is back");
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

async fn connect(store: &OutboxStore) -> Result<PgListener, String> {
    let timeout = Duration::from_secs(10);
    let connect = async {
        let mut listener = PgListener::connect_with(store.pool()).await?;
        listener.listen(NOTIFY_CHANNEL).await?;
        Ok::<_, sqlx::Error>(listener)
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(listener)) => Ok(listener),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("connecting took longer than {timeout:?}")),
    }
}
