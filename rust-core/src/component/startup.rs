//! Starts a ConsumeKinesis engine on the runtime, apart from NiFi's scheduling thread, so that
//! `@OnScheduled` returns at once whatever the start-up waits for (another node's KCL migration,
//! an Enhanced Fan-Out consumer becoming ACTIVE, a table being created). Until the engine runs,
//! [`Startup::status`] says why not, and the processor yields.
//!
//! A start is two steps: `prepare`, long and cancel-safe (nothing of this node is in the lease
//! table yet), and `join`, short, which writes the heartbeat and takes leases and so always runs to
//! its end. [`Startup::stop`] during `prepare` drops it; during `join` it waits for it and then
//! stops the engine, so no lease, heartbeat row or task is left behind. A failed attempt is an
//! error bulletin and is tried again after a growing delay; a panic in either step is one too.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runtime::lock;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tracing::{error, info};

/// An engine that can be stopped (leases released, heartbeat row removed).
pub trait Engine: Send + Sync + 'static {
    fn stop(&self) -> impl Future<Output = ()> + Send;
}

impl Engine for crate::consumer::ConsumerEngine {
    fn stop(&self) -> impl Future<Output = ()> + Send {
        crate::consumer::ConsumerEngine::stop(self)
    }
}

/// Delays between failed start attempts: `first`, doubling up to `max`, without jitter (the
/// bulletin says when the next attempt runs).
#[derive(Debug, Clone, Copy)]
pub struct RetrySchedule {
    pub first: Duration,
    pub max: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self { first: Duration::from_secs(5), max: Duration::from_secs(60) }
    }
}

impl RetrySchedule {
    fn after(&self, failures: u32) -> Duration {
        crate::kinesis::limiter::doubled(self.first, failures.saturating_sub(1), self.max)
    }
}

/// Where a start is.
enum Phase<E> {
    Starting,
    /// The last attempt failed with this error; the next one runs after `retry_in`.
    Failed {
        attempt: u32,
        error: String,
        retry_in: Duration,
    },
    Running(Arc<E>),
    /// Cancelled or stopped; nothing runs.
    Stopped,
}

pub struct Startup<E: Engine> {
    phase: Arc<Mutex<Phase<E>>>,
    cancel: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Words for the bulletin while starting: what the start-up does.
    doing: &'static str,
}

