//! Values that must never be printed (keys, passwords, tokens: `secret`) and the credentials NiFi's
//! AWS credentials service supplies (`credentials_service`). At the bottom of the engine: nothing
//! here depends on another module of the crate.

pub mod credentials_service;
mod secret;

pub use secret::Secret;
