//! The channel writers of one engine: a task per channel, started by the channel's first FlowFile,
//! retired once it has had nothing to do for a while (its status entry goes with it), and watched.
//!
//! Every FlowFile handed to a writer is in that writer's *flights* until exactly one outcome is sent
//! for it: by the writer when the book says it is done, or by the supervisor when the writer ended
//! without finishing it (a panic: an error bulletin, then `failure`, which is safe to send again).
//! The next FlowFile for the channel then starts a new writer. Handing over and retiring take the
//! same lock, so no FlowFile is given to a writer that is going away.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::error;

use super::book::{Done, Outcome, Route, Work};
use super::rows::Delivery;
use super::supervise::{run_watched, Ended};
use crate::runtime::lock;

pub type WriterTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Makes the writer task of a channel from its name, delivery, work queue and flights.
pub type WriterFactory =
    Arc<dyn Fn(String, Delivery, mpsc::UnboundedReceiver<Work>, Flights) -> WriterTask + Send + Sync>;

/// What a writer's outcomes go to.
#[derive(Clone)]
pub struct OutcomeSink {
    pub outcomes: mpsc::UnboundedSender<Outcome>,
    pub in_flight_bytes: Arc<AtomicU64>,
    /// Max In-Flight Size: Java hands nothing more over once `in_flight_bytes` reaches it.
    pub max_in_flight_bytes: u64,
}

impl OutcomeSink {
    pub fn send(&self, done: Done) {
        self.in_flight_bytes.fetch_sub(done.bytes, Ordering::AcqRel);
        let _ = self.outcomes.send(done.outcome);
    }
}

#[derive(Default)]
struct FlightState {
    /// No FlowFile may be handed over any more: the writer retired or ended.
    closed: bool,
    /// FlowFile id -> its bytes, for every FlowFile handed over and without an outcome.
    ids: HashMap<i64, u64>,
}

/// The FlowFiles one writer owns; see the module comment.
#[derive(Clone)]
pub struct Flights {
    state: Arc<Mutex<FlightState>>,
    sink: OutcomeSink,
}

/// What a writer that wants to retire is told.
pub enum Retire {
    /// Nothing is in flight or queued: the writer must end now.
    Now,
    /// A FlowFile arrived meanwhile: the writer goes on with it.
    Take(Work),
    /// Something is still in flight: the writer goes on.
    Busy,
}

impl Flights {
    fn new(sink: OutcomeSink) -> Self {
        Self { state: Arc::new(Mutex::new(FlightState::default())), sink }
    }

