//! Forwards `tracing` events to the NiFi `ComponentLog` of the processor they concern, so warnings
//! and errors raised anywhere in the engine become bulletins on the canvas.
//!
//! An event of the engine belongs to a component when a span around it (`runtime::component_span`,
//! entered for every call from Java and carried into the tasks the engine spawns) carries a
//! `component` field holding the component's handle; a library's events (the AWS SDK's, hyper's)
//! belong to none, even inside such a span. Events are queued (bounded; overflow is counted, never blocks
//! the engine) and delivered by one thread attached to the JVM, so tokio workers never call Java.
//! That thread never returns to Java, so each delivery runs in its own JNI local frame.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::runtime::lock;
use jni::objects::{GlobalRef, JValue};
use jni::JavaVM;
use once_cell::sync::OnceCell;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// Java's side of the bridge: `NativeLogSink.log(int level, String message)`.
const SINK_METHOD: &str = "log";
const SINK_SIGNATURE: &str = "(ILjava/lang/String;)V";
const QUEUE_CAPACITY: usize = 4096;

/// Levels as `NativeLogSink` numbers them.
pub fn level_number(level: &Level) -> i32 {
    match *level {
        Level::TRACE => 1,
        Level::DEBUG => 2,
        Level::INFO => 3,
        Level::WARN => 4,
        Level::ERROR => 5,
    }
}

/// The target prefix of the engine's own events (its module paths).
const OWN_TARGET: &str = env!("CARGO_CRATE_NAME");

/// One event on its way to Java.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The component's handle; 0 when the event belongs to no component.
    pub component: u64,
    pub level: i32,
    pub message: String,
}

enum Message {
    Line(LogLine),
    Flush(SyncSender<()>),
}

struct Bridge {
    queue: SyncSender<Message>,
    sinks: Arc<Mutex<HashMap<u64, GlobalRef>>>,
    dropped: AtomicU64,
}

static BRIDGE: OnceCell<Bridge> = OnceCell::new();

/// Starts the delivery thread and installs the `tracing` subscriber, once per loaded library.
pub fn install(vm: JavaVM) {
    BRIDGE.get_or_init(|| {
        let (queue, receiver) = sync_channel(QUEUE_CAPACITY);
        let sinks = Arc::new(Mutex::new(HashMap::new()));
        let thread_sinks = sinks.clone();
        std::thread::Builder::new()
            .name("kinesnow-log-bridge".into())
            .spawn(move || deliver(vm, receiver, thread_sinks))
            .expect("the log bridge thread could not start");
        let layer = ComponentLayer { sender: queue.clone() }.with_filter(max_level());
        // Another subscriber may already be global (only in tests); then events stay there.
        let _ = tracing_subscriber::registry().with(layer).try_init();
        Bridge { queue, sinks, dropped: AtomicU64::new(0) }
    });
}

fn max_level() -> tracing_subscriber::filter::LevelFilter {
    match std::env::var("KINESNOW_LOG_LEVEL").unwrap_or_default().to_ascii_lowercase().as_str() {
        "trace" => tracing_subscriber::filter::LevelFilter::TRACE,
        "debug" => tracing_subscriber::filter::LevelFilter::DEBUG,
        _ => tracing_subscriber::filter::LevelFilter::INFO,
    }
}

/// Routes the events of `component` to `sink` (a `NativeLogSink`).
pub fn register(component: u64, sink: GlobalRef) {
    if let Some(bridge) = BRIDGE.get() {
        lock(&bridge.sinks).insert(component, sink);
    }
}

/// Delivers what is queued for `component` (waiting at most a second), then stops routing to it.
pub fn unregister(component: u64) {
    let Some(bridge) = BRIDGE.get() else { return };
    flush_within(bridge, Duration::from_secs(1));
    lock(&bridge.sinks).remove(&component);
}

/// Returns once every event queued so far is delivered (at most 10 s).
pub fn flush() {
    if let Some(bridge) = BRIDGE.get() {
        flush_within(bridge, Duration::from_secs(10));
    }
}

fn flush_within(bridge: &Bridge, wait: Duration) {
    let (done, delivered) = sync_channel(1);
    if bridge.queue.send(Message::Flush(done)).is_ok() {
        let _ = delivered.recv_timeout(wait);
    }
}

/// Events lost because the queue was full since the library loaded.
pub fn dropped_events() -> u64 {
    BRIDGE.get().map_or(0, |b| b.dropped.load(Ordering::Relaxed))
}

fn deliver(vm: JavaVM, receiver: Receiver<Message>, sinks: Arc<Mutex<HashMap<u64, GlobalRef>>>) {
    let Ok(mut env) = vm.attach_current_thread_as_daemon() else {
        eprintln!("kinesnow: the log bridge could not attach to the JVM; native log events go to stderr");
        for message in receiver {
            if let Message::Line(line) = message {
                eprintln!("kinesnow [{}] {}", line.level, line.message);
            }
        }
        return;
    };
    for message in receiver {
        let line = match message {
            Message::Line(line) => line,
            Message::Flush(done) => {
                let _ = done.try_send(());
                continue;
            }
        };
        let sink = lock(&sinks).get(&line.component).cloned();
        let Some(sink) = sink else {
            if line.level >= 4 {
                eprintln!("kinesnow: {}", line.message);
            }
            continue;
        };
        let delivered = deliver_line(&mut env, &sink, &line);
        if delivered.is_err() || env.exception_check().unwrap_or(false) {
            let _ = env.exception_clear();
        }
    }
}

