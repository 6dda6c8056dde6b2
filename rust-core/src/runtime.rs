//! The one tokio runtime of the loaded library, started on first use and shared by every
//! component (processor instance) in this JVM; and the helpers every floor uses around its
//! tasks and threads: the component's span and a spawn that keeps it, a panic's text, and a lock
//! taken even after a panic poisoned it.
//!
//! Log events reach a processor's log (and its bulletins) through the span that names its
//! component: the FFI layer enters [`component_span`] for every call from Java, and [`spawn`]
//! carries the caller's span into the task, so no event has to name its component itself.

use once_cell::sync::Lazy;
use tokio::runtime::{Builder, Runtime};

static RUNTIME: Lazy<Runtime> = Lazy::new(|| {
    Builder::new_multi_thread()
        .thread_name("kinesnow-worker")
        .worker_threads(worker_threads())
        .enable_all()
        .build()
        .expect("the tokio runtime could not start")
});

/// Small by default: the engine is I/O bound and NiFi owns the CPU budget.
fn worker_threads() -> usize {
    std::env::var("KINESNOW_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get().min(4)).unwrap_or(2))
}

/// The runtime, started on the first call.
pub fn get() -> &'static Runtime {
    &RUNTIME
}

/// True once something has asked for the runtime (used by tests of lazy start-up).
pub fn is_started() -> bool {
    Lazy::get(&RUNTIME).is_some()
}

/// The span that names a component (its handle): every event inside it belongs to that processor.
pub fn component_span(component: u64) -> tracing::Span {
    tracing::info_span!("component", component)
}

/// `tokio::spawn` in the caller's span, so the task's events reach the same processor's log. The
/// engine starts every task through this (a guard test in `layers.rs` says so).
pub fn spawn<F>(task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    use tracing::Instrument;
    tokio::spawn(task.in_current_span())
}

/// The text of a panic's payload (`catch_unwind`'s, or a task's `JoinError::into_panic`), for the
/// bulletin that reports it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Locks `mutex` even when a thread panicked while holding it: every panic is reported on its
/// own (a bulletin), and the state behind these locks stays consistent between statements, so
/// one panic must not turn every later call of the component into another.
pub fn lock<T: ?Sized>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod panic_tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        assert_eq!(panic_message(&"static"), "static");
        assert_eq!(panic_message(&String::from("owned")), "owned");
        assert_eq!(panic_message(&42u8), "a panic without a message");
    }

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let m = std::sync::Arc::new(std::sync::Mutex::new(1));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
