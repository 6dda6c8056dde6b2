//! TLS material generated at start: a throw-away CA and a server certificate it
//! signs (SANs: IP 127.0.0.1, IP ::1, `localhost`). The CA is written as `ca.pem`
//! so real clients (e.g. the official SDK via `SSL_CERT_FILE`) can verify us.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// PEM-encoded CA certificate plus server certificate chain and key.
pub struct TlsMaterial {
    pub ca_pem: String,
    pub cert_chain_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// Generates a fresh CA and a server certificate for loopback.
pub fn generate() -> Result<TlsMaterial, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "snowflake-standin test CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.subject_alt_names.push(SanType::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    params.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = params.signed_by(&server_key, &issuer)?;

    Ok(TlsMaterial {
        ca_pem: ca_cert.pem(),
        cert_chain_pem: format!("{}{}", server_cert.pem(), ca_cert.pem()),
        key_pem: server_key.serialize_pem(),
    })
}
