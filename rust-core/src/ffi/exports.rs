//! The functions `io.kinesnow.nifi.nativebridge.NativeBridge` declares as `native` (the test-only
//! class's are in `test_support`).
//! Each body runs inside [`guard::call`]; none of them may panic into the JVM.

use jni::objects::{JByteArray, JByteBuffer, JClass, JObject, JObjectArray, JString};
use jni::sys::{jbyteArray, jintArray, jlong, jlongArray, jobject, jobjectArray, jstring};
use jni::JNIEnv;
use once_cell::sync::Lazy;

use super::batch;
use super::guard::{self, BridgeError};
use super::handles::HandleTable;
use super::java;
use super::log_bridge;
use crate::component::Component;
use crate::config::ComponentType;
use crate::error::ErrorClass;

static COMPONENTS: Lazy<HandleTable<Component>> = Lazy::new(HandleTable::default);

fn component_type(env: &mut JNIEnv, name: &JString) -> Result<ComponentType, BridgeError> {
    let name = java::string(env, name)?;
    ComponentType::parse(&name).ok_or(BridgeError::UnknownComponentType(name))
}

fn handle(value: jlong) -> u64 {
    value as u64
}

/// Runs `f` on the open component behind `handle` inside its span (`runtime::component_span`),
/// so every event of the call, and of the engine tasks the call starts, reaches that processor's log.
fn with_component<T>(handle: jlong, f: impl FnOnce(&Component) -> Result<T, BridgeError>) -> Result<T, BridgeError> {
    let id = self::handle(handle);
    let component = COMPONENTS.get(id)?;
    let _span = crate::runtime::component_span(id).entered();
    f(&component)
}

fn install_log_bridge(env: &mut JNIEnv) -> Result<(), BridgeError> {
    log_bridge::install(env.get_java_vm()?);
    Ok(())
}

#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_libraryVersion<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jstring {
    guard::call(&mut env, |env| Ok(env.new_string(env!("CARGO_PKG_VERSION"))?.into_raw()))
}

#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_propertyNames<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: JString<'l>,
) -> jobjectArray {
    guard::call(&mut env, |env| {
        let kind = component_type(env, &component)?;
        java::string_array(env, kind.property_names())
    })
}

/// Returns alternating property names and explanations; empty when the settings are valid.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_validate<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: JString<'l>,
    properties: JObjectArray<'l>,
) -> jobjectArray {
    guard::call(&mut env, |env| {
        install_log_bridge(env)?;
        let kind = component_type(env, &component)?;
        let props = java::property_map(env, &properties)?;
        let flat: Vec<String> = kind.validate(&props).into_iter().flat_map(|p| [p.property, p.message]).collect();
        java::string_array(env, &flat)
    })
}

/// "Verify Properties": probes the services with the given settings (read-only) and returns the
/// steps as alternating name, outcome (SUCCESSFUL, FAILED or SKIPPED) and explanation.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_verify<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: JString<'l>,
    properties: JObjectArray<'l>,
) -> jobjectArray {
    guard::call(&mut env, |env| {
        install_log_bridge(env)?;
        let kind = component_type(env, &component)?;
        let props = java::property_map(env, &properties)?;
        let steps = crate::verify::verify(kind, &props);
        java::string_array(env, &crate::verify::flatten(&steps))
    })
}

/// ConsumeKinesis was removed from the canvas: deregisters its Enhanced Fan-Out consumer. Returns
/// "" when it reads by polling (nothing to do), else a sentence saying what happened; an error
/// reaches Java as an exception whose message names the consumer to remove by hand.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_removeConsumer<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    properties: JObjectArray<'l>,
) -> jstring {
    guard::call(&mut env, |env| {
        install_log_bridge(env)?;
        let props = java::property_map(env, &properties)?;
        let config = crate::config::ConsumeKinesisConfig::parse(&props)
            .map_err(|p| BridgeError::Core { class: ErrorClass::Configuration, message: p.to_string() })?;
        let text = match crate::runtime::get().block_on(crate::consumer::remove_fan_out_consumer(&config)) {
            Ok(None) => String::new(),
            Ok(Some(name)) => format!("deregistered the Enhanced Fan-Out consumer '{name}' of stream '{}'", config.stream_name),
            Err(e) => {
                return Err(BridgeError::Core {
                    class: crate::error::Classify::class(&e),
                    message: format!(
                    "the Enhanced Fan-Out consumer '{}' of stream '{}' could not be deregistered ({e}); deregister it by \
                     hand (aws kinesis deregister-stream-consumer), it counts against the stream's limit of 20 consumers",
                        config.application_name, config.stream_name
                    ),
                })
            }
        };
        Ok(env.new_string(text)?.into_raw())
    })
}

