//! Conversions between Java values and Rust ones used by the exports.

use jni::objects::{JObject, JObjectArray, JString};
use jni::sys::jobjectArray;
use jni::JNIEnv;

use super::guard::BridgeError;
use crate::config::PropertyMap;

pub fn string(env: &mut JNIEnv, s: &JString) -> Result<String, BridgeError> {
    if s.is_null() {
        return Err(BridgeError::InvalidArgument("a required text argument was null".into()));
    }
    Ok(env.get_string(s)?.into())
}

/// A `String[]` of alternating names and values (the processor's evaluated properties).
pub fn property_map(env: &mut JNIEnv, array: &JObjectArray) -> Result<PropertyMap, BridgeError> {
    if array.is_null() {
        return Err(BridgeError::InvalidArgument("the property array was null".into()));
    }
    let len = env.get_array_length(array)?;
    if len % 2 != 0 {
        return Err(BridgeError::InvalidArgument("the property array must hold name/value pairs".into()));
    }
    let mut pairs = Vec::with_capacity(len as usize / 2);
    for i in (0..len).step_by(2) {
        let name = element(env, array, i)?;
        let value = element(env, array, i + 1)?;
        if let (Some(name), Some(value)) = (name, value) {
            pairs.push((name, value));
        }
    }
    Ok(PropertyMap::from_pairs(pairs))
}

fn element(env: &mut JNIEnv, array: &JObjectArray, index: i32) -> Result<Option<String>, BridgeError> {
    let object = env.get_object_array_element(array, index)?;
    if object.is_null() {
        return Ok(None);
    }
    let text = JString::from(object);
    let value: String = env.get_string(&text)?.into();
    env.delete_local_ref(text)?;
    Ok(Some(value))
}

/// A new `String[]`.
pub fn string_array<S: AsRef<str>>(env: &mut JNIEnv, items: &[S]) -> Result<jobjectArray, BridgeError> {
    let array = env.new_object_array(items.len() as i32, "java/lang/String", JObject::null())?;
    for (i, item) in items.iter().enumerate() {
        let s = env.new_string(item.as_ref())?;
        env.set_object_array_element(&array, i as i32, &s)?;
        env.delete_local_ref(s)?;
    }
    Ok(array.into_raw())
}
