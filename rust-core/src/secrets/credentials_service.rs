//! Credentials from NiFi's AWS credentials controller service (`AwsCredentialsProviderService`), which
//! the Java shim reaches for the engine: the Rust side of that hand-off, free of JNI and of the AWS
//! SDK.
//!
//! - [`CredentialsSupplier`], what the shim's callback is to the engine (the JNI implementation is
//!   `ffi::credentials_callback`), and the wire form of its answers ([`parse_answer`]);
//! - the registry of suppliers: Java registers one before it opens or verifies a ConsumeKinesis and
//!   releases it afterwards; the parsed settings hold their own reference for as long as they live.
//!
//! The AWS clients' provider over a supplier is `aws::credentials_service`. A failure names the
//! service and the reason, never a secret: the reason Java gives is stripped of anything that
//! looks like a key, a secret or a token before it is shown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::runtime::lock;
use once_cell::sync::Lazy;

/// Where the engine gets the service's credentials: a blocking call (into Java, which may call STS).
pub trait CredentialsSupplier: Send + Sync + 'static {
    fn supply(&self) -> Result<Supplied, SupplyError>;
}

/// One set of credentials the service gave.
#[derive(Clone, PartialEq, Eq)]
pub struct Supplied {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub expires_at: Option<SystemTime>,
}

impl std::fmt::Debug for Supplied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supplied")
            .field("session_token", &self.session_token.as_ref().map(|_| "** redacted **"))
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Why the service gave no credentials. No variant carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupplyError {
    /// The service's provider threw; its reason, with secrets removed.
    #[error("{0}")]
    Provider(String),
    /// The service answered something the engine cannot use.
    #[error("the service answered {0}")]
    Malformed(String),
    /// The credentials had already expired when the service gave them.
    #[error("the service gave credentials that expired at {0}")]
    Expired(String),
    /// The engine could not call into the JVM.
    #[error("the engine could not call the service: {0}")]
    Jvm(String),
}

/// The service as the processor names it, and the supplier the shim registered for it (none in
/// validation, which never asks for credentials).
#[derive(Clone)]
pub struct ServiceRef {
    /// The controller service's identifier (the property's value).
    pub id: String,
    /// Its name on the canvas, when Java could tell it.
    pub name: Option<String>,
    pub supplier: Option<Arc<dyn CredentialsSupplier>>,
}

impl ServiceRef {
    /// "the AWS credentials service 'name' (id)".
    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => format!("the AWS credentials service '{name}' ({})", self.id),
            _ => format!("the AWS credentials service {}", self.id),
        }
    }
}

impl PartialEq for ServiceRef {
    fn eq(&self, other: &Self) -> bool {
        let same_supplier = match (&self.supplier, &other.supplier) {
            (None, None) => true,
            (Some(a), Some(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
            _ => false,
        };
        self.id == other.id && self.name == other.name && same_supplier
    }
}

impl Eq for ServiceRef {}

impl std::fmt::Debug for ServiceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceRef")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("supplier", &self.supplier.is_some())
            .finish()
    }
}

// ---- the registry -------------------------------------------------------------------------------

static NEXT: AtomicU64 = AtomicU64::new(1);
static SUPPLIERS: Lazy<Mutex<HashMap<u64, Arc<dyn CredentialsSupplier>>>> = Lazy::new(Default::default);

fn suppliers() -> std::sync::MutexGuard<'static, HashMap<u64, Arc<dyn CredentialsSupplier>>> {
    lock(&SUPPLIERS)
}

/// Keeps `supplier` until [`release`]; returns its handle (never 0, never reused).
pub fn register(supplier: Arc<dyn CredentialsSupplier>) -> u64 {
    let handle = NEXT.fetch_add(1, Ordering::Relaxed);
    suppliers().insert(handle, supplier);
    handle
}

/// The supplier registered under `handle`, if it is still registered.
pub fn lookup(handle: u64) -> Option<Arc<dyn CredentialsSupplier>> {
    suppliers().get(&handle).cloned()
}