/// Registers a `CredentialsCallback` (NiFi's AWS credentials service, as the shim wraps it) for the
/// engine; returns the handle Java passes as the fact `AWS Credentials Provider Service Handle` and
/// then releases with `releaseCredentials`. Settings parsed meanwhile keep the callback.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_registerCredentials<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    callback: JObject<'l>,
) -> jlong {
    guard::call(&mut env, |env| {
        if callback.is_null() {
            return Err(BridgeError::InvalidArgument("the credentials callback was null".into()));
        }
        let supplier =
            super::credentials_callback::JavaCredentials::new(env.get_java_vm()?, env.new_global_ref(&callback)?);
        Ok(crate::secrets::credentials_service::register(std::sync::Arc::new(supplier)) as jlong)
    })
}

/// Forgets a handle of `registerCredentials`; a second release does nothing.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_releaseCredentials<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guard::call(&mut env, |_env| {
        crate::secrets::credentials_service::release(handle as u64);
        Ok(())
    })
}

/// Parses the settings and creates the component; returns its handle. Log events of the
/// component go to `sink` from now until `close`.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_open<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: JString<'l>,
    properties: JObjectArray<'l>,
    sink: JObject<'l>,
) -> jlong {
    guard::call(&mut env, |env| {
        install_log_bridge(env)?;
        let kind = component_type(env, &component)?;
        let props = java::property_map(env, &properties)?;
        let sink = if sink.is_null() { None } else { Some(env.new_global_ref(&sink)?) };
        // Parse before taking a handle, so a failed open leaves nothing behind.
        let opened = Component::open(kind, &props)?;
        let description = opened.describe();
        let id = COMPONENTS.insert(opened);
        if let Some(sink) = sink {
            log_bridge::register(id, sink);
        }
        let _span = crate::runtime::component_span(id).entered();
        tracing::info!("{description} opened (native library {})", env!("CARGO_PKG_VERSION"));
        Ok(id as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_start<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) {
    guard::call(&mut env, |_env| {
        with_component(component, |c| {
            c.start().map_err(|e| {
                tracing::warn!("{e}");
                BridgeError::from(e)
            })
        })
    })
}

/// Null once the component works; else why it does not yet (ConsumeKinesis's engine is starting
/// in the background, or its last start attempt failed and is tried again).
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_startupStatus<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) -> jstring {
    guard::call(&mut env, |env| {
        with_component(component, |c| match c.startup_status() {
            Some(text) => Ok(env.new_string(text)?.into_raw()),
            None => Ok(std::ptr::null_mut()),
        })
    })
}

/// The next batch of FlowFiles (see `RecordBatch`), or null when none arrived within the
/// processor's Max Batch Duration (or the engine is still starting). The batch is written into
/// `reusable`, a direct `ByteBuffer` Java lends, when it is long enough (the length is in the
/// batch's header), else into a new direct buffer; either way the buffer holding it is returned.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_pollDirect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    reusable: JByteBuffer<'l>,
) -> jobject {
    guard::call(&mut env, |env| {
        with_component(component, |c| {
            let Some(batch) = c.poll_batch()? else { return Ok(std::ptr::null_mut()) };
            // Dropped on any error below, which nacks it.
            let buffer =
                hand_over(env, batch::outgoing_len(&batch), reusable, |out| batch::encode_outgoing_into(&batch, out))?;
            batch.handed_over();
            Ok(buffer)
        })
    })
}

/// Direct buffers are allocated in steps of this up to [`BUFFER_STEP_LARGE`], so one buffer from
/// the pool fits the next batches too.
const BUFFER_STEP: usize = 64 * 1024;
/// ... and of this beyond it: a buffer is at most this much longer than the batch that needed it.
const BUFFER_STEP_LARGE: usize = 1024 * 1024;

/// Writes a batch of `len` bytes with `encode` straight into the memory of a direct `ByteBuffer`:
/// `reusable` when it is a direct buffer at least `len` long, else a new one from
/// `ByteBuffer.allocateDirect`; returns that buffer. One copy, from the engine's FlowFiles into the
/// buffer, whatever the batch's length, and nothing on the Java heap but the buffer object.
///
/// Why this design (Java owns the memory; the engine only writes into it during this call), rather
/// than `NewDirectByteBuffer` over memory the engine allocates and Java releases by a call:
/// - no use after free: the memory belongs to the buffer object, which the JVM frees only once no
///   Java reference to it remains; this call holds a local reference for as long as it writes, and a
///   FlowFile's content read after the buffer went back to the pool would at worst read a later
///   batch's bytes, never freed memory (with engine-owned memory, a late read or a missed release
///   would crash the JVM or leak);
/// - no JNI critical section, so the garbage collector is never held up, and no array of the
///   batch's size on the heap (G1 allocated those as humongous objects and started marking cycles);
/// - bounded: each concurrent task holds one buffer at a time (`BatchArrays` on the Java side),
///   at most one step longer than the longest batch, which Max Batch Size bounds (or one record
///   larger than it); a new buffer counts against the JVM's `MaxDirectMemorySize`, and when that is
///   exhausted `allocateDirect` throws `OutOfMemoryError`, which reaches Java as it is, the batch
///   nacked (dropped here) and read again.
pub(super) fn hand_over<'l>(
    env: &mut JNIEnv<'l>,
    len: usize,
    reusable: JByteBuffer<'l>,
    encode: impl FnOnce(&mut [u8]) -> Result<usize, batch::BatchError>,
) -> Result<jobject, BridgeError> {
    // Not direct (or null): its capacity reads as an error, and a new buffer is made.
    let lent_fits = !reusable.as_raw().is_null() && env.get_direct_buffer_capacity(&reusable).is_ok_and(|n| n >= len);
    let buffer = if lent_fits { reusable } else { allocate_direct(env, len)? };
    let address = env.get_direct_buffer_address(&buffer)?;
    let capacity = env.get_direct_buffer_capacity(&buffer)?;
    if address.is_null() || capacity < len {
        return Err(BridgeError::Core {
            class: ErrorClass::Fatal,
            message: format!("a direct buffer of {capacity} bytes cannot hold a batch of {len}"),
        });
    }
    // SAFETY: `address` is the start of the buffer's `capacity` bytes, which the JVM keeps allocated
    // while the buffer is reachable: `buffer` is a local reference held until this call returns, and
    // no slice outlives `encode`. Java lends a buffer to one call at a time and reads it only after
    // the call returns (each concurrent task takes its own from the pool), so nothing else touches
    // these bytes meanwhile. Every bit pattern is a valid u8.
    let out = unsafe { std::slice::from_raw_parts_mut(address, capacity) };
    match encode(out) {
        Ok(n) if n == len => Ok(buffer.into_raw()),
        Ok(n) => Err(BridgeError::Core {
            class: ErrorClass::Fatal,
            message: format!("a batch of {len} bytes was encoded as {n}"),
        }),
        Err(e) => Err(BridgeError::Core { class: ErrorClass::Fatal, message: e.to_string() }),
    }
}

