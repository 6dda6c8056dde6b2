//! A global allocator for test binaries that counts the bytes allocated and not yet freed, per
//! thread and for the whole process, remembers their peaks, and refuses an allocation beyond a
//! cap. A refused allocation aborts the test binary ("memory allocation of N bytes failed"), so
//! a regression that would ask for gigabytes fails fast instead of exhausting a shared machine.
//!
//! Use it with `#[global_allocator] static A: Counting = Counting;` in the test binary.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

pub struct Counting;

#[derive(Clone, Copy)]
struct ThreadCount {
    live: i64,
    peak: i64,
    cap: i64,
}

thread_local! {
    static THREAD: Cell<ThreadCount> = const { Cell::new(ThreadCount { live: 0, peak: 0, cap: i64::MAX }) };
}

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);
static CAP: AtomicI64 = AtomicI64::new(i64::MAX);

/// Counts `n` more bytes; false (and nothing counted) if that passes a cap.
fn grow(n: usize) -> bool {
    let n = n as i64;
    let within_thread = THREAD
        .try_with(|t| {
            let mut c = t.get();
            if c.live + n > c.cap {
                return false;
            }
            c.live += n;
            c.peak = c.peak.max(c.live);
            t.set(c);
            true
        })
        .unwrap_or(true);
    if !within_thread {
        return false;
    }
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    if live > CAP.load(Ordering::Relaxed) {
        LIVE.fetch_sub(n, Ordering::Relaxed);
        shrink_thread(n);
        return false;
    }
    PEAK.fetch_max(live, Ordering::Relaxed);
    true
}

fn shrink_thread(n: i64) {
    let _ = THREAD.try_with(|t| {
        let mut c = t.get();
        c.live -= n;
        t.set(c);
    });
}

fn shrink(n: usize) {
    LIVE.fetch_sub(n as i64, Ordering::Relaxed);
    shrink_thread(n as i64);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !grow(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            shrink(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !grow(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            shrink(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !grow(new_size - old) {
            return std::ptr::null_mut();
        }
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            if new_size > old {
                shrink(new_size - old);
            }
        } else if new_size < old {
            shrink(old - new_size);
        }
        p
    }
}

/// Runs `f` with allocations on this thread capped at `cap` bytes more than before; returns its
/// result and the peak of the bytes it (this thread) held allocated meanwhile.
pub fn thread_peak<T>(cap: usize, f: impl FnOnce() -> T) -> (T, usize) {
    let before = THREAD.with(|t| {
        let mut c = t.get();
        let saved = c;
        c.peak = c.live;
        c.cap = c.live.saturating_add(cap as i64);
        t.set(c);
        saved
    });
    let out = f();
    let peak = THREAD.with(|t| {
        let mut c = t.get();
        let peak = c.peak - before.live;
        c.cap = before.cap;
        c.peak = before.peak.max(c.peak);
        t.set(c);
        peak
    });
    (out, peak.max(0) as usize)
}

/// Caps the whole process at `cap` bytes allocated at once.
pub fn cap_process(cap: usize) {
    CAP.store(cap as i64, Ordering::Relaxed);
}

/// Bytes the process holds allocated now.
pub fn process_live() -> usize {
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// Starts a new peak measurement for the whole process from what it holds now.
pub fn reset_process_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The peak of bytes the process held allocated since the last reset.
pub fn process_peak() -> usize {
    PEAK.load(Ordering::Relaxed).max(0) as usize
}