/// Forgets `handle`; settings parsed meanwhile keep their own reference. Releasing twice is harmless.
pub fn release(handle: u64) {
    suppliers().remove(&handle);
}

/// Suppliers registered and not yet released (for leak checks).
pub fn registered() -> usize {
    suppliers().len()
}

// ---- the callback's answer ----------------------------------------------------------------------

/// What the shim's callback returns (`CredentialsCallback.credentials()` in Java), as an array:
/// `["OK", accessKeyId, secretAccessKey, sessionToken | null, expiryEpochMillis | null]` or
/// `["ERROR", reason]`.
pub fn parse_answer(parts: &[Option<String>], now: SystemTime) -> Result<Supplied, SupplyError> {
    let text = |i: usize| parts.get(i).and_then(|p| p.as_deref()).map(str::trim).filter(|s| !s.is_empty());
    match text(0) {
        Some("OK") => {}
        Some("ERROR") => return Err(SupplyError::Provider(redact(text(1).unwrap_or("no reason given")))),
        _ => return Err(SupplyError::Malformed("in an unknown form".into())),
    }
    let access_key_id = text(1).ok_or_else(|| SupplyError::Malformed("without an access key ID".into()))?;
    let secret_access_key = text(2).ok_or_else(|| SupplyError::Malformed("without a secret access key".into()))?;
    let session_token = text(3).map(str::to_owned);
    let expires_at = match text(4) {
        None => None,
        Some(millis) => {
            let millis: u64 =
                millis.parse().map_err(|_| SupplyError::Malformed("with an expiry that is not a time".into()))?;
            let at = UNIX_EPOCH + Duration::from_millis(millis);
            if at <= now {
                return Err(SupplyError::Expired(humantime::format_rfc3339_seconds(at).to_string()));
            }
            Some(at)
        }
    };
    Ok(Supplied {
        access_key_id: access_key_id.to_owned(),
        secret_access_key: secret_access_key.to_owned(),
        session_token,
        expires_at,
    })
}

