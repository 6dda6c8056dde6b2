//! The AWS clients' credentials provider over NiFi's AWS credentials service (the supplier the
//! shim registered, see `secrets::credentials_service`). Each call runs the blocking supplier on a
//! blocking thread (never on a tokio worker); the SDK's identity cache in front of it asks again
//! shortly before the credentials expire. A failure names the service and the reason, never a
//! secret.

use std::sync::Arc;

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{future, ProvideCredentials};
use aws_credential_types::Credentials;

use crate::secrets::credentials_service::{CredentialsSupplier, ServiceRef, SupplyError};

/// The AWS clients' provider of the service's credentials.
#[derive(Clone)]
pub struct ServiceProvider {
    service: ServiceRef,
    supplier: Arc<dyn CredentialsSupplier>,
}

impl std::fmt::Debug for ServiceProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceProvider").field("service", &self.service.describe()).finish()
    }
}

impl ServiceProvider {
    pub fn new(service: ServiceRef, supplier: Arc<dyn CredentialsSupplier>) -> Self {
        Self { service, supplier }
    }

    async fn credentials(&self) -> Result<Credentials, CredentialsError> {
        let supplier = self.supplier.clone();
        let call = move || supplier.supply();
        let answer = match tokio::runtime::Handle::try_current() {
            // A blocking thread: the call waits on Java (and Java perhaps on STS).
            Ok(runtime) => runtime.spawn_blocking(call).await.unwrap_or_else(|e| {
                Err(SupplyError::Jvm(if e.is_panic() {
                    "the call panicked (a bug)".into()
                } else {
                    "the call was cancelled".into()
                }))
            }),
            Err(_) => call(),
        };
        match answer {
            Ok(s) => Ok(Credentials::new(
                s.access_key_id,
                s.secret_access_key,
                s.session_token,
                s.expires_at,
                "nifi-aws-credentials-service",
            )),
            Err(reason) => {
                Err(CredentialsError::provider_error(ServiceFailed { service: self.service.describe(), reason }))
            }
        }
    }
}

impl ProvideCredentials for ServiceProvider {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(self.credentials())
    }
}

/// The service gave no credentials: which service, and why.
#[derive(Debug)]
pub struct ServiceFailed {
    pub service: String,
    pub reason: SupplyError,
}

impl std::fmt::Display for ServiceFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no credentials from {}: {}", self.service, self.reason)
    }
}

impl std::error::Error for ServiceFailed {}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::secrets::credentials_service::Supplied;

    const KEY: &str = "ASIAQWERTYUIOPASDFGH";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const TOKEN: &str = "FwoGZXIvYXdzEJr//////////wEaDOuDhFK3v1xG2example+token=";

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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_provider_calls_the_supplier_off_the_workers_and_names_the_service_in_errors() {
        let good = Supplied {
            access_key_id: KEY.into(),
            secret_access_key: SECRET.into(),
            session_token: Some(TOKEN.into()),
            expires_at: None,
        };
        let fixed = Arc::new(Fixed(Ok(good), Default::default()));
        let provider = ServiceProvider::new(service(None), fixed.clone());
        let c = provider.provide_credentials().await.unwrap();
        assert_eq!((c.access_key_id(), c.session_token()), (KEY, Some(TOKEN)));
        assert_eq!(fixed.1.load(Ordering::SeqCst), 1);

        let denied =
            Arc::new(Fixed(Err(SupplyError::Provider("AccessDenied: not authorized".into())), Default::default()));
        let e = ServiceProvider::new(service(None), denied).provide_credentials().await.unwrap_err();
        let text = crate::kinesis::sdk_error_text(&e);
        assert!(text.contains("no credentials from the AWS credentials service 'Reader role' (0b6c-41e2): AccessDenied: not authorized"), "{text}");

        struct Panics;
        impl CredentialsSupplier for Panics {
            fn supply(&self) -> Result<Supplied, SupplyError> {
                panic!("deliberate")
            }
        }
        let e = ServiceProvider::new(service(None), Arc::new(Panics)).provide_credentials().await.unwrap_err();
        assert!(crate::kinesis::sdk_error_text(&e).contains("panicked"));
    }
}