/// Calls the sink inside a local frame: this thread never returns to Java, so a local reference
/// (the message's string, the sink's class) would otherwise live, and pin its object on the Java
/// heap, for as long as the library is loaded.
fn deliver_line(env: &mut jni::JNIEnv, sink: &GlobalRef, line: &LogLine) -> jni::errors::Result<()> {
    env.with_local_frame(4, |env| {
        let text = env.new_string(&line.message)?;
        env.call_method(sink.as_obj(), SINK_METHOD, SINK_SIGNATURE, &[JValue::Int(line.level), JValue::Object(&text)])?;
        Ok(())
    })
}

/// The `tracing` layer: finds the component and formats the event.
struct ComponentLayer {
    sender: SyncSender<Message>,
}

/// Stored in a span's extensions when the span names a component.
struct ComponentId(u64);

impl<S> Layer<S> for ComponentLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut visitor = EventText::default();
        attrs.record(&mut visitor);
        if let (Some(component), Some(span)) = (visitor.component, ctx.span(id)) {
            span.extensions_mut().insert(ComponentId(component));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut text = EventText::default();
        event.record(&mut text);
        // Only the engine's own events take the component of the span around them: a library's (the AWS
        // SDK's note that a config file named by AWS_CONFIG_FILE is missing) is not the processor's to show.
        let own = event.metadata().target().starts_with(OWN_TARGET);
        let component = text.component.or_else(|| {
            own.then(|| ctx.event_scope(event)?.find_map(|span| span.extensions().get::<ComponentId>().map(|c| c.0)))?
        });
        let line = LogLine {
            component: component.unwrap_or(0),
            level: level_number(event.metadata().level()),
            message: text.render(),
        };
        if let Err(TrySendError::Full(_)) = self.sender.try_send(Message::Line(line)) {
            if let Some(bridge) = BRIDGE.get() {
                bridge.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The message and the other fields of an event, as one readable line.
#[derive(Default)]
pub struct EventText {
    component: Option<u64>,
    message: String,
    fields: String,
}

impl EventText {
    pub fn render(self) -> String {
        if self.fields.is_empty() {
            self.message
        } else if self.message.is_empty() {
            self.fields.trim_start().to_owned()
        } else {
            format!("{} [{}]", self.message, self.fields.trim_start())
        }
    }
}

impl Visit for EventText {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "component" {
            self.component = Some(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "component" && value >= 0 {
            self.component = Some(value as u64);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the layer without a JVM and returns what it would deliver.
    fn capture(f: impl FnOnce()) -> Vec<LogLine> {
        let (sender, receiver) = sync_channel(64);
        let subscriber = tracing_subscriber::registry().with(ComponentLayer { sender });
        tracing::subscriber::with_default(subscriber, f);
        receiver
            .try_iter()
            .filter_map(|m| match m {
                Message::Line(l) => Some(l),
                Message::Flush(_) => None,
            })
            .collect()
    }

    #[test]
    fn events_carry_their_component_from_a_field_or_a_span() {
        let lines = capture(|| {
            tracing::warn!(component = 7u64, "shard {} is lagging", "shardId-1");
            let span = tracing::info_span!("engine", component = 9u64);
            let _g = span.enter();
            tracing::error!(shard = "shardId-2", "lease lost");
        });
        assert_eq!(lines[0], LogLine { component: 7, level: 4, message: "shard shardId-1 is lagging".into() });
        assert_eq!(lines[1], LogLine { component: 9, level: 5, message: "lease lost [shard=shardId-2]".into() });
    }

    #[test]
    fn a_task_the_engine_spawns_inside_a_component_span_keeps_its_component() {
        let lines = capture(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let task = crate::runtime::component_span(11).in_scope(|| {
                    crate::runtime::spawn(async {
                        tokio::task::yield_now().await;
                        tracing::warn!("lease on shard {} was lost", "shardId-3");
                    })
                });
                task.await.unwrap();
                let plain = crate::runtime::component_span(12)
                    .in_scope(|| tokio::spawn(async { tracing::warn!("a task started without the span") }));
                plain.await.unwrap();
            });
        });
        assert_eq!(lines[0], LogLine { component: 11, level: 4, message: "lease on shard shardId-3 was lost".into() });
        assert_eq!(lines[1].component, 0, "tokio::spawn drops the span: why the engine uses runtime::spawn");
    }

    #[test]
    fn a_library_s_event_inside_a_component_span_is_not_the_component_s() {
        let lines = capture(|| {
            let _span = crate::runtime::component_span(5).entered();
            tracing::warn!(target: "aws_config::profile::parser", "config file overridden via environment variable not found");
            tracing::warn!("shard {} is lagging", "shardId-1");
        });
        assert_eq!(lines[0].component, 0, "the AWS SDK's own warning is no bulletin of the processor");
        assert_eq!(lines[1].component, 5);
    }

    #[test]
    fn events_outside_a_component_go_to_component_zero() {
        let lines = capture(|| tracing::info!("runtime started"));
        assert_eq!(lines, vec![LogLine { component: 0, level: 3, message: "runtime started".into() }]);
    }

    #[test]
    fn a_full_queue_does_not_block_the_caller() {
        let (sender, _receiver) = sync_channel(1);
        let subscriber = tracing_subscriber::registry().with(ComponentLayer { sender });
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..100 {
                tracing::warn!("event {i}");
            }
        });
    }
}
