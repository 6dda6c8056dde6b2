//! Authentication, as Snowflake does it for Snowpipe Streaming:
//! - key-pair JWTs (RS256) signed by a registered user's private key, with
//!   `iss = ACCOUNT.USER.SHA256:<base64 sha256 of the DER public key>` and
//!   `sub = ACCOUNT.USER`; `iat`/`exp` in seconds or milliseconds;
//! - scoped tokens (HS256, signed with a per-process secret) minted by
//!   `/oauth/token` and sent back as `Bearer` with token type `OAUTH`;
//! - the managed tokens of Openflow's Snowflake deployments, in the shapes Openflow
//!   sends them (no token type, or `OAUTH`): a session token as `Bearer <token>`, a
//!   service account's OIDC token as `Bearer WIF.OIDC.<token>` (workload identity).
//!   Tests say which values are valid (`PUT /admin/managed-tokens`); a value valid
//!   before and no longer is answered as expired (401 `390318`), an unknown one as
//!   invalid (401 `390303`), as Snowflake answers OAuth access tokens.
//!
//! Signature checks use the `jsonwebtoken` crate; nothing here does crypto by hand.

use axum::http::HeaderMap;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::ApiError;

/// Longest JWT lifetime Snowflake accepts (`exp - iat`), plus a little slack.
const MAX_JWT_LIFETIME_S: i64 = 3600 + 60;
/// Allowed clock skew for `iat` in the future.
const CLOCK_SKEW_S: i64 = 60;
const SCOPED_ISSUER: &str = "snowflake-standin";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("public key is not a PEM 'PUBLIC KEY': {0}")]
    BadPublicKey(String),
    #[error("token error: {0}")]
    Token(String),
}

/// Who made a request, once authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `ACCOUNT.USER`, upper-case.
    pub account_user: String,
    pub role: Option<String>,
}

/// Which kind of bearer token a request carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    KeypairJwt,
    Scoped,
    Session,
    WorkloadIdentity,
}

/// The prefix Openflow puts before a workload identity (OIDC) token in `Authorization: Bearer`.
pub const WORKLOAD_IDENTITY_PREFIX: &str = "WIF.OIDC.";

/// One managed token a test declared (`PUT /admin/managed-tokens`).
#[derive(Debug, Clone, Deserialize)]
pub struct ManagedTokenSpec {
    /// `session` or `workload_identity`.
    pub kind: String,
    pub token: String,
    /// What `GET /admin/requests` shows for requests carrying it (never the token).
    pub label: String,
    /// `ACCOUNT.USER` the token stands for (default `OPENFLOW.SERVICE`).
    #[serde(default)]
    pub user: Option<String>,
}

#[derive(Clone)]
struct ManagedEntry {
    kind: TokenKind,
    label: String,
    account_user: String,
    valid: bool,
}

struct UserKey {
    fingerprint: String,
    key: DecodingKey,
}

/// Registered users and the scoped-token secret.
pub struct Authenticator {
    users: RwLock<HashMap<String, Vec<UserKey>>>,
    /// Managed tokens by (kind, token value): valid now, or valid before (expired).
    managed: RwLock<HashMap<(bool, String), ManagedEntry>>,
    secret: Vec<u8>,
    scoped_ttl_s: RwLock<i64>,
}

#[derive(Serialize, Deserialize)]
struct ScopedClaims {
    iss: String,
    sub: String,
    scope: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    role: Option<String>,
    iat: i64,
    exp: i64,
}

/// `SHA256:<base64>` of the DER SubjectPublicKeyInfo inside a `PUBLIC KEY` PEM.
pub fn fingerprint(public_key_pem: &str) -> Result<String, AuthError> {
    let parsed = pem::parse(public_key_pem.trim()).map_err(|e| AuthError::BadPublicKey(e.to_string()))?;
    if parsed.tag() != "PUBLIC KEY" {
        return Err(AuthError::BadPublicKey(format!("tag is '{}'", parsed.tag())));
    }
    let digest = Sha256::digest(parsed.contents());
    Ok(format!("SHA256:{}", base64::engine::general_purpose::STANDARD.encode(digest)))
}

pub fn now_s() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Normalises a JWT time claim that may be in seconds or milliseconds.
fn to_seconds(v: i64) -> i64 {
    if v > 100_000_000_000 {
        v / 1000
    } else {
        v
    }
}

fn claim_i64(claims: &Value, name: &str) -> Result<i64, ApiError> {
    match claims.get(name) {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| ApiError::jwt_invalid(format!("claim '{name}' is not an integer"))),
        _ => Err(ApiError::jwt_invalid(format!("claim '{name}' missing"))),
    }
}

impl Authenticator {
    pub fn new(scoped_ttl_s: i64) -> Self {
        let secret = uuid::Uuid::new_v4().as_bytes().iter().chain(uuid::Uuid::new_v4().as_bytes()).copied().collect();
        Authenticator {
            users: RwLock::new(HashMap::new()),
            managed: RwLock::new(HashMap::new()),
            secret,
            scoped_ttl_s: RwLock::new(scoped_ttl_s),
        }
    }