/// A new direct buffer (`ByteBuffer.allocateDirect`) for a batch of `len` bytes, rounded up to
/// [`BUFFER_STEP`] or [`BUFFER_STEP_LARGE`].
fn allocate_direct<'l>(env: &mut JNIEnv<'l>, len: usize) -> Result<JByteBuffer<'l>, BridgeError> {
    let max = i32::MAX as usize - 8;
    if len > max {
        return Err(BridgeError::Core {
            class: ErrorClass::Fatal,
            message: format!("a batch of {len} bytes is longer than a Java buffer can be; lower Max Batch Size"),
        });
    }
    let step = if len > BUFFER_STEP_LARGE { BUFFER_STEP_LARGE } else { BUFFER_STEP };
    let rounded = len.max(1).div_ceil(step).saturating_mul(step).min(max);
    let buffer = env
        .call_static_method(
            "java/nio/ByteBuffer",
            "allocateDirect",
            "(I)Ljava/nio/ByteBuffer;",
            &[jni::objects::JValue::Int(rounded as i32)],
        )?
        .l()?;
    if buffer.is_null() {
        return Err(BridgeError::Jni("ByteBuffer.allocateDirect returned null".into()));
    }
    Ok(JByteBuffer::from(buffer))
}

/// Processing Strategy RECORD: the Kinesis records of a batch the Record Reader sent to
/// `parse.failure` (layout in `skips`), once per batch before its commit.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_noteSkipped<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    skips: JByteArray<'l>,
) {
    guard::call(&mut env, |env| {
        with_component(component, |c| {
            let skips = super::skips::decode(&env.convert_byte_array(&skips)?)?;
            Ok(c.note_skipped(skips)?)
        })
    })
}

