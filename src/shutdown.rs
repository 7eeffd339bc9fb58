//! The stop signal every background loop watches ([`crate::startup::BackgroundLoops`]).

use tokio::sync::watch;

/// Resolves once the stop signal is true or its sender is gone (both mean stop). The guard
/// `wait_for` returns is dropped here, so a loop `select!`ing on this stays `Send`.
pub async fn requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