    fn lock(&self) -> MutexGuard<'_, FlightState> {
        lock(&self.state)
    }

    /// Sends a FlowFile's outcome, unless one was sent already.
    pub fn finish(&self, done: Done) {
        if self.lock().ids.remove(&done.outcome.flow_file_id).is_some() {
            self.sink.send(done);
        }
    }

    /// Called by a writer with nothing pending that has waited long enough.
    pub fn try_retire(&self, queue: &mut mpsc::UnboundedReceiver<Work>) -> Retire {
        let mut state = self.lock();
        if let Ok(work) = queue.try_recv() {
            return Retire::Take(work);
        }
        if !state.ids.is_empty() {
            return Retire::Busy;
        }
        state.closed = true;
        Retire::Now
    }

    /// Closes the flights and sends `failure` for every FlowFile still in them.
    fn fail_all(&self, message: &str, channel: &str) -> usize {
        let lost: Vec<(i64, u64)> = {
            let mut state = self.lock();
            state.closed = true;
            state.ids.drain().collect()
        };
        for (id, bytes) in &lost {
            self.sink.send(Done {
                outcome: Outcome {
                    flow_file_id: *id,
                    route: Route::Failure,
                    channel: channel.to_owned(),
                    offset_token: String::new(),
                    message: message.to_owned(),
                    rows_sent: 0,
                    rows_skipped: 0,
                },
                bytes: *bytes,
            });
        }
        lost.len()
    }

    /// A FlowFile's rows were dropped (all appended): their bytes go back to the budget, while the
    /// FlowFile stays in flight until its outcome.
    pub fn release(&self, id: i64, bytes: u64) {
        let mut state = self.lock();
        if let Some(held) = state.ids.get_mut(&id) {
            let given = bytes.min(*held);
            *held -= given;
            self.sink.in_flight_bytes.fetch_sub(given, Ordering::AcqRel);
        }
    }

    /// Asks Java for a FlowFile's rows again ([`Route::Resend`]), reserving `bytes` of the budget
    /// for them (given back by [`Flights::release`] when they come).
    pub fn ask_again(&self, id: i64, bytes: u64, channel: &str) {
        let mut state = self.lock();
        let Some(held) = state.ids.get_mut(&id) else { return };
        *held += bytes;
        self.sink.in_flight_bytes.fetch_add(bytes, Ordering::AcqRel);
        let _ = self.sink.outcomes.send(Outcome {
            flow_file_id: id,
            route: Route::Resend,
            channel: channel.to_owned(),
            offset_token: String::new(),
            message: String::new(),
            rows_sent: 0,
            rows_skipped: 0,
        });
    }

    /// Whether `bytes` more fit in the in-flight budget.
    pub fn may_reserve(&self, bytes: u64) -> bool {
        self.sink.in_flight_bytes.load(Ordering::Acquire).saturating_add(bytes) <= self.sink.max_in_flight_bytes
    }

    /// Bytes handed over that the writer holds for no FlowFile (its rows came back after its
    /// outcome): given back without an outcome.
    pub fn give_back(&self, id: i64, bytes: u64) {
        let mut state = self.lock();
        let Some(held) = state.ids.get_mut(&id) else { return };
        let given = bytes.min(*held);
        *held -= given;
        if *held == 0 {
            state.ids.remove(&id);
        }
        self.sink.in_flight_bytes.fetch_sub(given, Ordering::AcqRel);
    }

    /// The engine's in-flight budget is used up: Java hands no FlowFile over until some are done.
    pub fn budget_full(&self) -> bool {
        self.sink.in_flight_bytes.load(Ordering::Acquire) >= self.sink.max_in_flight_bytes
    }

    pub fn in_flight(&self) -> usize {
        self.lock().ids.len()
    }
}

struct Slot {
    sender: mpsc::UnboundedSender<Work>,
    flights: Flights,
    supervisor: AbortHandle,
}

type Slots = Arc<Mutex<HashMap<String, Arc<Slot>>>>;

/// The running writers, by channel name.
pub struct Writers {
    slots: Slots,
    factory: WriterFactory,
    sink: OutcomeSink,
}

impl Writers {
    pub fn new(factory: WriterFactory, sink: OutcomeSink) -> Self {
        Self { slots: Arc::default(), factory, sink }
    }

    /// Hands a FlowFile to its channel's writer, starting one if none runs. Must run inside the runtime.
    pub fn dispatch(&self, channel: &str, delivery: Delivery, mut work: Work) {
        let (id, bytes) = (work.flow_file_id, work.bytes);
        loop {
            let slot = self.slot(channel, delivery);
            let mut state = slot.flights.lock();
            if !state.closed {
                // A FlowFile's rows handed over again add to what it holds (see `Flights::ask_again`).
                *state.ids.entry(id).or_default() += bytes;
                match slot.sender.send(work) {
                    Ok(()) => return,
                    // The writer's queue is gone: it ended, and its supervisor is about to see it.
                    Err(mpsc::error::SendError(back)) => {
                        match state.ids.get_mut(&id) {
                            Some(held) if back.resent => *held -= bytes,
                            _ => drop(state.ids.remove(&id)),
                        }
                        state.closed = true;
                        work = back;
                    }
                }
            }
            drop(state);
            forget(&self.slots, channel, &slot);
        }
    }

    /// Hands a [`Work::pass`] to the channel's writer, if one runs: only FlowFiles already queued
    /// there can wait for the records it passes over (a writer started later never had them).
    pub fn pass(&self, channel: &str, work: Work) {
        debug_assert!(work.is_pass());
        let slot = lock(&self.slots).get(channel).cloned();
        if let Some(slot) = slot {
            let _ = slot.sender.send(work);
        }
    }

    /// Channels with a running writer.
    pub fn running(&self) -> usize {
        lock(&self.slots).len()
    }

    /// Stops every writer; FlowFiles without an outcome get none (their sessions roll back).
    pub fn stop(&self) {
        for (_, slot) in lock(&self.slots).drain() {
            slot.supervisor.abort();
        }
    }

