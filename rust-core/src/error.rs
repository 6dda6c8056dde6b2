//! The three ways an error can end, as the Java side must treat it.
//!
//! Every module keeps its own error enum; each implements [`Classify`] so the FFI edge can turn it
//! into the matching Java exception without knowing the module.

/// How the caller should react to an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Transient (throttling, network, a lost race): penalize or yield, then try again.
    Retryable,
    /// The user's settings or environment are wrong: invalid or stopped, with a message for the user.
    Configuration,
    /// A bug or broken invariant: log with context.
    Fatal,
}

/// Implemented by every module's error enum.
pub trait Classify: std::fmt::Display {
    fn class(&self) -> ErrorClass;
}