/// NiFi committed the batch: write its checkpoints.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_ack<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    batch_id: jlong,
) {
    guard::call(&mut env, |_env| with_component(component, |c| Ok(c.ack(batch_id)?)))
}

/// NiFi did not commit the batch: rewind its shards to their last checkpoint.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_nack<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    batch_id: jlong,
) {
    guard::call(&mut env, |_env| with_component(component, |c| Ok(c.nack(batch_id)?)))
}

/// PutSnowflake: queues FlowFiles (layout in `sink_io`) on their channels; returns at once.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_submit<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    flow_files: JByteArray<'l>,
) {
    guard::call(&mut env, |env| {
        with_component(component, |c| {
            let flow_files = super::sink_io::decode_flow_files(&env.convert_byte_array(&flow_files)?)?;
            Ok(c.submit(flow_files)?)
        })
    })
}

/// PutSnowflake: outcomes of submitted FlowFiles (layout in `sink_io`), waiting up to
/// `waitMillis` for the first; null when none is known yet.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_outcomes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    wait_millis: jlong,
) -> jbyteArray {
    guard::call(&mut env, |env| {
        with_component(component, |c| {
            let wait = std::time::Duration::from_millis(wait_millis.clamp(0, 10_000) as u64);
            let outcomes = c.outcomes(wait)?;
            if outcomes.is_empty() {
                return Ok(std::ptr::null_mut());
            }
            Ok(env.byte_array_from_slice(&super::sink_io::encode_outcomes(&outcomes))?.into_raw())
        })
    })
}

/// PutSnowflake: which queued FlowFiles to take now (candidates in the layout of `sink_io`, in
/// the queue's order), as indexes into the candidates, in the order of their places.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_choose<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    candidates: JByteArray<'l>,
) -> jintArray {
    guard::call(&mut env, |env| {
        with_component(component, |c| {
            let candidates = super::sink_io::decode_candidates(&env.convert_byte_array(&candidates)?)?;
            let chosen: Vec<i32> = c.choose(&candidates)?.into_iter().map(|i| i as i32).collect();
            let out = env.new_int_array(chosen.len() as i32)?;
            env.set_int_array_region(&out, 0, &chosen)?;
            Ok(out.into_raw())
        })
    })
}

/// PutSnowflake: bytes of content the engine can still take before its in-flight budget is full.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_capacity<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) -> jlong {
    guard::call(&mut env, |_env| with_component(component, |c| Ok(c.capacity()?.min(i64::MAX as u64) as jlong)))
}

#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_close<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) {
    guard::call(&mut env, |_env| {
        // Stopped before its handle goes, so NiFi's last acknowledgements still reach it.
        with_component(component, |c| {
            c.stop();
            tracing::info!("{} closed", c.describe());
            Ok(())
        })?;
        COMPONENTS.remove(handle(component))?;
        log_bridge::unregister(handle(component));
        Ok(())
    })
}

/// The counts of the component's engine counters since the last call, in the contract's order
/// (`contract::counters`), for NiFi's counters, then its gauges' values.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_counters<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) -> jlongArray {
    guard::call(&mut env, |env| {
        let counts: Vec<i64> = with_component(component, |c| Ok(c.take_metrics()))?;
        let array = env.new_long_array(counts.len() as i32)?;
        env.set_long_array_region(&array, 0, &counts)?;
        Ok(array.into_raw())
    })
}

/// The component's View State lines as key, value, key, value... (empty while it does not run).
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeBridge_status<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
) -> jobjectArray {
    guard::call(&mut env, |env| {
        let lines = with_component(component, |c| Ok(c.status_map()))?;
        let flat: Vec<String> = lines.into_iter().flat_map(|(k, v)| [k, v]).collect();
        java::string_array(env, &flat)
    })
}

/// How many components are open in this JVM; read by the test-only natives.
pub(super) fn open_components() -> usize {
    COMPONENTS.len()
}

/// Whether `id` is an open component's handle; read by the test-only natives.
pub(super) fn require_open(id: u64) -> Result<(), BridgeError> {
    COMPONENTS.get(id).map(|_| ())
}
