//! Who PutSnowflake is to Snowflake: the key-pair JWT (RS256, signed by `jsonwebtoken`), or, with
//! Openflow's `SNOWFLAKE_MANAGED`, the token files its Snowflake deployments mount: the service
//! account's OIDC token when it can be read (sent as `Bearer WIF.OIDC.<token>`, workload identity),
//! else the session token (sent as `Bearer <token>`), both read again on every use because the
//! platform rotates them. The scoped ingest token minted from the JWT is cached by the API client
//! (`api.rs`). Keys and tokens never appear in errors or logs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey};
use sha2::{Digest, Sha256};

use crate::config::put_snowflake::{Authentication, PrivateKeySource};

/// A key-pair JWT lives 59 minutes (Snowflake's maximum is one hour); it is renewed 5 minutes early.
pub const JWT_LIFETIME: Duration = Duration::from_secs(59 * 60);
pub const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read the private key file '{path}': {reason}")]
    KeyFile { path: String, reason: String },
    #[error("the private key is not a usable RSA PKCS#8 key: {0}")]
    BadKey(String),
    #[error("the private key could not be decrypted: the Private Key Password is wrong, or the key is not PKCS#8 encrypted ({0})")]
    Decrypt(String),
    #[error(
        "no Snowflake managed token: the service account token file '{service_account}' cannot be read, \
         nor the session token file '{session}' ({reason})"
    )]
    NoManagedToken { service_account: String, session: String, reason: String },
    #[error("the Snowflake managed token file '{path}' is empty")]
    EmptyToken { path: String },
}

/// The token kinds of header `X-Snowflake-Authorization-Token-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenType {
    KeypairJwt,
    OAuth,
}

impl TokenType {
    pub fn header_value(self) -> &'static str {
        match self {
            Self::KeypairJwt => "KEYPAIR_JWT",
            Self::OAuth => "OAUTH",
        }
    }
}

/// How to prove who we are.
#[derive(Clone)]
pub enum Credentials {
    KeyPair(KeyPairSigner),
    /// Openflow (Snowflake deployment): token files rotated by the platform; read on each use.
    Managed {
        service_account: String,
        session: String,
    },
}

/// A token read from one of the managed token files. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub enum ManagedToken {
    /// From the service account token file: an OIDC token for workload identity federation.
    WorkloadIdentity(String),
    /// From the session token file.
    Session(String),
}

impl ManagedToken {
    /// The `Authorization: Bearer` value, as Openflow sends it.
    pub fn bearer(&self) -> String {
        match self {
            Self::WorkloadIdentity(t) => format!("WIF.OIDC.{t}"),
            Self::Session(t) => t.clone(),
        }
    }
}

impl std::fmt::Debug for ManagedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::WorkloadIdentity(_) => "WorkloadIdentity(<redacted>)",
            Self::Session(_) => "Session(<redacted>)",
        })
    }
}

/// The managed token to use now: the service account's when its file can be read (it wins, as in
/// Openflow), else the session token. Both are read afresh on every call.
pub fn read_managed_token(service_account: &str, session: &str) -> Result<ManagedToken, AuthError> {
    let token = |path: &str, text: String| {
        let t = text.trim().to_owned();
        if t.is_empty() {
            Err(AuthError::EmptyToken { path: path.to_owned() })
        } else {
            Ok(t)
        }
    };
    if let Ok(text) = std::fs::read_to_string(service_account) {
        return token(service_account, text).map(ManagedToken::WorkloadIdentity);
    }
    match std::fs::read_to_string(session) {
        Ok(text) => token(session, text).map(ManagedToken::Session),
        Err(e) => Err(AuthError::NoManagedToken {
            service_account: service_account.to_owned(),
            session: session.to_owned(),
            reason: e.to_string(),
        }),
    }
}

impl Credentials {
    pub fn from_config(account: &str, role: Option<&str>, auth: &Authentication) -> Result<Self, AuthError> {
        match auth {
            Authentication::SnowflakeManaged { service_account_token_file, session_token_file } => Ok(Self::Managed {
                service_account: service_account_token_file.clone(),
                session: session_token_file.clone(),
            }),
            Authentication::KeyPair { user, key, password } => {
                let pem = match key {
                    PrivateKeySource::Pem(secret) => secret.expose().to_owned(),
                    PrivateKeySource::File(path) => std::fs::read_to_string(path)
                        .map_err(|e| AuthError::KeyFile { path: path.clone(), reason: e.to_string() })?,
                };
                let signer = KeyPairSigner::new(account, user, role, &pem, password.as_ref().map(|p| p.expose()))?;
                Ok(Self::KeyPair(signer))
            }
        }
    }
}