    /// Makes exactly `tokens` the valid managed tokens; those valid before and not listed expire.
    pub fn set_managed_tokens(&self, tokens: &[ManagedTokenSpec]) -> Result<(), ApiError> {
        let mut managed = self.managed.write().unwrap();
        for entry in managed.values_mut() {
            entry.valid = false;
        }
        for t in tokens {
            let kind = match t.kind.as_str() {
                "session" => TokenKind::Session,
                "workload_identity" => TokenKind::WorkloadIdentity,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "managed token kind '{other}' is not session or workload_identity"
                    )))
                }
            };
            if t.token.trim().is_empty() || t.token.trim() != t.token {
                return Err(ApiError::bad_request(format!(
                    "managed token '{}' must be non-empty and without surrounding blanks",
                    t.label
                )));
            }
            let account_user = t.user.clone().unwrap_or_else(|| "OPENFLOW.SERVICE".into()).to_uppercase();
            let entry = ManagedEntry { kind, label: t.label.clone(), account_user, valid: true };
            managed.insert((kind == TokenKind::WorkloadIdentity, t.token.clone()), entry);
        }
        Ok(())
    }

    /// The managed token a bearer value names, if any: (is workload identity, token).
    fn managed_key(token: &str) -> (bool, String) {
        match token.strip_prefix(WORKLOAD_IDENTITY_PREFIX) {
            Some(oidc) => (true, oidc.to_owned()),
            None => (false, token.to_owned()),
        }
    }

    /// What the request log shows of a request's credentials: the managed token's kind and label
    /// (never its value), or the JWT kind.
    pub fn describe(&self, headers: &HeaderMap) -> Value {
        let Ok(token) = bearer(headers) else { return serde_json::json!({"kind": "none"}) };
        let key = Self::managed_key(token);
        if let Some(e) = self.managed.read().unwrap().get(&key) {
            let kind = if e.kind == TokenKind::Session { "session" } else { "workload_identity" };
            return serde_json::json!({"kind": kind, "label": e.label, "valid": e.valid});
        }
        if key.0 {
            return serde_json::json!({"kind": "workload_identity", "label": null, "valid": false});
        }
        match jsonwebtoken::decode_header(token).map(|h| h.alg) {
            Ok(Algorithm::RS256) => serde_json::json!({"kind": "keypair_jwt"}),
            Ok(Algorithm::HS256) => serde_json::json!({"kind": "scoped"}),
            _ => serde_json::json!({"kind": "session", "label": null, "valid": false}),
        }
    }

    /// A managed token: known and valid, known and expired, or (with `WIF.OIDC.`) unknown.
    fn authenticate_managed(
        &self,
        token: &str,
        declared: Option<&str>,
    ) -> Option<Result<(Principal, TokenKind), ApiError>> {
        let key = Self::managed_key(token);
        let entry = self.managed.read().unwrap().get(&key).cloned();
        let is_managed = entry.is_some() || key.0;
        if !is_managed {
            return None;
        }
        if !matches!(declared, None | Some("OAUTH")) {
            return Some(Err(ApiError::jwt_invalid(format!(
                "token type {} not accepted for a managed token",
                declared.unwrap_or_default()
            ))));
        }
        Some(match entry {
            Some(e) if e.valid => Ok((Principal { account_user: e.account_user, role: None }, e.kind)),
            Some(_) => Err(ApiError::oauth_expired()),
            None => Err(ApiError::oauth_invalid()),
        })
    }

    pub fn set_scoped_ttl(&self, ttl_s: i64) {
        *self.scoped_ttl_s.write().unwrap() = ttl_s;
    }

    /// Registers (adds) a public key for `account.user`; returns its fingerprint.
    pub fn register(&self, account: &str, user: &str, public_key_pem: &str) -> Result<String, AuthError> {
        let fp = fingerprint(public_key_pem)?;
        let key = DecodingKey::from_rsa_pem(public_key_pem.trim().as_bytes())
            .map_err(|e| AuthError::BadPublicKey(e.to_string()))?;
        let name = format!("{}.{}", account.to_uppercase(), user.to_uppercase());
        let mut users = self.users.write().unwrap();
        let keys = users.entry(name).or_default();
        keys.retain(|k| k.fingerprint != fp);
        keys.push(UserKey { fingerprint: fp.clone(), key });
        Ok(fp)
    }

    /// Authenticates the `Authorization: Bearer` header of a request.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<(Principal, TokenKind), ApiError> {
        let token = bearer(headers)?;
        let declared = headers
            .get("x-snowflake-authorization-token-type")
            .and_then(|v| v.to_str().ok())
            .map(|s| s.to_ascii_uppercase());
        if let Some(answer) = self.authenticate_managed(token, declared.as_deref()) {
            return answer;
        }
        let alg = match jsonwebtoken::decode_header(token) {
            Ok(h) => h.alg,
            // Not a JWT and not a managed token we know: an OAuth access token Snowflake does not know.
            Err(_) if declared.as_deref() != Some("KEYPAIR_JWT") => return Err(ApiError::oauth_invalid()),
            Err(e) => return Err(ApiError::jwt_invalid(format!("malformed token: {e}"))),
        };
        match (declared.as_deref(), alg) {
            (Some("KEYPAIR_JWT") | None, Algorithm::RS256) => {
                Ok((self.verify_keypair_jwt(token)?, TokenKind::KeypairJwt))
            }
            (Some("OAUTH") | None, Algorithm::HS256) => Ok((self.verify_scoped(token)?, TokenKind::Scoped)),
            (Some(other), alg) => {
                Err(ApiError::jwt_invalid(format!("token type {other} with alg {alg:?} not accepted")))
            }
            (None, alg) => Err(ApiError::jwt_invalid(format!("alg {alg:?} not accepted"))),
        }
    }

    /// Verifies a key-pair JWT against the registered keys.
    pub fn verify_keypair_jwt(&self, token: &str) -> Result<Principal, ApiError> {
        let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| ApiError::jwt_invalid(format!("malformed claims: {e}")))?;
        let iss = claims.get("iss").and_then(Value::as_str).ok_or_else(|| ApiError::jwt_invalid("iss missing"))?;
        let (account_user, fp) = iss
            .split_once(".SHA256:")
            .ok_or_else(|| ApiError::jwt_invalid("iss is not ACCOUNT.USER.SHA256:<fingerprint>"))?;
        let account_user = account_user.to_uppercase();
        let fp = format!("SHA256:{fp}");
        let sub = claims.get("sub").and_then(Value::as_str).unwrap_or_default();
        if sub.to_uppercase() != account_user {
            return Err(ApiError::jwt_invalid("sub does not match iss"));
        }
        {
            let users = self.users.read().unwrap();
            let keys = users
                .get(&account_user)
                .ok_or_else(|| ApiError::jwt_invalid(format!("unknown user {account_user}")))?;
            let key = keys
                .iter()
                .find(|k| k.fingerprint == fp)
                .ok_or_else(|| ApiError::jwt_invalid("public key fingerprint does not match"))?;
            let mut validation = Validation::new(Algorithm::RS256);
            validation.validate_exp = false;
            validation.required_spec_claims.clear();
            jsonwebtoken::decode::<Value>(token, &key.key, &validation)
                .map_err(|e| ApiError::jwt_invalid(format!("signature: {e}")))?;
        }
        check_times(&claims)?;
        let role =
            claims.get("scp").and_then(Value::as_str).and_then(|s| s.strip_prefix("session:role:")).map(str::to_string);
        Ok(Principal { account_user, role })
    }

    /// Mints a scoped (HS256) token for `principal`, as `/oauth/token` does.
    pub fn mint_scoped(&self, principal: &Principal, scope: &str) -> Result<String, ApiError> {
        let now = now_s();
        let claims = ScopedClaims {
            iss: SCOPED_ISSUER.into(),
            sub: principal.account_user.clone(),
            scope: scope.into(),
            role: principal.role.clone(),
            iat: now,
            exp: now + *self.scoped_ttl_s.read().unwrap(),
        };
        let key = EncodingKey::from_secret(&self.secret).map_err(|e| ApiError::internal(format!("mint key: {e}")))?;
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
            .map_err(|e| ApiError::internal(format!("mint: {e}")))
    }

    /// Verifies a scoped token minted by this process.
    pub fn verify_scoped(&self, token: &str) -> Result<Principal, ApiError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_issuer(&[SCOPED_ISSUER]);
        let key = DecodingKey::from_secret(&self.secret).map_err(|e| ApiError::internal(e.to_string()))?;
        let data = jsonwebtoken::decode::<ScopedClaims>(token, &key, &validation)
            .map_err(|e| ApiError::jwt_invalid(format!("scoped token: {e}")))?;
        Ok(Principal { account_user: data.claims.sub, role: data.claims.role })
    }
}

/// Checks `iat`/`exp` (seconds or milliseconds): not expired, not issued in the
/// future, lifetime at most one hour.
fn check_times(claims: &Value) -> Result<(), ApiError> {
    let now = now_s();
    let exp = to_seconds(claim_i64(claims, "exp")?);
    let iat = to_seconds(claim_i64(claims, "iat")?);
    if exp <= now {
        return Err(ApiError::jwt_invalid("token expired"));
    }
    if iat > now + CLOCK_SKEW_S {
        return Err(ApiError::jwt_invalid("iat is in the future"));
    }
    if exp - iat > MAX_JWT_LIFETIME_S {
        return Err(ApiError::jwt_invalid("exp is more than one hour after iat"));
    }
    Ok(())
}

fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::jwt_invalid("Authorization header missing"))?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::jwt_invalid("Authorization is not a Bearer token"))
}