/// `text` without anything that looks like an AWS access key ID (`AKIA`/`ASIA` and 12 or more upper-case
/// letters and digits), a secret access key or a session token (runs of 16 or more characters of the
/// base64 alphabet that hold a letter and a digit, `/` or `+`), and at
/// most 600 characters. Words, ARNs and reasons ("is not authorized to perform: sts:AssumeRole")
/// stay readable: ARNs split into short parts at their colons.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let secretish = word.len() >= 16
            && word.chars().any(|c| c.is_ascii_digit() || c == '/' || c == '+')
            && word.chars().any(|c| c.is_ascii_alphabetic());
        // Access key IDs: AKIA... (long-term) or ASIA... (temporary), upper-case letters and digits.
        let key_id = word.len() >= 16
            && (word.starts_with("AKIA") || word.starts_with("ASIA"))
            && word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let secretish = secretish || key_id;
        if secretish {
            out.push_str("****");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '/' | '+' | '=') {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(if c.is_control() { ' ' } else { c });
        }
    }
    flush(&mut word, &mut out);
    match out.char_indices().nth(600) {
        Some((cut, _)) => format!("{}...", &out[..cut]),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ASIAQWERTYUIOPASDFGH";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const TOKEN: &str = "FwoGZXIvYXdzEJr//////////wEaDOuDhFK3v1xG2example+token=";

    fn some(parts: &[&str]) -> Vec<Option<String>> {
        parts.iter().map(|p| if *p == "<null>" { None } else { Some((*p).to_owned()) }).collect()
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    struct Fixed(Result<Supplied, SupplyError>, std::sync::atomic::AtomicUsize);
    impl CredentialsSupplier for Fixed {
        fn supply(&self) -> Result<Supplied, SupplyError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.clone()
        }
    }

    fn service(supplier: Option<Arc<dyn CredentialsSupplier>>) -> ServiceRef {
        ServiceRef { id: "0b6c-41e2".into(), name: Some("Reader role".into()), supplier }
    }

    #[test]
    fn an_answer_with_a_session_keeps_its_token_and_expiry() {
        let expiry = 1_800_000_900_000u64;
        let s = parse_answer(&some(&["OK", KEY, SECRET, TOKEN, &expiry.to_string()]), now()).unwrap();
        assert_eq!((s.access_key_id.as_str(), s.secret_access_key.as_str()), (KEY, SECRET));
        assert_eq!(s.session_token.as_deref(), Some(TOKEN));
        assert_eq!(s.expires_at, Some(UNIX_EPOCH + Duration::from_millis(expiry)));
        assert!(!format!("{s:?}").contains(SECRET) && !format!("{s:?}").contains(TOKEN));
    }

    #[test]
    fn static_keys_have_no_token_and_no_expiry() {
        let s = parse_answer(&some(&["OK", "AKIAEXAMPLE", SECRET, "<null>", "<null>"]), now()).unwrap();
        assert_eq!((s.session_token, s.expires_at), (None, None));
        let s = parse_answer(&some(&["OK", "AKIAEXAMPLE", SECRET]), now()).unwrap();
        assert_eq!(s.session_token, None, "a short array means no token either");
    }

    #[test]
    fn expired_missing_or_malformed_parts_are_errors_without_secrets() {
        let past = (1_800_000_000_000u64 - 1).to_string();
        for (parts, expect) in [
            (some(&["OK", KEY, SECRET, TOKEN, &past]), "expired at 2027-01-15T07:59:59Z"),
            (some(&["OK", KEY, SECRET, TOKEN, "tomorrow"]), "expiry that is not a time"),
            (some(&["OK", KEY, "<null>"]), "without a secret access key"),
            (some(&["OK", " ", SECRET]), "without an access key ID"),
            (some(&["MAYBE"]), "unknown form"),
            (vec![], "unknown form"),
        ] {
            let e = parse_answer(&parts, now()).unwrap_err().to_string();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains(SECRET) && !e.contains(TOKEN) && !e.contains(KEY), "{e}");
        }
    }

    #[test]
    fn a_java_exception_is_its_reason_without_secrets() {
        let reason = format!(
            "StsException: User: arn:aws:iam::123456789012:user/nobody is not authorized to perform: sts:AssumeRole on \
             resource: arn:aws:iam::123456789012:role/kinesis-reader (Status Code: 403) key {KEY} secret={SECRET}\ntoken {TOKEN}"
        );
        let e = parse_answer(&[Some("ERROR".into()), Some(reason)], now()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, SupplyError::Provider(_)));
        assert!(
            text.contains("arn:aws:iam::123456789012:role/kinesis-reader") && text.contains("is not authorized"),
            "{text}"
        );
        assert!(text.contains("sts:AssumeRole") && text.contains("Status Code: 403"), "{text}");
        for secret in [KEY, SECRET, TOKEN] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(!text.contains('\n'));
        assert_eq!(parse_answer(&some(&["ERROR"]), now()).unwrap_err().to_string(), "no reason given");
    }

    #[test]
    fn the_registry_hands_out_and_forgets_suppliers() {
        let supplier: Arc<dyn CredentialsSupplier> =
            Arc::new(Fixed(Err(SupplyError::Malformed("x".into())), Default::default()));
        let a = register(supplier.clone());
        let b = register(supplier);
        assert_ne!(a, b);
        assert!(lookup(a).is_some());
        release(a);
        release(a);
        assert!(lookup(a).is_none() && lookup(b).is_some());
        release(b);
    }

    #[test]
    fn a_service_is_described_by_name_and_id_and_compared_by_supplier() {
        assert_eq!(service(None).describe(), "the AWS credentials service 'Reader role' (0b6c-41e2)");
        assert_eq!(
            ServiceRef { id: "x-1".into(), name: None, supplier: None }.describe(),
            "the AWS credentials service x-1"
        );
        let supplier: Arc<dyn CredentialsSupplier> =
            Arc::new(Fixed(Err(SupplyError::Malformed("x".into())), Default::default()));
        assert_eq!(service(Some(supplier.clone())), service(Some(supplier.clone())));
        assert_ne!(service(Some(supplier)), service(None));
    }
}