/// Signs key-pair JWTs: `iss = ACCOUNT.USER.SHA256:<fingerprint of the public key>`, `sub = ACCOUNT.USER`.
#[derive(Clone)]
pub struct KeyPairSigner {
    qualified_user: String,
    fingerprint: String,
    role: Option<String>,
    key: EncodingKey,
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: String,
    sub: &'a str,
    iat: u64,
    exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    scp: Option<String>,
}

impl KeyPairSigner {
    pub fn new(
        account: &str,
        user: &str,
        role: Option<&str>,
        pem: &str,
        password: Option<&str>,
    ) -> Result<Self, AuthError> {
        let pkcs8_der = pkcs8_der(pem, password)?;
        let private = rsa::PrivateKey::from_pkcs8_der(&pkcs8_der).map_err(|e| AuthError::BadKey(e.to_string()))?;
        let public_der = private.to_public_key().to_public_key_der().map_err(|e| AuthError::BadKey(e.to_string()))?;
        let fingerprint = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(public_der.as_bytes()));
        let pkcs8_pem = pem_armour("PRIVATE KEY", &pkcs8_der);
        let key = EncodingKey::from_rsa_pem(pkcs8_pem.as_bytes()).map_err(|e| AuthError::BadKey(e.to_string()))?;
        Ok(Self {
            qualified_user: format!("{}.{}", jwt_account(account), user.to_uppercase()),
            fingerprint: format!("SHA256:{fingerprint}"),
            role: role.map(str::to_owned),
            key,
        })
    }

    /// `SHA256:<base64>`, as `DESC USER` shows it in RSA_PUBLIC_KEY_FP.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// A fresh JWT and when it expires.
    pub fn jwt(&self, now: SystemTime) -> (String, SystemTime) {
        let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let claims = Claims {
            iss: format!("{}.{}", self.qualified_user, self.fingerprint),
            sub: &self.qualified_user,
            iat,
            exp: iat + JWT_LIFETIME.as_secs(),
            scp: self.role.as_ref().map(|r| format!("session:role:{r}")),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .expect("RS256 signing with a parsed key");
        (token, now + JWT_LIFETIME)
    }
}

/// The account part of JWT claims: upper case, without region or cloud (`xy12345.us-east-2.aws` → `XY12345`).
fn jwt_account(account: &str) -> String {
    account.split('.').next().unwrap_or(account).to_uppercase()
}

// PEM armour labels, assembled so that secret scanners do not take this file for a key.
const ENCRYPTED_LABEL: &str = concat!("ENCRYPTED ", "PRIVATE KEY");
const PLAIN_LABEL: &str = concat!("PRIVATE ", "KEY");

/// The unencrypted PKCS#8 DER of a PEM key, decrypting it with the password when it is encrypted.
fn pkcs8_der(pem_text: &str, password: Option<&str>) -> Result<Vec<u8>, AuthError> {
    let (label, der) = pem_decode(pem_text).ok_or_else(|| AuthError::BadKey("no PEM block found".into()))?;
    match label.as_str() {
        ENCRYPTED_LABEL => {
            let password = password.ok_or_else(|| AuthError::Decrypt("no password given".into()))?;
            let info = pkcs8::EncryptedPrivateKeyInfoRef::try_from(der.as_slice())
                .map_err(|e| AuthError::Decrypt(e.to_string()))?;
            let document = info.decrypt(password).map_err(|e| AuthError::Decrypt(e.to_string()))?;
            Ok(document.as_bytes().to_vec())
        }
        PLAIN_LABEL => Ok(der),
        other => Err(AuthError::BadKey(format!("a PEM block of type '{other}' is not a PKCS#8 private key"))),
    }
}

fn pem_decode(text: &str) -> Option<(String, Vec<u8>)> {
    let begin = text.find("-----BEGIN ")?;
    let rest = &text[begin + "-----BEGIN ".len()..];
    let label_end = rest.find("-----")?;
    let label = rest[..label_end].to_owned();
    let body_start = label_end + 5;
    let end = rest.find("-----END ")?;
    let body: String = rest[body_start..end].chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).ok()?;
    Some((label, der))
}

fn pem_armour(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> =
        body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("base64 is ASCII")).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// `exp` of a JWT, read without checking its signature (used for tokens Snowflake minted for us).
