//! Engine tasks under watch. A panic in a task must not go unseen or wedge what the task served:
//! the supervisor sees it through the task's `JoinHandle`, reports it as an error bulletin (a
//! `tracing` event in the component's span, which `runtime::spawn` carries into every task) and lets
//! the caller recover. Aborting a supervisor aborts the task it watches.

use std::future::Future;
use std::time::Duration;

use tokio::task::{AbortHandle, JoinError, JoinHandle};
use tracing::error;

use crate::runtime::panic_message;

/// Aborts a task when dropped, so a supervisor that is aborted takes its task with it.
pub struct AbortOnDrop(pub AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How a watched task ended.
pub enum Ended {
    Returned,
    Panicked(String),
    Cancelled,
}

impl From<Result<(), JoinError>> for Ended {
    fn from(result: Result<(), JoinError>) -> Self {
        match result {
            Ok(()) => Self::Returned,
            Err(e) if e.is_panic() => Self::Panicked(panic_message(e.into_panic().as_ref())),
            Err(_) => Self::Cancelled,
        }
    }
}

/// Runs `task` on its own tokio task (in the caller's span) and waits for its end.
pub async fn run_watched(task: impl Future<Output = ()> + Send + 'static) -> Ended {
    let handle = crate::runtime::spawn(task);
    let _abort = AbortOnDrop(handle.abort_handle());
    Ended::from(handle.await)
}

/// Spawns a task made by `make` and makes it again after a panic (with an error bulletin and a
/// pause of `pause`), until it returns or is cancelled.
pub fn spawn_restarting<F, Fut>(what: &'static str, pause: Duration, make: F) -> JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    crate::runtime::spawn(async move {
        loop {
            match run_watched(make()).await {
                Ended::Panicked(message) => {
                    error!("internal error in the {what} (a bug, please report it): {message}; it starts again");
                    tokio::time::sleep(pause).await;
                }
                Ended::Returned | Ended::Cancelled => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_reported_and_made_again_until_it_returns() {
        let runs = Arc::new(AtomicU32::new(0));
        let counter = runs.clone();
        let handle = spawn_restarting("test task", Duration::from_millis(1), move || {
            let counter = counter.clone();
            async move {
                if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("boom");
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(5), handle)
            .await
            .expect("ends")
            .expect("the supervisor itself never panics");
        assert_eq!(runs.load(Ordering::SeqCst), 3, "two panics, then a run that returned");
    }

    #[tokio::test]
    async fn aborting_the_supervisor_aborts_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let supervisor = tokio::spawn(run_watched(async move {
            let _tx = tx; // dropped when this task is aborted
            std::future::pending::<()>().await;
        }));
        tokio::task::yield_now().await;
        supervisor.abort();
        assert!(
            tokio::time::timeout(Duration::from_secs(5), rx).await.expect("the task ended").is_err(),
            "the task was dropped, not finished"
        );
    }
}
