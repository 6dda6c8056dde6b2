//! The JNI side of NiFi's AWS credentials service: a [`CredentialsSupplier`] that calls the shim's
//! `CredentialsCallback.credentials()` on a Java object (held as a `GlobalRef`), from the blocking
//! thread `aws::credentials_service::ServiceProvider` runs it on. The thread is attached to the JVM
//! for the call and detached after (unless it already was attached), and the call runs in a JNI local
//! frame. A Java exception is cleared and reported by its class; a panic is caught here and becomes
//! an error; neither reaches Java or the engine's workers.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::SystemTime;

use jni::objects::{GlobalRef, JObject, JObjectArray, JString};
use jni::{JNIEnv, JavaVM};

use crate::secrets::credentials_service::{parse_answer, CredentialsSupplier, Supplied, SupplyError};

/// `String[] credentials()` of `io.kinesnow.nifi.nativebridge.CredentialsCallback`.
const METHOD: &str = "credentials";
const SIGNATURE: &str = "()[Ljava/lang/String;";

pub struct JavaCredentials {
    vm: JavaVM,
    callback: GlobalRef,
}

impl JavaCredentials {
    pub fn new(vm: JavaVM, callback: GlobalRef) -> Self {
        Self { vm, callback }
    }

    fn call(&self) -> Result<Vec<Option<String>>, SupplyError> {
        let mut env = self
            .vm
            .attach_current_thread()
            .map_err(|e| SupplyError::Jvm(format!("attaching the thread failed: {e}")))?;
        let outcome =
            env.with_local_frame(8, |env| -> Result<Result<Vec<Option<String>>, SupplyError>, jni::errors::Error> {
                match env.call_method(self.callback.as_obj(), METHOD, SIGNATURE, &[]) {
                    Ok(value) => {
                        let array = JObjectArray::from(value.l()?);
                        if array.is_null() {
                            return Ok(Err(SupplyError::Malformed("nothing (null)".into())));
                        }
                        Ok(Ok(strings(env, &array)?))
                    }
                    Err(jni::errors::Error::JavaException) => Ok(Err(SupplyError::Provider(thrown(env)))),
                    Err(other) => Err(other),
                }
            });
        if env.exception_check().unwrap_or(false) {
            let _ = env.exception_clear();
        }
        outcome.map_err(|e| SupplyError::Jvm(e.to_string()))?
    }
}

/// The class of the pending exception (its message may hold anything), cleared.
fn thrown(env: &mut JNIEnv) -> String {
    let Ok(throwable) = env.exception_occurred() else { return "the callback threw".into() };
    let _ = env.exception_clear();
    let class = env
        .call_method(&throwable, "getClass", "()Ljava/lang/Class;", &[])
        .and_then(|c| c.l())
        .and_then(|c| env.call_method(&c, "getName", "()Ljava/lang/String;", &[]))
        .and_then(|n| n.l())
        .and_then(|n| env.get_string(&JString::from(n)).map(String::from));
    let _ = env.exception_clear();
    match class {
        Ok(name) => format!("the callback threw {name} (see NiFi's log)"),
        Err(_) => "the callback threw".into(),
    }
}

fn strings(env: &mut JNIEnv, array: &JObjectArray) -> jni::errors::Result<Vec<Option<String>>> {
    let len = env.get_array_length(array)?;
    let mut out = Vec::with_capacity(len as usize);
    for i in 0..len {
        let item: JObject = env.get_object_array_element(array, i)?;
        if item.is_null() {
            out.push(None);
        } else {
            let text = JString::from(item);
            out.push(Some(env.get_string(&text)?.into()));
            env.delete_local_ref(text)?;
        }
    }
    Ok(out)
}

impl CredentialsSupplier for JavaCredentials {
    fn supply(&self) -> Result<Supplied, SupplyError> {
        let answer = catch_unwind(AssertUnwindSafe(|| self.call()))
            .unwrap_or_else(|_| Err(SupplyError::Jvm("the call into Java panicked (a bug)".into())))?;
        parse_answer(&answer, SystemTime::now())
    }
}
