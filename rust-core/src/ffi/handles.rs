//! Opaque `long` handles for Rust objects owned by Java. Ids are never reused, so a closed or
//! forged handle is always reported as such instead of reaching another object or freed memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::guard::BridgeError;
use crate::runtime::lock;

pub struct HandleTable<T> {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Arc<T>>>,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        Self { next: AtomicU64::new(1), live: Mutex::new(HashMap::new()) }
    }
}

impl<T> HandleTable<T> {
    /// Stores `value` and returns its handle (never 0).
    pub fn insert(&self, value: T) -> u64 {
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(handle, Arc::new(value));
        handle
    }

    /// The object behind `handle`; callers hold the `Arc`, so `close` during a call is safe.
    pub fn get(&self, handle: u64) -> Result<Arc<T>, BridgeError> {
        self.lock().get(&handle).cloned().ok_or(BridgeError::UnknownHandle(handle))
    }

    /// Removes the object; a second close of the same handle is an error.
    pub fn remove(&self, handle: u64) -> Result<Arc<T>, BridgeError> {
        self.lock().remove(&handle).ok_or(BridgeError::UnknownHandle(handle))
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<T>>> {
        // A panic while holding the lock cannot leave the map half-updated, so poisoning is ignored.
        lock(&self.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_insert_get_close() {
        let table = HandleTable::default();
        let a = table.insert("a");
        let b = table.insert("b");
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(*table.get(a).unwrap(), "a");
        table.remove(a).unwrap();
        assert!(matches!(table.get(a), Err(BridgeError::UnknownHandle(h)) if h == a));
        assert!(matches!(table.remove(a), Err(BridgeError::UnknownHandle(_))), "double close is reported");
        assert_eq!(*table.get(b).unwrap(), "b");
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn unknown_and_zero_handles_are_errors() {
        let table: HandleTable<u8> = HandleTable::default();
        assert!(table.get(0).is_err());
        assert!(table.get(12345).is_err());
    }

    #[test]
    fn ids_are_not_reused_after_close() {
        let table = HandleTable::default();
        let a = table.insert(1);
        table.remove(a).unwrap();
        let b = table.insert(2);
        assert_ne!(a, b);
        assert!(table.get(a).is_err());
    }

    #[test]
    fn an_object_in_use_survives_close() {
        let table = HandleTable::default();
        let h = table.insert(String::from("engine"));
        let in_use = table.get(h).unwrap();
        table.remove(h).unwrap();
        assert_eq!(*in_use, "engine");
    }

    #[test]
    fn a_poisoned_lock_still_works() {
        let table = Arc::new(HandleTable::default());
        let h = table.insert(1);
        let t = table.clone();
        let _ = std::thread::spawn(move || {
            let _guard = t.live.lock().unwrap();
            panic!("poison");
        })
        .join();
        assert_eq!(*table.get(h).unwrap(), 1);
    }
}
