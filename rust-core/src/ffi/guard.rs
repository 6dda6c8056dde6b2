//! Turns every outcome of an exported function into something safe for the JVM: a value, or one
//! typed Java exception. Panics are caught here and never cross the JNI boundary.

use std::panic::{catch_unwind, AssertUnwindSafe};

use jni::JNIEnv;

use crate::error::{Classify, ErrorClass};
use crate::runtime::panic_message;

/// The Java exception classes, one per [`ErrorClass`].
pub const RETRYABLE_EXCEPTION: &str = "io/kinesnow/nifi/nativebridge/RetryableNativeException";
pub const CONFIGURATION_EXCEPTION: &str = "io/kinesnow/nifi/nativebridge/ConfigurationNativeException";
pub const FATAL_EXCEPTION: &str = "io/kinesnow/nifi/nativebridge/FatalNativeException";

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// An engine or configuration error, classified by the module that raised it.
    #[error("{message}")]
    Core { class: ErrorClass, message: String },
    #[error("native handle {0} is closed or unknown")]
    UnknownHandle(u64),
    #[error("unknown component type '{0}'")]
    UnknownComponentType(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("internal error in the native engine (a bug, please report it): {0}")]
    Panic(String),
    #[error("JNI call failed: {0}")]
    Jni(String),
    /// A Java exception is already pending; it is left for Java to see.
    #[error("a Java exception is pending")]
    JavaExceptionPending,
}

impl BridgeError {
    pub fn core(e: &(impl Classify + ?Sized)) -> Self {
        Self::Core { class: e.class(), message: e.to_string() }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Core { class, .. } => *class,
            Self::UnknownComponentType(_) | Self::InvalidArgument(_) => ErrorClass::Configuration,
            Self::UnknownHandle(_) | Self::Panic(_) | Self::Jni(_) | Self::JavaExceptionPending => ErrorClass::Fatal,
        }
    }

    /// The Java exception class to throw, or `None` when one is already pending.
    pub fn java_class(&self) -> Option<&'static str> {
        if matches!(self, Self::JavaExceptionPending) {
            return None;
        }
        Some(match self.class() {
            ErrorClass::Retryable => RETRYABLE_EXCEPTION,
            ErrorClass::Configuration => CONFIGURATION_EXCEPTION,
            ErrorClass::Fatal => FATAL_EXCEPTION,
        })
    }
}

/// An engine error becomes the exception of its class, so exports can use `?` on the engine's results.
macro_rules! from_classified {
    ($($error:ty),+) => {$(
        impl From<$error> for BridgeError {
            fn from(e: $error) -> Self {
                Self::core(&e)
            }
        }
    )+};
}

from_classified!(crate::component::ComponentError, super::sink_io::SinkIoError, super::skips::SkipsError);

impl From<jni::errors::Error> for BridgeError {
    fn from(e: jni::errors::Error) -> Self {
        match e {
            jni::errors::Error::JavaException => Self::JavaExceptionPending,
            other => Self::Jni(other.to_string()),
        }
    }
}

/// Runs `f`, turning a panic into [`BridgeError::Panic`]. Pure Rust, so it is testable without a JVM.
pub fn catch<T>(f: impl FnOnce() -> Result<T, BridgeError>) -> Result<T, BridgeError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| Err(BridgeError::Panic(panic_message(payload.as_ref()))))
}

/// Runs an exported function's body: on error or panic, throws the matching Java exception and
/// returns `T::default()` (which Java never sees, since the exception is pending).
pub fn call<'local, T: Default>(
    env: &mut JNIEnv<'local>,
    f: impl FnOnce(&mut JNIEnv<'local>) -> Result<T, BridgeError>,
) -> T {
    match catch(|| f(env)) {
        Ok(value) => value,
        Err(error) => {
            throw(env, &error);
            T::default()
        }
    }
}

fn throw(env: &mut JNIEnv, error: &BridgeError) {
    if let BridgeError::Panic(_) = error {
        tracing::error!("{error}");
    }
    let Some(class) = error.java_class() else { return };
    if env.exception_check().unwrap_or(false) {
        return; // keep the first exception; it says more
    }
    if env.throw_new(class, error.to_string()).is_err() {
        // The exception class itself could not be found: fall back to a JDK class.
        let _ = env.exception_clear();
        let _ = env.throw_new("java/lang/IllegalStateException", error.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Throttled;
    impl std::fmt::Display for Throttled {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("shard shardId-000 throttled")
        }
    }
    impl Classify for Throttled {
        fn class(&self) -> ErrorClass {
            ErrorClass::Retryable
        }
    }

    #[test]
    fn a_panic_becomes_a_fatal_error_with_its_message() {
        let result: Result<(), _> = catch(|| panic!("index out of range in shard table"));
        let err = result.unwrap_err();
        assert!(matches!(err, BridgeError::Panic(ref m) if m == "index out of range in shard table"));
        assert_eq!(err.java_class(), Some(FATAL_EXCEPTION));
        assert!(err.to_string().contains("a bug"));
    }

    #[test]
    fn a_formatted_panic_keeps_its_text() {
        let shard = "shardId-7";
        let err = catch::<()>(|| panic!("lost {shard}")).unwrap_err();
        assert_eq!(err.to_string(), "internal error in the native engine (a bug, please report it): lost shardId-7");
    }

    #[test]
    fn each_class_maps_to_its_exception() {
        assert_eq!(BridgeError::core(&Throttled).java_class(), Some(RETRYABLE_EXCEPTION));
        assert_eq!(BridgeError::core(&Throttled).to_string(), "shard shardId-000 throttled");
        assert_eq!(BridgeError::UnknownComponentType("X".into()).java_class(), Some(CONFIGURATION_EXCEPTION));
        assert_eq!(BridgeError::UnknownHandle(9).java_class(), Some(FATAL_EXCEPTION));
        assert_eq!(BridgeError::JavaExceptionPending.java_class(), None);
    }

    #[test]
    fn jni_errors_keep_a_pending_java_exception() {
        assert!(matches!(BridgeError::from(jni::errors::Error::JavaException), BridgeError::JavaExceptionPending));
        assert!(matches!(BridgeError::from(jni::errors::Error::NullPtr("x")), BridgeError::Jni(_)));
    }

    #[test]
    fn success_passes_through() {
        assert_eq!(catch(|| Ok(42)).unwrap(), 42);
    }
}