impl<E: Engine> Startup<E> {
    /// Spawns the start task on the current runtime. `prepare` is called once per attempt.
    pub fn spawn<P, PF, PFut, JF, JFut, Fail>(doing: &'static str, retry: RetrySchedule, prepare: PF, join: JF) -> Self
    where
        P: Send + 'static,
        Fail: std::fmt::Display + Send + 'static,
        PF: Fn() -> PFut + Send + 'static,
        PFut: Future<Output = Result<P, Fail>> + Send + 'static,
        JF: Fn(P) -> JFut + Send + 'static,
        JFut: Future<Output = Result<E, Fail>> + Send + 'static,
    {
        let phase = Arc::new(Mutex::new(Phase::Starting));
        let (cancel, cancelled) = watch::channel(false);
        let task = crate::runtime::spawn(run(retry, phase.clone(), cancelled, prepare, join));
        Self { phase, cancel, task: Mutex::new(Some(task)), doing }
    }

    /// The engine once it runs.
    pub fn engine(&self) -> Option<Arc<E>> {
        match &*lock(&self.phase) {
            Phase::Running(engine) => Some(engine.clone()),
            _ => None,
        }
    }

    /// `None` once the engine runs; else why it does not (yet), in words for a bulletin. The text
    /// changes only when the situation does (no running clock), so a caller can report changes.
    pub fn status(&self) -> Option<String> {
        match &*lock(&self.phase) {
            Phase::Running(_) => None,
            Phase::Starting => Some(format!("the engine is starting: {}", self.doing)),
            Phase::Failed { attempt, error, retry_in } => Some(format!(
                "the engine could not start (attempt {attempt}): {error}; it tries again in {} s",
                retry_in.as_secs_f64().ceil() as u64
            )),
            Phase::Stopped => Some("the engine is stopped".into()),
        }
    }

    /// Cancels a start in progress (or waits for its `join` step to end) and stops the engine if it
    /// runs. The engine stays reachable while it stops, so the acknowledgements of batches NiFi is
    /// still committing reach it. When this returns, no task of this start is left.
    pub async fn stop(&self) {
        let _ = self.cancel.send(true);
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        let engine = match &*lock(&self.phase) {
            Phase::Running(engine) => Some(engine.clone()),
            _ => None,
        };
        if let Some(engine) = engine {
            engine.stop().await;
        }
        *lock(&self.phase) = Phase::Stopped;
    }
}

/// A start that was never stopped (the component dropped without `stop`) ends its task; an engine
/// it made is dropped, as after a crash.
impl<E: Engine> Drop for Startup<E> {
    fn drop(&mut self) {
        let _ = self.cancel.send(true);
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

async fn cancelled(rx: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: the Startup was dropped, which cancels too.
    let _ = rx.wait_for(|c| *c).await;
}

async fn run<E, P, PF, PFut, JF, JFut, Fail>(
    retry: RetrySchedule,
    phase: Arc<Mutex<Phase<E>>>,
    mut cancel: watch::Receiver<bool>,
    prepare: PF,
    join: JF,
) where
    E: Engine,
    P: Send + 'static,
    Fail: std::fmt::Display + Send + 'static,
    PF: Fn() -> PFut + Send + 'static,
    PFut: Future<Output = Result<P, Fail>> + Send + 'static,
    JF: Fn(P) -> JFut + Send + 'static,
    JFut: Future<Output = Result<E, Fail>> + Send + 'static,
{
    let mut failures = 0u32;
    loop {
        // Its own task, so that a panic is seen and aborting it drops it (the cancel-safe step).
        let mut preparing = crate::runtime::spawn(prepare());
        let prepared = tokio::select! {
            biased;
            _ = cancelled(&mut cancel) => {
                preparing.abort();
                let _ = preparing.await;
                return;
            }
            prepared = &mut preparing => prepared,
        };
        // Joining is never cut short: it ends, and a cancelled start stops what it made.
        let started = match flatten(prepared) {
            Ok(p) => flatten(crate::runtime::spawn(join(p)).await),
            Err(e) => Err(e),
        };
        match started {
            Ok(engine) => {
                if let Some(unwanted) = install(&phase, &cancel, Arc::new(engine)) {
                    unwanted.stop().await;
                } else if failures > 0 {
                    info!("the engine started at attempt {}", failures + 1);
                }
                return;
            }
            Err(error) => {
                failures += 1;
                let retry_in = retry.after(failures);
                let text = format!(
                    "the engine could not start: {error}; it tries again in {} s",
                    retry_in.as_secs_f64().ceil() as u64
                );
                // The status first: whoever sees the bulletin and asks for the status sees the failure.
                *lock(&phase) = Phase::Failed { attempt: failures, error, retry_in };
                error!("{text}");
                tokio::select! {
                    biased;
                    _ = cancelled(&mut cancel) => return,
                    _ = tokio::time::sleep(retry_in) => {}
                }
            }
        }
    }
}

/// Makes the engine the running one, unless the start was cancelled meanwhile: then it is returned,
/// to be stopped. Checked under the phase's lock, so `Startup::stop` sees either a running engine
/// (and stops it) or none (and this start stops it).
fn install<E: Engine>(phase: &Mutex<Phase<E>>, cancel: &watch::Receiver<bool>, engine: Arc<E>) -> Option<Arc<E>> {
    let mut current = lock(phase);
    if *cancel.borrow() {
        *current = Phase::Stopped;
        return Some(engine);
    }
    *current = Phase::Running(engine);
    None
}

/// One step's outcome: its error's text, or the panic's.
fn flatten<T, Fail: std::fmt::Display>(r: Result<Result<T, Fail>, JoinError>) -> Result<T, String> {
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) if e.is_panic() => Err(format!(
            "internal error in the native engine (a bug, please report it): {}",
            crate::runtime::panic_message(e.into_panic().as_ref())
        )),
        Err(_) => Err("the start was cancelled".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use tokio::sync::Notify;

    /// What the fake start did: prepare attempts, prepares dropped half-way, joins, stops.
    #[derive(Default)]
    struct Record {
        prepares: AtomicU32,
        prepares_dropped: AtomicU32,
        joins: AtomicU32,
        stops: AtomicU32,
        /// The join in progress has written its "heartbeat" and not been undone.
        joined_not_stopped: AtomicBool,
    }

    struct FakeEngine(Arc<Record>);

    impl Engine for FakeEngine {
        fn stop(&self) -> impl Future<Output = ()> + Send {
            let record = self.0.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                record.stops.fetch_add(1, Ordering::SeqCst);
                record.joined_not_stopped.store(false, Ordering::SeqCst);
            }
        }
    }

    /// Counts a drop of the prepare future before it finished.
    struct DropGuard(Arc<Record>, bool);
    impl Drop for DropGuard {
        fn drop(&mut self) {
            if !self.1 {
                self.0.prepares_dropped.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// A start whose prepare waits for `release` (as for another node's migration lock) and
    /// fails its first `failures` attempts; join takes `join_time`.
    fn fake(
        record: &Arc<Record>,
        release: &Arc<Notify>,
        failures: u32,
        join_time: Duration,
        retry: RetrySchedule,
    ) -> Startup<FakeEngine> {
        let (r1, r2, release) = (record.clone(), record.clone(), release.clone());
        Startup::spawn(
            "waiting for the lock",
            retry,
            move || {
                let (record, release) = (r1.clone(), release.clone());
                async move {
                    let attempt = record.prepares.fetch_add(1, Ordering::SeqCst) + 1;
                    let mut guard = DropGuard(record.clone(), false);
                    if attempt <= failures {
                        guard.1 = true;
                        return Err(format!("table unreachable (attempt {attempt})"));
                    }
                    release.notified().await;
                    guard.1 = true;
                    Ok(())
                }
            },
            move |()| {
                let record = r2.clone();
                async move {
                    record.joins.fetch_add(1, Ordering::SeqCst);
                    record.joined_not_stopped.store(true, Ordering::SeqCst);
                    tokio::time::sleep(join_time).await;
                    Ok::<_, String>(FakeEngine(record))
                }
            },
        )
    }

    async fn wait_for(what: &str, f: impl Fn() -> bool) {
        for _ in 0..2000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_while_preparing_drops_the_prepare_and_leaves_nothing() {
        let (record, release) = (Arc::new(Record::default()), Arc::new(Notify::new()));
        let startup = fake(&record, &release, 0, Duration::ZERO, RetrySchedule::default());
        wait_for("prepare to run", || record.prepares.load(Ordering::SeqCst) == 1).await;
        assert_eq!(startup.status().unwrap(), "the engine is starting: waiting for the lock");
        assert!(startup.engine().is_none());
        let t = std::time::Instant::now();
        startup.stop().await;
        assert!(t.elapsed() < Duration::from_secs(1), "stop took {:?}", t.elapsed());
        assert_eq!(record.prepares_dropped.load(Ordering::SeqCst), 1, "the waiting prepare was dropped");
        assert_eq!(record.joins.load(Ordering::SeqCst), 0, "nothing joined");
        release.notify_waiters();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(record.joins.load(Ordering::SeqCst), 0, "no orphan task joins later");
        assert_eq!(startup.status().unwrap(), "the engine is stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stop_while_joining_waits_for_the_join_then_stops_the_engine() {
        let (record, release) = (Arc::new(Record::default()), Arc::new(Notify::new()));
        let startup = fake(&record, &release, 0, Duration::from_millis(300), RetrySchedule::default());
        wait_for("prepare to run", || record.prepares.load(Ordering::SeqCst) == 1).await;
        release.notify_waiters();
        wait_for("join to run", || record.joins.load(Ordering::SeqCst) == 1).await;
        startup.stop().await;
        assert_eq!(record.stops.load(Ordering::SeqCst), 1, "the engine the join made was stopped");
        assert!(!record.joined_not_stopped.load(Ordering::SeqCst), "nothing of the join is left");
        assert!(startup.engine().is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_attempt_is_reported_and_retried_then_the_engine_runs_and_stops_once() {
        let (record, release) = (Arc::new(Record::default()), Arc::new(Notify::new()));
        let retry = RetrySchedule { first: Duration::from_millis(50), max: Duration::from_millis(80) };
        let startup = fake(&record, &release, 2, Duration::ZERO, retry);
        wait_for("the first failure", || startup.status().is_some_and(|s| s.contains("attempt 1"))).await;
        assert!(startup.status().unwrap().contains("table unreachable (attempt 1)"), "{:?}", startup.status());
        wait_for("the third attempt", || record.prepares.load(Ordering::SeqCst) == 3).await;
        release.notify_waiters();
        wait_for("the engine to run", || startup.engine().is_some()).await;
        assert_eq!(startup.status(), None);
        startup.stop().await;
        startup.stop().await;
        assert_eq!(record.stops.load(Ordering::SeqCst), 1, "stopped exactly once");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_a_start_step_is_an_error_not_a_silent_hang() {
        let startup: Startup<FakeEngine> = Startup::spawn(
            "x",
            RetrySchedule { first: Duration::from_secs(60), max: Duration::from_secs(60) },
            || async {
                if true {
                    panic!("lease table exploded");
                }
                Ok::<(), String>(())
            },
            |()| async { Err::<FakeEngine, String>("unreachable".into()) },
        );
        wait_for("the failure", || startup.status().is_some_and(|s| s.contains("could not start"))).await;
        let status = startup.status().unwrap();
        assert!(status.contains("a bug") && status.contains("lease table exploded"), "{status}");
        assert!(status.ends_with("it tries again in 60 s"), "{status}");
        let t = std::time::Instant::now();
        startup.stop().await;
        assert!(t.elapsed() < Duration::from_secs(1), "stop cuts the retry delay short");
    }

    #[test]
    fn backoff_doubles_up_to_its_maximum() {
        let b = RetrySchedule::default();
        let delays: Vec<u64> = (1..=6).map(|n| b.after(n).as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 60, 60]);
        assert_eq!(b.after(u32::MAX).as_secs(), 60);
    }
}
