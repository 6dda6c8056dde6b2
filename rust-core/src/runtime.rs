//! The one tokio runtime of the loaded library, started on first use and shared by every
//! component (processor instance) in this JVM.

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