    fn slot(&self, channel: &str, delivery: Delivery) -> Arc<Slot> {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(channel) {
            return slot.clone();
        }
        let slot = Arc::new(self.spawn(channel, delivery));
        slots.insert(channel.to_owned(), slot.clone());
        slot
    }

    fn spawn(&self, channel: &str, delivery: Delivery) -> Slot {
        let (sender, receiver) = mpsc::unbounded_channel();
        let flights = Flights::new(self.sink.clone());
        let writer = (self.factory)(channel.to_owned(), delivery, receiver, flights.clone());
        let supervisor =
            crate::runtime::spawn(supervise(writer, channel.to_owned(), flights.clone(), Arc::downgrade(&self.slots)));
        Slot { sender, flights, supervisor: supervisor.abort_handle() }
    }
}

/// Waits for a writer's end. A writer that did not finish its FlowFiles (a panic) has them sent to
/// failure, with an error bulletin; then its slot is freed for the next writer of the channel.
async fn supervise(
    writer: WriterTask,
    channel: String,
    flights: Flights,
    slots: Weak<Mutex<HashMap<String, Arc<Slot>>>>,
) {
    let message = match run_watched(writer).await {
        Ended::Cancelled => return,
        Ended::Panicked(panic) => {
            let message = format!(
                "internal error in PutSnowflake's writer of channel {channel} (a bug, please report it): {panic}; sending the FlowFile again is safe"
            );
            error!("{message}; its FlowFiles go to failure and the next FlowFile for the channel starts a new writer");
            message
        }
        Ended::Returned => format!("PutSnowflake's writer of channel {channel} ended before the FlowFile's outcome was known; sending it again is safe"),
    };
    let lost = flights.fail_all(&message, &channel);
    if lost > 0 {
        error!("channel {channel}: {lost} FlowFile(s) routed to failure: {message}");
    }
    if let Some(slots) = slots.upgrade() {
        let mut slots = lock(&slots);
        if slots.get(&channel).is_some_and(|s| Arc::ptr_eq(&s.flights.state, &flights.state)) {
            slots.remove(&channel);
        }
    }
}