pub fn unverified_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    // Some issuers write milliseconds.
    let secs = if exp > 100_000_000_000 { exp / 1000 } else { exp };
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = include_str!("../../tests/fixtures/user.p8");
    const ENCRYPTED_KEY: &str = include_str!("../../tests/fixtures/user-encrypted.p8");
    const PUBLIC_KEY: &str = include_str!("../../tests/fixtures/user.pub.pem");

    #[test]
    fn jwt_has_snowflakes_claims_and_verifies_with_the_public_key() {
        let signer = KeyPairSigner::new("myorg-acct.us-east-1", "kinesnow_user", Some("LOADER"), KEY, None).unwrap();
        let now = SystemTime::now();
        let (jwt, expires) = signer.jwt(now);
        assert_eq!(expires, now + JWT_LIFETIME);
        let decoding = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC_KEY.as_bytes()).unwrap();
        let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
        validation.set_required_spec_claims(&["exp"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(&jwt, &decoding, &validation).unwrap().claims;
        assert_eq!(claims["sub"], "MYORG-ACCT.KINESNOW_USER");
        assert_eq!(claims["iss"], format!("MYORG-ACCT.KINESNOW_USER.{}", signer.fingerprint()));
        assert_eq!(claims["scp"], "session:role:LOADER");
        assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 59 * 60);
        assert_eq!(
            unverified_expiry(&jwt).unwrap().duration_since(UNIX_EPOCH).unwrap().as_secs(),
            claims["exp"].as_u64().unwrap()
        );
    }

    #[test]
    fn the_fingerprint_is_that_of_the_public_key() {
        let (_, der) = pem_decode(PUBLIC_KEY).unwrap();
        let expected = format!("SHA256:{}", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&der)));
        assert_eq!(KeyPairSigner::new("a-b", "u", None, KEY, None).unwrap().fingerprint(), expected);
    }

    #[test]
    fn encrypted_keys_need_the_right_password() {
        let plain = KeyPairSigner::new("a-b", "u", None, KEY, None).unwrap();
        let decrypted = KeyPairSigner::new("a-b", "u", None, ENCRYPTED_KEY, Some("fixture-password")).unwrap();
        assert_eq!(plain.fingerprint(), decrypted.fingerprint());
        let err = KeyPairSigner::new("a-b", "u", None, ENCRYPTED_KEY, Some("wrong-password")).err().unwrap();
        assert!(matches!(err, AuthError::Decrypt(_)), "{err}");
        assert!(!err.to_string().contains("wrong-password"));
        assert!(matches!(KeyPairSigner::new("a-b", "u", None, ENCRYPTED_KEY, None), Err(AuthError::Decrypt(_))));
    }

    fn temp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("kinesnow-auth-{}-{name}", std::process::id()))
    }

    #[test]
    fn the_service_account_token_wins_and_both_files_are_read_on_every_use() {
        let (sa, session) = (temp("sa"), temp("session"));
        let (sa_path, session_path) = (sa.to_str().unwrap(), session.to_str().unwrap());
        let _ = std::fs::remove_file(&sa);
        std::fs::write(&session, "session-1\n").unwrap();
        let t = read_managed_token(sa_path, session_path).unwrap();
        assert_eq!((t.bearer(), format!("{t:?}")), ("session-1".to_owned(), "Session(<redacted>)".to_owned()));
        std::fs::write(&sa, " oidc-1\n").unwrap();
        let t = read_managed_token(sa_path, session_path).unwrap();
        assert_eq!(t.bearer(), "WIF.OIDC.oidc-1", "the service account token wins, sent as Openflow sends it");
        assert!(!format!("{t:?}").contains("oidc-1"));
        std::fs::write(&sa, "oidc-2").unwrap();
        assert_eq!(
            read_managed_token(sa_path, session_path).unwrap().bearer(),
            "WIF.OIDC.oidc-2",
            "a rotated file is read again"
        );
        std::fs::write(&sa, "  \n").unwrap();
        let err = read_managed_token(sa_path, session_path).unwrap_err();
        assert!(matches!(&err, AuthError::EmptyToken { path } if path == sa_path), "{err}");
        std::fs::remove_file(&sa).unwrap();
        std::fs::remove_file(&session).unwrap();
        let err = read_managed_token(sa_path, session_path).unwrap_err().to_string();
        assert!(err.contains(sa_path) && err.contains(session_path), "both paths are named: {err}");
        assert!(!err.contains("session-1") && !err.contains("oidc"), "{err}");
    }

    #[test]
    fn garbage_is_not_a_key() {
        assert!(matches!(KeyPairSigner::new("a-b", "u", None, "hello", None), Err(AuthError::BadKey(_))));
    }
}
