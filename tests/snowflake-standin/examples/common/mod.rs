//! What the stand-in's load generators share: the bench user, its table, and a scoped token got the
//! way a client gets one (a key-pair JWT exchanged at `/oauth/token`).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

const USER_KEY: &str = include_str!("../../tests/fixtures/user.p8");
const USER_PUB: &str = include_str!("../../tests/fixtures/user.pub.pem");

/// Creates the user `BENCH.U` and runs `create_table` through the admin API of the stand-in at
/// `base`, then returns a scoped token for that user.
pub async fn bench_session(http: &reqwest::Client, base: &str, create_table: &str) -> String {
    let admin = |path: &str, body: serde_json::Value| http.post(format!("{base}{path}")).json(&body).send();
    let r = admin("/admin/users", json!({"account": "BENCH", "user": "U", "public_key_pem": USER_PUB})).await.unwrap();
    assert!(r.status().is_success(), "creating the bench user: {}", r.status());
    let r = admin("/admin/sql", json!({ "sql": create_table })).await.unwrap();
    assert!(r.status().is_success(), "creating the bench table: {}", r.status());
    let fp = snowflake_standin::auth::fingerprint(USER_PUB).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let jwt = jsonwebtoken::encode(
        &Header::new(Algorithm::RS256),
        &json!({"iss": format!("BENCH.U.{fp}"), "sub": "BENCH.U", "iat": now, "exp": now + 3000}),
        &EncodingKey::from_rsa_pem(USER_KEY.as_bytes()).unwrap(),
    )
    .unwrap();
    http.post(format!("{base}/oauth/token"))
        .header("Accept", "application/json")
        .header("Authorization", format!("Bearer {jwt}"))
        .body("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&scope=127.0.0.1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