/// Removes `slot` from the table if it is still the channel's.
fn forget(slots: &Slots, channel: &str, slot: &Arc<Slot>) {
    let mut slots = lock(slots);
    if slots.get(channel).is_some_and(|s| Arc::ptr_eq(s, slot)) {
        slots.remove(channel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::snowflake::offset::OffsetToken;
    use crate::snowflake::rows::Row;

    fn work(id: i64, rows: usize) -> Work {
        let rows = (0..rows)
            .map(|i| Row {
                json: bytes::Bytes::from_static(b"{}"),
                token: OffsetToken::from_counter(id as u64 * 100 + i as u64),
            })
            .collect();
        Work {
            flow_file_id: id,
            rows,
            bytes: 10,
            follows: crate::snowflake::book::Follows::Unknown,
            shared: false,
            resent: false,
            passes: None,
        }
    }

    /// A writer that succeeds every FlowFile, panics on one with 3 rows, and retires when idle.
    fn fake_factory(started: Arc<AtomicU64>) -> WriterFactory {
        Arc::new(move |channel: String, _delivery, mut queue: mpsc::UnboundedReceiver<Work>, flights: Flights| {
            started.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                loop {
                    let work = match tokio::time::timeout(Duration::from_millis(50), queue.recv()).await {
                        Ok(Some(work)) => work,
                        Ok(None) => return,
                        Err(_) => match flights.try_retire(&mut queue) {
                            Retire::Now => return,
                            Retire::Take(work) => work,
                            Retire::Busy => continue,
                        },
                    };
                    assert!(work.rows.len() != 3, "a writer bug");
                    flights.finish(Done {
                        outcome: Outcome {
                            flow_file_id: work.flow_file_id,
                            route: Route::Success,
                            channel: channel.clone(),
                            offset_token: String::new(),
                            message: String::new(),
                            rows_sent: work.rows.len() as u32,
                            rows_skipped: 0,
                        },
                        bytes: work.bytes,
                    });
                }
            }) as WriterTask
        })
    }

    fn writers(started: Arc<AtomicU64>) -> (Writers, mpsc::UnboundedReceiver<Outcome>, Arc<AtomicU64>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let bytes = Arc::new(AtomicU64::new(0));
        (
            Writers::new(
                fake_factory(started),
                OutcomeSink { outcomes: tx, in_flight_bytes: bytes.clone(), max_in_flight_bytes: u64::MAX },
            ),
            rx,
            bytes,
        )
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<Outcome>) -> Outcome {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("an outcome in time").expect("open")
    }

    #[tokio::test]
    async fn a_writer_that_panics_fails_its_flow_files_once_and_the_next_flow_file_gets_a_new_writer() {
        let started = Arc::new(AtomicU64::new(0));
        let (writers, mut rx, bytes) = writers(started.clone());
        bytes.store(30, Ordering::SeqCst);
        writers.dispatch("c", Delivery::ExactlyOnce, work(1, 1));
        assert_eq!(next(&mut rx).await.route, Route::Success);
        writers.dispatch("c", Delivery::ExactlyOnce, work(2, 3));
        let failed = next(&mut rx).await;
        assert_eq!((failed.flow_file_id, failed.route), (2, Route::Failure));
        assert!(
            failed.message.contains("internal error") && failed.message.contains("a writer bug"),
            "{}",
            failed.message
        );
        writers.dispatch("c", Delivery::ExactlyOnce, work(3, 1));
        let ok = next(&mut rx).await;
        assert_eq!((ok.flow_file_id, ok.route), (3, Route::Success));
        assert_eq!(started.load(Ordering::SeqCst), 2, "a new writer was started after the panic");
        assert_eq!(bytes.load(Ordering::SeqCst), 0, "every FlowFile gave its bytes back once");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), rx.recv()).await.is_err(),
            "no second outcome for any FlowFile"
        );
    }

    /// Collects the ERROR events (the bulletins) of the component the test runs as.
    #[derive(Clone, Default)]
    struct Errors(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Errors {
        fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            struct Message<'a>(&'a mut String);
            impl tracing::field::Visit for Message<'_> {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                    if field.name() == "message" {
                        *self.0 = format!("{value:?}");
                    }
                }
            }
            if *event.metadata().level() == tracing::Level::ERROR {
                let mut text = String::new();
                event.record(&mut Message(&mut text));
                self.0.lock().unwrap().push(text);
            }
        }
    }

    #[test]
    fn a_writer_panic_is_an_error_bulletin() {
        use tracing_subscriber::layer::SubscriberExt;
        let errors = Errors::default();
        let subscriber = tracing_subscriber::registry().with(errors.clone());
        tracing::subscriber::with_default(subscriber, || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let (writers, mut rx, _) = writers(Arc::new(AtomicU64::new(0)));
                writers.dispatch("c", Delivery::ExactlyOnce, work(1, 3));
                assert_eq!(next(&mut rx).await.route, Route::Failure);
            });
        });
        let errors = errors.0.lock().unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("internal error") && e.contains("channel c") && e.contains("a writer bug")),
            "{errors:?}"
        );
    }

    #[tokio::test]
    async fn idle_writers_retire_and_leave_their_slot() {
        let started = Arc::new(AtomicU64::new(0));
        let (writers, mut rx, _) = writers(started.clone());
        for (i, channel) in ["a", "b", "c"].iter().enumerate() {
            writers.dispatch(channel, Delivery::ExactlyOnce, work(i as i64, 1));
        }
        for _ in 0..3 {
            next(&mut rx).await;
        }
        assert_eq!(writers.running(), 3);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while writers.running() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "writers did not retire");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        writers.dispatch("a", Delivery::ExactlyOnce, work(9, 1));
        assert_eq!(next(&mut rx).await.flow_file_id, 9, "a retired channel starts again");
        assert_eq!(started.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn flow_files_racing_a_retiring_writer_are_never_lost() {
        let started = Arc::new(AtomicU64::new(0));
        let (writers, mut rx, _) = writers(started);
        let mut expected = 0;
        for round in 0..40i64 {
            writers.dispatch("r", Delivery::ExactlyOnce, work(round, 1));
            expected += 1;
            // Sleep around the retire time so some FlowFiles arrive just as the writer retires.
            tokio::time::sleep(Duration::from_millis(45 + (round as u64 % 10))).await;
        }
        let mut seen = std::collections::HashSet::new();
        while seen.len() < expected {
            let o = next(&mut rx).await;
            assert_eq!(o.route, Route::Success);
            assert!(seen.insert(o.flow_file_id), "one outcome per FlowFile");
        }
    }
}
