//! The functions the test-only Java class `io.kinesnow.nifi.nativebridge.NativeTestSupport` declares
//! as `native`: synthetic batches for the codec tests and the hand-off benchmark, leak counters, a log
//! flood and deliberate failures.
//!
//! They ship in the library on purpose: the Java tests load the very library the NAR ships, not a
//! second build of it. No class in the NAR declares them, so no flow can reach them. Each body runs
//! inside [`guard::call`], like every export.

use jni::objects::{JByteArray, JByteBuffer, JClass};
use jni::sys::{jbyteArray, jint, jlong, jobject, jobjectArray};
use jni::JNIEnv;
use once_cell::sync::Lazy;

use super::batch;
use super::guard::{self, BridgeError};
use super::java;
use super::log_bridge;
use crate::error::ErrorClass;
use crate::runtime::lock;

/// Number of credentials callbacks registered and not released (for leak checks in tests).
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_registeredCredentials<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jint {
    guard::call(&mut env, |_env| Ok(crate::secrets::credentials_service::registered() as jint))
}

/// Number of components open in this JVM (for leak checks in tests).
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_openComponents<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jint {
    guard::call(&mut env, |_env| Ok(super::exports::open_components() as jint))
}

/// A deterministic batch in the JNI layout, for the hand-off benchmark and the codec test.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_syntheticBatch<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shards: jint,
    records_per_shard: jint,
    payload_bytes: jint,
) -> jbyteArray {
    guard::call(&mut env, |env| {
        with_synthetic(shards, records_per_shard, payload_bytes, |shards| encoded_batch(env, shards))
    })
}

/// [`syntheticBatch`](Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_syntheticBatch) the way
/// `pollDirect` hands a batch over: written into the direct buffer `reusable` when it is long
/// enough, else into a new direct buffer.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_syntheticBatchDirect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shards: jint,
    records_per_shard: jint,
    payload_bytes: jint,
    reusable: JByteBuffer<'l>,
) -> jobject {
    guard::call(&mut env, |env| {
        with_synthetic(shards, records_per_shard, payload_bytes, |shards| {
            super::exports::hand_over(env, batch::encoded_len_linked("", shards), reusable, |out| {
                batch::encode_linked_into(1, "", shards, out)
            })
        })
    })
}

/// Runs `f` over the synthetic batch of this shape, generated once per shape, so a benchmark
/// measures the hand-off (encode, copy, decode), not the generator.
fn with_synthetic<T>(
    shards: jint,
    records_per_shard: jint,
    payload_bytes: jint,
    f: impl FnOnce(&[crate::consumer::output::ShardFlowFiles]) -> Result<T, BridgeError>,
) -> Result<T, BridgeError> {
    let count = |v: jint, what: &str| {
        usize::try_from(v).map_err(|_| BridgeError::InvalidArgument(format!("{what} must not be negative")))
    };
    let key = (count(shards, "shards")?, count(records_per_shard, "records")?, count(payload_bytes, "payload")?);
    type Cache = Option<((usize, usize, usize), Vec<crate::consumer::output::ShardFlowFiles>)>;
    static CACHE: Lazy<std::sync::Mutex<Cache>> = Lazy::new(Default::default);
    let mut cache = lock(&CACHE);
    if cache.as_ref().map(|(k, _)| *k) != Some(key) {
        *cache = Some((key, batch::synthetic(key.0, key.1, key.2)));
    }
    f(&cache.as_ref().expect("filled above").1)
}

/// A test batch in the JNI layout, as a new Java byte array.
fn encoded_batch<'l>(
    env: &mut JNIEnv<'l>,
    shards: &[crate::consumer::output::ShardFlowFiles],
) -> Result<jbyteArray, BridgeError> {
    let bytes =
        batch::encode(1, shards).map_err(|e| BridgeError::Core { class: ErrorClass::Fatal, message: e.to_string() })?;
    Ok(env.byte_array_from_slice(&bytes)?.into_raw())
}

/// A batch of one shard and two FlowFiles whose first partition key is `key_bytes` long
/// ([`batch::long_partition_key`]), for the codec test of keys beyond 64 KiB.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_partitionKeyBatch<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    key_bytes: jint,
) -> jbyteArray {
    guard::call(&mut env, |env| {
        let len = usize::try_from(key_bytes)
            .map_err(|_| BridgeError::InvalidArgument("the key length must not be negative".into()))?;
        let mut shards = batch::synthetic(1, 2, 8);
        shards[0].flow_files[0].partition_key = batch::long_partition_key(len).into();
        encoded_batch(env, &shards)
    })
}

/// The skips in `skips` (layout in `skips`) as the core reads them, one line each: shard, lease
/// counter, the record before and the last record (`sequence/sub`, `-` for none); for the codec test.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_describeSkippedForTest<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    skips: JByteArray<'l>,
) -> jobjectArray {
    guard::call(&mut env, |env| {
        let bytes = env.convert_byte_array(&skips)?;
        let skips = super::skips::decode(&bytes)
            .map_err(|e| BridgeError::Core { class: ErrorClass::Fatal, message: e.to_string() })?;
        let position = |p: Option<&crate::kinesis::position::Position>| {
            p.map_or("-".to_owned(), |p| {
                format!("{}/{}", p.sequence_number, p.sub_sequence_number.map_or("-".to_owned(), |s| s.to_string()))
            })
        };
        let lines: Vec<String> = skips
            .iter()
            .map(|s| {
                let tenure = s.tenure.map_or("-1".to_owned(), |t| t.to_string());
                format!("{} {tenure} {} {}", s.shard, position(s.previous.as_ref()), position(Some(&s.last)))
            })
            .collect();
        java::string_array(env, &lines)
    })
}

/// Logs `lines` INFO events for the component through `tracing`, as the engine does, and returns
/// once the log bridge has delivered them (it waits every 1,000 lines, so none is dropped): for the
/// test that the bridge's heap use stays flat.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_logForTest<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    component: jlong,
    lines: jint,
) {
    guard::call(&mut env, |_env| {
        let id = component as u64;
        super::exports::require_open(id)?;
        let padding = "x".repeat(160);
        let _span = crate::runtime::component_span(id).entered();
        for n in 0..lines.max(0) {
            tracing::info!("log bridge test line {n} {padding}");
            if n % 1000 == 999 {
                log_bridge::flush();
            }
        }
        log_bridge::flush();
        Ok(())
    })
}

/// Raises each kind of failure on demand (0 panic, 1 retryable, 2 configuration, 3 fatal), so the
/// Java tests can prove that every one arrives as its typed exception and none crashes the JVM.
#[no_mangle]
pub extern "system" fn Java_io_kinesnow_nifi_nativebridge_NativeTestSupport_raiseForTest<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    mode: jint,
) {
    guard::call(&mut env, |_env| match mode {
        0 => panic!("deliberate panic for the bridge test"),
        1 => Err(BridgeError::Core { class: ErrorClass::Retryable, message: "deliberate retryable error".into() }),
        2 => Err(BridgeError::Core {
            class: ErrorClass::Configuration,
            message: "deliberate configuration error".into(),
        }),
        3 => Err(BridgeError::Core { class: ErrorClass::Fatal, message: "deliberate fatal error".into() }),
        _ => Ok(()),
    })
}
