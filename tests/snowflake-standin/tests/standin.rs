//! Integration tests of the stand-in over HTTP: auth, channels and tokens,
//! commit lag, payload handling, schema rules, error tables, Iceberg, faults.

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};

const T_DDL: &str = "CREATE OR REPLACE TABLE DB.PUBLIC.T (id NUMBER(38,0) NOT NULL, name VARCHAR, score FLOAT)";

async fn env_with_t(lag: u64) -> Env {
    let e = env(lag).await;
    e.sql(T_DDL).await;
    e
}

// ---------------------------------------------------------------- auth

#[tokio::test]
async fn auth_accepts_seconds_and_milliseconds() {
    let e = env(50).await;
    for ms in [false, true] {
        let jwt = keypair_jwt(USER_KEY, USER_PUB, now_s(), now_s() + 3540, ms);
        let r = e.oauth(&jwt).await;
        assert_eq!(r.status, 200, "ms={ms}: {}", r.text);
        assert_eq!(r.text.split('.').count(), 3, "scoped token is a plain-text JWT");
        let host = e
            .http
            .get(format!("{}/v2/streaming/hostname", e.base))
            .header("Accept", "application/json")
            .header("Authorization", format!("Bearer {jwt}"))
            .header("X-Snowflake-Authorization-Token-Type", "KEYPAIR_JWT")
            .send()
            .await
            .unwrap();
        assert_eq!(host.status(), 200);
        assert_eq!(host.text().await.unwrap(), "127.0.0.1");
    }
}

#[tokio::test]
async fn auth_rejects_expired_foreign_and_malformed_tokens() {
    let e = env(50).await;
    let expired = keypair_jwt(USER_KEY, USER_PUB, now_s() - 7200, now_s() - 3600, false);
    let foreign = keypair_jwt(FOREIGN_KEY, FOREIGN_PUB, now_s(), now_s() + 3540, false);
    // Signed by the foreign key but claiming the registered key's fingerprint.
    let forged = {
        let fp = snowflake_standin::auth::fingerprint(USER_PUB).unwrap();
        let claims = json!({"iss": format!("{ACCOUNT}.{USER}.{fp}"), "sub": format!("{ACCOUNT}.{USER}"), "iat": now_s(), "exp": now_s() + 600});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_pem(FOREIGN_KEY.as_bytes()).unwrap(),
        )
        .unwrap()
    };
    let too_long = keypair_jwt(USER_KEY, USER_PUB, now_s(), now_s() + 7200, true);
    for (name, jwt) in [
        ("expired", expired),
        ("foreign", foreign),
        ("forged", forged),
        ("lifetime", too_long),
        ("garbage", "abc.def.ghi".into()),
    ] {
        let r = e.oauth(&jwt).await;
        assert_eq!(r.status, 401, "{name}: {}", r.text);
        assert_eq!(r.code(), "390144", "{name}");
    }
    // A scoped token cannot be used to mint another, and garbage scoped tokens are refused.
    let r = e.oauth(&e.scoped.clone()).await;
    assert_eq!(r.status, 401);
    let mut bad = e.scoped.clone();
    bad.push('x');
    let r = e
        .http
        .post(format!("{}{}:pipe-info", e.base, Env::pipe_path("T")))
        .header("Accept", "application/json")
        .header("Authorization", format!("Bearer {bad}"))
        .header("X-Snowflake-Authorization-Token-Type", "OAUTH")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// GET /v2/streaming/hostname with `Authorization: Bearer <bearer>` and an optional token type.
async fn hostname_with(e: &Env, bearer: &str, token_type: Option<&str>) -> Resp {
    let mut b = e
        .http
        .get(format!("{}/v2/streaming/hostname", e.base))
        .header("Accept", "application/json")
        .header("Authorization", format!("Bearer {bearer}"));
    if let Some(t) = token_type {
        b = b.header("X-Snowflake-Authorization-Token-Type", t);
    }
    let r = b.send().await.unwrap();
    Resp { status: r.status(), text: r.text().await.unwrap() }
}

#[tokio::test]
async fn managed_tokens_in_openflows_shapes_are_told_apart_and_expire_when_rotated() {
    let e = env(50).await;
    let tokens = |session: &str, oidc: &str| {
        json!({"tokens": [
            {"kind": "session", "token": session, "label": session},
            {"kind": "workload_identity", "token": oidc, "label": oidc}
        ]})
    };
    e.admin("PUT", "/admin/managed-tokens", tokens("session-1", "oidc-1")).await;
    assert_eq!(hostname_with(&e, "session-1", None).await.status, 200, "a session token as Openflow sends it");
    assert_eq!(hostname_with(&e, "session-1", Some("OAUTH")).await.status, 200);
    assert_eq!(hostname_with(&e, "WIF.OIDC.oidc-1", None).await.status, 200, "an OIDC token as Openflow sends it");
    // The OIDC token alone is not a session token, nor the session token an OIDC one.
    assert_eq!(hostname_with(&e, "oidc-1", None).await.code(), "390303");
    assert_eq!(hostname_with(&e, "WIF.OIDC.session-1", None).await.code(), "390303");
    assert_eq!(hostname_with(&e, "session-1", Some("KEYPAIR_JWT")).await.code(), "390144");
    assert_eq!(hostname_with(&e, "not-a-token", None).await.code(), "390303");
    // Rotation: the old values are expired, the new ones valid.
    e.admin("PUT", "/admin/managed-tokens", tokens("session-2", "oidc-2")).await;
    for old in ["session-1", "WIF.OIDC.oidc-1"] {
        let r = hostname_with(&e, old, None).await;
        assert_eq!((r.status.as_u16(), r.code()), (401, "390318".to_owned()), "{old}: {}", r.text);
        assert!(!r.text.contains(old.trim_start_matches("WIF.OIDC.")), "the answer never echoes the token: {}", r.text);
    }
    assert_eq!(hostname_with(&e, "WIF.OIDC.oidc-2", None).await.status, 200);
    // A managed token cannot mint a scoped token; it is used as it is.
    assert_eq!(e.oauth("session-2").await.status, 401);
    // The request log names the kind and label, never the value.
    let log = e.admin("GET", "/admin/requests?path_contains=/hostname", Value::Null).await;
    let seen: Vec<(String, Value)> = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["auth"]["kind"].as_str().unwrap().to_owned(), r["auth"]["label"].clone()))
        .collect();
    assert_eq!(seen[0], ("session".to_owned(), json!("session-1")));
    assert_eq!(seen[2], ("workload_identity".to_owned(), json!("oidc-1")));
    assert_eq!(seen.last().unwrap(), &("workload_identity".to_owned(), json!("oidc-2")));
    assert!(!log.to_string().contains("WIF.OIDC"), "no bearer value in the log");
}

#[tokio::test]
async fn expired_scoped_token_is_rejected() {
    let mut e =
        env_with(snowflake_standin::Settings { scoped_token_ttl_s: 1, commit_lag_ms: 50, ..Default::default() }).await;
    e.sql(T_DDL).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = e.open("T", "c1", false).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.code(), "390144");
    e.scoped = e.oauth(&user_jwt()).await.text;
    e.admin("POST", "/admin/settings", json!({"scoped_token_ttl_s": 3600})).await;
    e.scoped = e.oauth(&user_jwt()).await.text;
    assert_eq!(e.open("T", "c1", false).await.status, 200);
}

#[tokio::test]
async fn accept_header_is_required() {
    let e = env_with_t(50).await;
    let r = e
        .http
        .put(format!("{}{}/channels/c1", e.base, Env::pipe_path("T")))
        .header("Authorization", format!("Bearer {}", e.scoped))
        .header("X-Snowflake-Authorization-Token-Type", "OAUTH")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "391902");
}

// ---------------------------------------------------------------- pipes and channels

#[tokio::test]
async fn pipe_info_has_the_fields_the_sdk_needs() {
    let e = env_with_t(50).await;
    let r = e
        .call(
            "POST",
            &format!("{}:pipe-info", Env::pipe_path("T")),
            Some(json!({"generate_new_token": true, "encryption_version": "AES-CTR-128.1"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["status_code"], 0);
    for k in ["rowset_stage_location", "durable_stage_location", "pipe_encryption_info"] {
        assert!(v[k].is_object(), "{k}");
    }
    assert_eq!(v["rowset_stage_location"]["creds"]["AWS_KEY_ID"], "standin");
    // Unknown table / pipe.
    let r = e.call("POST", &format!("{}:pipe-info", Env::pipe_path("NOPE")), Some(json!({}))).await;
    assert_eq!((r.status.as_u16(), r.code().as_str()), (404, "ERR_TABLE_DOES_NOT_EXIST_NOT_AUTHORIZED"));
    let r = e.call("POST", "/v2/streaming/databases/DB/schemas/PUBLIC/pipes/NOPIPE:pipe-info", Some(json!({}))).await;
    assert_eq!((r.status.as_u16(), r.code().as_str()), (404, "ERR_PIPE_DOES_NOT_EXIST_OR_NOT_AUTHORIZED"));
    // Quoted, URL-encoded default pipe name and lower-case db/schema resolve too.
    let r = e
        .call("POST", "/v2/streaming/databases/db/schemas/public/pipes/%22T-STREAMING%22:pipe-info", Some(json!({})))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn open_append_commit_lag_and_status() {
    let e = env_with_t(400).await;
    let r = e.open("T", "shard-0", true).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    let token = v["next_continuation_token"].as_str().unwrap().to_string();
    let st = &v["channel_status"];
    assert_eq!(st["channel_status_code"], "SUCCESS");
    assert_eq!(st["last_committed_offset_token"], Value::Null);
    assert_eq!(st["pipe_name"], "T-STREAMING");

    let r = e
        .append(
            "T",
            "shard-0",
            &token,
            "3",
            &[json!({"id": 1, "name": "a"}), json!({"ID": 2, "Name": "b", "SCORE": 1.5}), json!({"id": 3})],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let next = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    assert_ne!(next, token);

    // Not visible before the commit lag.
    assert!(e.query("SELECT * FROM DB.PUBLIC.T").await.is_empty());
    assert_eq!(e.status("T", "shard-0").await["last_committed_offset_token"], Value::Null);

    let st = e.wait_committed("T", "shard-0", "3").await;
    assert_eq!(st["rows_inserted"], 3);
    assert_eq!(st["rows_parsed"], 3);
    assert_eq!(st["rows_error_count"], 0);
    let rows = e.query("SELECT id, name, score FROM DB.PUBLIC.T ORDER BY id").await;
    assert_eq!(
        rows,
        vec![
            json!({"ID": 1, "NAME": "a", "SCORE": null}),
            json!({"ID": 2, "NAME": "b", "SCORE": 1.5}),
            json!({"ID": 3, "NAME": null, "SCORE": null})
        ]
    );

    // startOffsetToken/endOffsetToken (as the SDK sends them).
    let q = format!("startOffsetToken=4&endOffsetToken=5&continuationToken={next}&requestId=r1&retryCount=0");
    let r = e.append_raw("T", "shard-0", &q, b"{\"id\":4}\n{\"id\":5}\n".to_vec(), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    e.wait_committed("T", "shard-0", "5").await;

    // Unknown channels are omitted from bulk status.
    let r = e
        .call(
            "POST",
            &format!("{}:bulk-channel-status", Env::pipe_path("T")),
            Some(json!({"channel_names": ["shard-0", "nope"]})),
        )
        .await;
    let statuses = r.json()["channel_statuses"].as_object().unwrap().clone();
    assert_eq!(statuses.keys().collect::<Vec<_>>(), vec!["shard-0"]);
}

#[tokio::test]
async fn retried_request_id_is_not_appended_twice() {
    let e = env_with_t(50).await;
    let token = e.open_ok("T", "c").await;
    let q = format!("continuationToken={token}&offsetToken=1&requestId=same&retryCount=0");
    let a = e.append_raw("T", "c", &q, b"{\"id\":1}".to_vec(), None).await;
    let q = format!("continuationToken={token}&offsetToken=1&requestId=same&retryCount=1");
    let b = e.append_raw("T", "c", &q, b"{\"id\":1}".to_vec(), None).await;
    assert_eq!(a.json(), b.json());
    e.wait_committed("T", "c", "1").await;
    assert_eq!(e.query("SELECT count(*) AS n FROM DB.PUBLIC.T").await, vec![json!({"n": 1})]);
}

#[tokio::test]
async fn reopen_makes_tokens_stale_and_discards_uncommitted_rows() {
    let e = env_with_t(100).await;
    let t1 = e.open_ok("T", "c").await;
    let r = e.append("T", "c", &t1, "1", &[json!({"id": 1})]).await;
    assert_eq!(r.status, 200);
    e.wait_committed("T", "c", "1").await;
    e.admin("POST", "/admin/settings", json!({"commit_lag_ms": 60000})).await;
    let t1b = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    assert_eq!(e.append("T", "c", &t1b, "2", &[json!({"id": 2})]).await.status, 200);

    // Reopen (fail_on_uncommitted_rows=false): the uncommitted row 2 is discarded.
    let t2 = e.open_ok("T", "c").await;
    let st = e.status("T", "c").await;
    assert_eq!(st["last_committed_offset_token"], "1");
    let r = e.append("T", "c", &t1b, "3", &[json!({"id": 3})]).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.code(), "STALE_CONTINUATION_TOKEN_SEQUENCER");

    e.admin("POST", "/admin/settings", json!({"commit_lag_ms": 50})).await;
    assert_eq!(e.append("T", "c", &t2, "4", &[json!({"id": 4})]).await.status, 200);
    e.wait_committed("T", "c", "4").await;
    let ids: Vec<Value> = e.query("SELECT id FROM DB.PUBLIC.T ORDER BY id").await;
    assert_eq!(ids, vec![json!({"ID": 1}), json!({"ID": 4})]);
}

#[tokio::test]
async fn fail_on_uncommitted_rows_gives_409() {
    let e = env_with_t(60000).await;
    let t = e.open_ok("T", "c").await;
    assert_eq!(e.append("T", "c", &t, "1", &[json!({"id": 1})]).await.status, 200);
    let r = e.open("T", "c", true).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.code(), "ERR_CHANNEL_HAS_UNCOMMITTED_DATA");
    e.admin("POST", "/admin/commit-now", json!({})).await;
    e.wait_committed("T", "c", "1").await;
    assert_eq!(e.open("T", "c", true).await.status, 200);
}

#[tokio::test]
async fn concurrent_opens_get_409_in_progress() {
    let e =
        env_with(snowflake_standin::Settings { open_latency_ms: 300, commit_lag_ms: 50, ..Default::default() }).await;
    e.sql(T_DDL).await;
    let (a, b) = tokio::join!(e.open("T", "c", false), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        e.open("T", "c", false).await
    });
    assert_eq!(a.status, 200);
    assert_eq!(b.status, 409);
    assert_eq!(b.code(), "ERR_OPEN_CHANNEL_IN_PROGRESS");
}

#[tokio::test]
async fn open_with_offset_token_sets_committed_token() {
    let e = env_with_t(50).await;
    let r = e
        .call(
            "PUT",
            &format!("{}/channels/c", Env::pipe_path("T")),
            Some(json!({"offset_token": "42", "fail_on_uncommitted_rows": false})),
        )
        .await;
    assert_eq!(r.json()["channel_status"]["last_committed_offset_token"], "42");
}

#[tokio::test]
async fn drop_channel() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    let r = e.call("DELETE", &format!("{}/channels/c", Env::pipe_path("T")), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = e
        .call("POST", &format!("{}:bulk-channel-status", Env::pipe_path("T")), Some(json!({"channel_names": ["c"]})))
        .await;
    assert_eq!(r.json()["channel_statuses"], json!({}));
    let r = e.append("T", "c", &t, "1", &[json!({"id": 1})]).await;
    assert_eq!((r.status.as_u16(), r.code().as_str()), (404, "ERR_CHANNEL_DOES_NOT_EXIST_OR_NOT_AUTHORIZED"));
    let r = e.call("DELETE", &format!("{}/channels/c", Env::pipe_path("T")), None).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn elastic_channel_needs_no_open_or_tokens() {
    let e = env_with_t(50).await;
    let st = e.status("T", "ELASTIC").await;
    assert_eq!(st["channel_status_code"], "SUCCESS");
    for i in 0..3 {
        let r = e
            .append_raw(
                "T",
                "ELASTIC",
                &format!("requestId=e{i}&retryCount=0"),
                format!("{{\"id\":{i}}}\n\n").into_bytes(),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(e.status("T", "ELASTIC").await["rows_inserted"], 3);
    assert_eq!(e.query("SELECT count(*) AS n FROM DB.PUBLIC.T").await, vec![json!({"n": 3})]);
}

#[tokio::test]
async fn named_pipe_writes_to_its_table() {
    let e = env_with_t(50).await;
    e.sql("CREATE PIPE DB.PUBLIC.MYPIPE AS COPY INTO DB.PUBLIC.T FROM TABLE(DATA_SOURCE(TYPE => 'STREAMING')) MATCH_BY_COLUMN_NAME=CASE_INSENSITIVE").await;
    let path = "/v2/streaming/databases/DB/schemas/PUBLIC/pipes/MYPIPE";
    let r = e.call("PUT", &format!("{path}/channels/c"), Some(json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let t = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    let url = format!("{}/v2/streaming/data/databases/DB/schemas/PUBLIC/pipes/MYPIPE/channels/c/rows?continuationToken={t}&offsetToken=7", e.base);
    let r = e
        .http
        .post(url)
        .header("Accept", "application/json")
        .header("Authorization", format!("Bearer {}", e.scoped))
        .body("{\"id\":7}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(e.query("SELECT id FROM DB.PUBLIC.T").await, vec![json!({"ID": 7})]);
}

// ---------------------------------------------------------------- payloads

#[tokio::test]
async fn blank_lines_crlf_zstd_and_gzip() {
    let e = env_with_t(50).await;
    let mut t = e.open_ok("T", "c").await;
    let body = b"{\"id\":1}\r\n\r\n{\"id\":2}\n\n   \n{\"id\":3}\r\n".to_vec();
    let zstd_body = zstd::encode_all(&body[..], 3).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&body).unwrap();
    let gzip_body = gz.finish().unwrap();
    for (i, (payload, enc)) in
        [(body.clone(), None), (zstd_body, Some("zstd")), (gzip_body, Some("gzip"))].into_iter().enumerate()
    {
        let r = e.append_raw("T", "c", &format!("continuationToken={t}&offsetToken={i}"), payload, enc).await;
        assert_eq!(r.status, 200, "{enc:?}: {}", r.text);
        t = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    }
    let st = e.wait_committed("T", "c", "2").await;
    assert_eq!(st["rows_inserted"], 9);
    assert_eq!(st["rows_error_count"], 0);
    let r = e.append_raw("T", "c", &format!("continuationToken={t}&offsetToken=9"), b"x".to_vec(), Some("br")).await;
    assert_eq!(r.status, 415);
}

#[tokio::test]
async fn size_caps() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    // Wire body over 4 MiB.
    let big = format!("{{\"id\":1,\"name\":\"{}\"}}\n", "x".repeat(4 * 1024 * 1024 + 10));
    let r =
        e.append_raw("T", "c", &format!("continuationToken={t}&offsetToken=1"), big.clone().into_bytes(), None).await;
    assert_eq!(r.status, 413, "{}", r.text);
    // Compressed under 4 MiB but over 16 MiB decoded.
    let huge: String = (0..20).map(|_| format!("{{\"id\":1,\"name\":\"{}\"}}\n", "y".repeat(1024 * 1024))).collect();
    let z = zstd::encode_all(huge.as_bytes(), 3).unwrap();
    assert!(z.len() < 4 * 1024 * 1024);
    let r = e.append_raw("T", "c", &format!("continuationToken={t}&offsetToken=1"), z, Some("zstd")).await;
    assert_eq!(r.status, 413, "{}", r.text);
    // 3.9 MiB compressed is fine.
    let ok = format!("{{\"id\":1,\"name\":\"{}\"}}\n", "z".repeat(3 * 1024 * 1024));
    let r = e.append_raw("T", "c", &format!("continuationToken={t}&offsetToken=1"), ok.into_bytes(), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

// ---------------------------------------------------------------- schema, errors, iceberg

#[tokio::test]
async fn unknown_keys_ignored_without_evolution() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    e.append("T", "c", &t, "1", &[json!({"id": 1, "extra": "x"})]).await;
    let st = e.wait_committed("T", "c", "1").await;
    assert_eq!(st["rows_inserted"], 1);
    let cols = e.admin("GET", "/admin/tables", json!(null)).await["tables"][0]["columns"].as_array().unwrap().len();
    assert_eq!(cols, 3);
}

#[tokio::test]
async fn schema_evolution_adds_columns_and_drops_not_null() {
    let e = env(50).await;
    e.sql("CREATE TABLE DB.PUBLIC.EV (id NUMBER NOT NULL, must VARCHAR NOT NULL) ENABLE_SCHEMA_EVOLUTION = TRUE").await;
    let t = e.open_ok("EV", "c").await;
    let rows = [
        json!({"id": 1, "must": "m", "s": "text", "i": 5, "f": 2.5, "b": true, "o": {"k": [1, 2]}, "a": [1, "x"], "n": null}),
        json!({"id": 2, "s": "no must"}),
    ];
    assert_eq!(e.append("EV", "c", &t, "1", &rows).await.status, 200);
    let st = e.wait_committed("EV", "c", "1").await;
    assert_eq!(st["rows_error_count"], 0, "{st}");
    let tables = e.admin("GET", "/admin/tables", json!(null)).await;
    let cols: Vec<(String, String, bool)> = tables["tables"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["name"].as_str().unwrap().into(), c["type"].as_str().unwrap().into(), c["nullable"].as_bool().unwrap())
        })
        .collect();
    let want = |n: &str, ty: &str| cols.iter().any(|(cn, ct, _)| cn == n && ct == ty);
    assert!(
        want("S", "VARCHAR")
            && want("I", "NUMBER(38,0)")
            && want("F", "FLOAT")
            && want("B", "BOOLEAN")
            && want("O", "VARIANT")
            && want("A", "VARIANT"),
        "{cols:?}"
    );
    assert!(!cols.iter().any(|(n, _, _)| n == "N"), "null values add no column");
    assert!(cols.iter().find(|(n, _, _)| n == "MUST").unwrap().2, "NOT NULL dropped");
    let rows = e.query("SELECT id, must, s, i, f, b, o, a FROM DB.PUBLIC.EV ORDER BY id").await;
    assert_eq!(
        rows[0],
        json!({"ID": 1, "MUST": "m", "S": "text", "I": 5, "F": 2.5, "B": true, "O": {"k": [1, 2]}, "A": [1, "x"]})
    );
    assert_eq!(rows[1]["MUST"], Value::Null);
}

#[tokio::test]
async fn conversion_failures_go_to_the_error_table() {
    let e = env(50).await;
    e.sql("CREATE TABLE DB.PUBLIC.E (id NUMBER(5,0) NOT NULL, d DATE, name VARCHAR(3)) ERROR_LOGGING = TRUE").await;
    let t = e.open_ok("E", "c").await;
    let rows = [
        json!({"id": 1, "d": "2024-10-15"}),
        json!({"id": "abc"}),
        json!({"id": 2, "d": "2024-13-01"}),
        json!({"id": 3, "name": "toolong"}),
        json!({"name": "x"}),
        json!({"id": 123456}),
    ];
    let body: String = rows.iter().map(|r| format!("{r}\n")).collect::<String>() + "not json\n";
    let r = e.append_raw("E", "c", &format!("continuationToken={t}&offsetToken=10"), body.into_bytes(), None).await;
    assert_eq!(r.status, 200);
    let st = e.wait_committed("E", "c", "10").await;
    assert_eq!(st["rows_inserted"], 1);
    assert_eq!(st["rows_error_count"], 6);
    assert_eq!(st["last_error_offset_upper_bound"], "10");
    assert!(st["last_error_message"].as_str().unwrap().contains("cannot be converted"), "{st}");
    assert!(st["last_error_timestamp_ms"].is_number());
    assert_eq!(
        e.query("SELECT id, CAST(d AS VARCHAR) AS d FROM DB.PUBLIC.E").await,
        vec![json!({"ID": 1.0, "d": "2024-10-15"})]
    );
    let errs = e.query("SELECT ROW_INDEX, ERROR_CODE, COLUMN_NAME, RECORD_CONTENT, OFFSET_TOKEN FROM ERROR_TABLE(DB.PUBLIC.E) ORDER BY ROW_INDEX").await;
    assert_eq!(errs.len(), 6);
    assert_eq!(errs[0]["RECORD_CONTENT"], r#"{"id":"abc"}"#);
    assert_eq!(errs[0]["COLUMN_NAME"], "ID");
    assert_eq!(errs[3]["ERROR_CODE"], "100072");
    assert_eq!(errs[5]["RECORD_CONTENT"], "not json");
}

#[tokio::test]
async fn row_errors_without_error_logging_are_only_counted() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    e.append("T", "c", &t, "1", &[json!({"id": "x"}), json!({"id": 2})]).await;
    let st = e.wait_committed("T", "c", "1").await;
    assert_eq!((st["rows_inserted"].as_i64(), st["rows_error_count"].as_i64()), (Some(1), Some(1)));
}

#[tokio::test]
async fn iceberg_rules() {
    let e = env(50).await;
    let bad = e
        .http
        .post(format!("{}/admin/sql", e.base))
        .json(&json!({"sql": "CREATE ICEBERG TABLE DB.PUBLIC.BAD (v VARIANT) EXTERNAL_VOLUME = 'x'"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400, "VARIANT is refused on Iceberg v2");
    e.sql("CREATE ICEBERG TABLE DB.PUBLIC.ICE (id INT, date_added DATE, kinesisMetadata OBJECT(stream STRING, shardId STRING, subSequenceNumber INTEGER)) CATALOG = 'SNOWFLAKE' ERROR_LOGGING = TRUE ENABLE_SCHEMA_EVOLUTION = TRUE").await;
    let t = e.open_ok("ICE", "c").await;
    let rows = [
        json!({"id": 1, "date_added": "2024-10-15", "kinesisMetadata": {"stream": "s", "shardId": "shardId-0", "subSequenceNumber": 0}}),
        json!({"id": 2, "kinesisMetadata": {"stream": "s", "shardId": "shardId-0"}}),
        json!({"id": 3, "kinesisMetadata": {"stream": "s", "shardid": "wrong case", "subSequenceNumber": 0}}),
        json!({"id": 4, "kinesisMetadata": {"stream": "s", "shardId": null, "subSequenceNumber": 1}, "nested": {"a": 1}, "arr": [1], "flag": true}),
    ];
    e.append("ICE", "c", &t, "1", &rows).await;
    let st = e.wait_committed("ICE", "c", "1").await;
    assert_eq!((st["rows_inserted"].as_i64(), st["rows_error_count"].as_i64()), (Some(2), Some(2)), "{st}");
    let got = e
        .query("SELECT id, CAST(date_added AS VARCHAR) AS d, kinesisMetadata AS m FROM DB.PUBLIC.ICE ORDER BY id")
        .await;
    assert_eq!(
        got[0],
        json!({"ID": 1, "d": "2024-10-15", "m": {"stream": "s", "shardId": "shardId-0", "subSequenceNumber": 0}})
    );
    assert_eq!(got[1]["m"]["shardId"], Value::Null);
    let cols = e.admin("GET", "/admin/tables", json!(null)).await["tables"][0]["columns"].clone();
    let names: Vec<&str> = cols.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"FLAG"));
    assert!(!names.contains(&"NESTED") && !names.contains(&"ARR"), "v2: objects and arrays add no columns: {names:?}");
}

// ---------------------------------------------------------------- faults

async fn fault_status(e: &Env, spec: Value) -> (u16, String) {
    e.fault(spec).await;
    let t = e.open_ok("T", "f").await;
    let r = e.append("T", "f", &t, "1", &[json!({"id": 1})]).await;
    (r.status.as_u16(), r.code())
}

#[tokio::test]
async fn http_faults() {
    let e = env_with_t(50).await;
    let cases = [
        ("backpressure429", 429, "ReceiverSaturated"),
        ("backpressure503", 503, "ReceiverSaturated"),
        ("retry_request", 500, "ERR_GENERAL_EXCEPTION_RETRY_REQUEST"),
        ("expired_token", 401, "390144"),
        ("memory_threshold429", 429, "MemoryThresholdExceeded"),
        ("pipe_failover", 410, "SfApiPipeFailedOverError"),
        ("invalid_client", 404, "InvalidClientError"),
        ("no_route404", 404, ""),
        ("stale_token", 400, "STALE_CONTINUATION_TOKEN_SEQUENCER"),
    ];
    for (kind, status, code) in cases {
        assert_eq!(fault_status(&e, json!({"kind": kind})).await, (status, code.to_string()), "{kind}");
        // Fires once by default: the next append goes through.
        let t = e.open_ok("T", "f").await;
        assert_eq!(e.append("T", "f", &t, "2", &[json!({"id": 2})]).await.status, 200, "{kind} second");
    }
    // Bare-string body, channel filter, count and `on`.
    e.fault(json!({"kind": "retry_request", "bare_string": true, "channel": "other"})).await;
    let t = e.open_ok("T", "f").await;
    assert_eq!(
        e.append("T", "f", &t, "3", &[json!({"id": 3})]).await.status,
        200,
        "other channel's fault does not fire"
    );
    let t = e.open_ok("T", "other").await;
    let r = e.append("T", "other", &t, "3", &[json!({"id": 3})]).await;
    assert_eq!((r.status.as_u16(), r.json()), (500, json!("ERR_GENERAL_EXCEPTION_RETRY_REQUEST")));
    e.fault(json!({"kind": "backpressure503", "on": "status", "count": 2})).await;
    let pipe = Env::pipe_path("T");
    for _ in 0..2 {
        assert_eq!(
            e.call("POST", &format!("{pipe}:bulk-channel-status"), Some(json!({"channel_names": ["f"]}))).await.status,
            503
        );
    }
    assert_eq!(
        e.call("POST", &format!("{pipe}:bulk-channel-status"), Some(json!({"channel_names": ["f"]}))).await.status,
        200
    );
    e.fault(json!({"kind": "open_in_progress"})).await;
    let r = e.open("T", "f", false).await;
    assert_eq!((r.status.as_u16(), r.code().as_str()), (409, "ERR_OPEN_CHANNEL_IN_PROGRESS"));
    assert_eq!(e.open("T", "f", false).await.status, 200);
    let listed = e.admin("GET", "/admin/faults", json!(null)).await;
    assert_eq!(listed["faults"], json!([]), "used-up faults are removed");
}

/// A pipe failover, an invalid client and a 404 without route mean the client must be recreated: the channel's
/// continuation token goes stale and the rows it had not committed are discarded (the client reopens and replays
/// from the committed offset token, as the SDK's message says). 429s leave the channel as it was.
#[tokio::test]
async fn client_faults_make_the_channel_stale_and_discard_uncommitted_rows() {
    let e = env_with_t(50).await;
    let mut n = 0;
    for kind in ["pipe_failover", "invalid_client", "no_route404"] {
        let mut t = e.open_ok("T", "c").await;
        e.admin("POST", "/admin/faults", json!({"kind": "withhold_commits", "count": -1, "channel": "c"})).await;
        n += 1;
        let r = e.append("T", "c", &t, &n.to_string(), &[json!({"id": n})]).await;
        assert_eq!(r.status, 200, "{kind}");
        r.advance(&mut t);
        e.fault(json!({"kind": kind})).await;
        let r = e.append("T", "c", &t, "999", &[json!({"id": 999})]).await;
        assert_eq!(r.status.as_u16(), if kind == "pipe_failover" { 410 } else { 404 }, "{kind}");
        if kind == "no_route404" {
            assert_eq!(r.text, "", "no Snowflake envelope");
        }
        let r = e.append("T", "c", &t, "999", &[json!({"id": 999})]).await;
        assert_eq!(r.code(), "STALE_CONTINUATION_TOKEN_SEQUENCER", "{kind}: the old token is stale");
        e.admin("DELETE", "/admin/faults", json!(null)).await;
        e.admin("POST", "/admin/commit-now", json!(null)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(e.status("T", "c").await["last_committed_offset_token"], Value::Null, "{kind}: discarded");
    }
    assert_eq!(e.query("SELECT COUNT(*) AS n FROM DB.PUBLIC.T").await[0]["n"], 0);
    // Back-pressure leaves the channel valid: the same token appends after it.
    for kind in ["backpressure429", "memory_threshold429"] {
        let mut t = e.open_ok("T", "c").await;
        e.fault(json!({"kind": kind})).await;
        let r = e.append("T", "c", &t, "1", &[json!({"id": 1})]).await;
        assert_eq!(r.status, 429, "{kind}");
        let r = e.append("T", "c", &t, "1", &[json!({"id": 1})]).await;
        assert_eq!(r.status, 200, "{kind}: {}", r.text);
        r.advance(&mut t);
    }
}

#[tokio::test]
async fn stale_token_fault_invalidates_the_channel() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    e.fault(json!({"kind": "stale_token"})).await;
    assert_eq!(e.append("T", "c", &t, "1", &[json!({"id": 1})]).await.status, 400);
    let r = e.append("T", "c", &t, "1", &[json!({"id": 1})]).await;
    assert_eq!(r.code(), "STALE_CONTINUATION_TOKEN_SEQUENCER", "the old token stays stale");
    let t = e.open_ok("T", "c").await;
    assert_eq!(e.append("T", "c", &t, "1", &[json!({"id": 1})]).await.status, 200);
}

#[tokio::test]
async fn withheld_commits_and_row_errors() {
    let e = env_with_t(50).await;
    let t = e.open_ok("T", "c").await;
    let withhold =
        e.admin("POST", "/admin/faults", json!({"kind": "withhold_commits", "count": -1, "channel": "c"})).await;
    e.fault(json!({"kind": "row_errors", "count": 2})).await;
    assert_eq!(e.append("T", "c", &t, "1", &[json!({"id": 1}), json!({"id": 2}), json!({"id": 3})]).await.status, 200);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(e.status("T", "c").await["last_committed_offset_token"], Value::Null);
    assert_eq!(e.open("T", "c", true).await.status, 409);
    e.admin("DELETE", &format!("/admin/faults/{}", withhold["id"]), json!(null)).await;
    let st = e.wait_committed("T", "c", "1").await;
    assert_eq!((st["rows_inserted"].as_i64(), st["rows_error_count"].as_i64()), (Some(1), Some(2)));
}

#[tokio::test]
async fn per_channel_rate_limit() {
    let e = env_with_t(50).await;
    e.fault(json!({"kind": "rate_limit", "count": -1, "limit": 10})).await;
    let mut t = e.open_ok("T", "c").await;
    let mut t2 = e.open_ok("T", "d").await;
    let mut codes = vec![];
    for i in 0..12 {
        let r = e.append("T", "c", &t, &i.to_string(), &[json!({"id": i})]).await;
        r.advance(&mut t);
        codes.push(r.status.as_u16());
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 10, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 429).count(), 2);
    // Another channel has its own budget; after a second the first one recovers.
    let r = e.append("T", "d", &t2, "1", &[json!({"id": 1})]).await;
    assert_eq!(r.status, 200);
    t2 = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    let _ = t2;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(e.append("T", "c", &t, "99", &[json!({"id": 99})]).await.status, 200);
}

/// Snowflake's per-channel limits are on unless a test turns them off: 10 requests and 20 MB of rows (uncompressed,
/// whatever goes over the wire) a second; a refused append gets 429 and does not count.
#[tokio::test]
async fn snowflakes_channel_limits_are_on_by_default() {
    let e = env_with_t(50).await;
    let mut t = e.open_ok("T", "c").await;
    let mut codes = vec![];
    for i in 0..11 {
        let r = e.append("T", "c", &t, &i.to_string(), &[json!({"id": i})]).await;
        r.advance(&mut t);
        codes.push((r.status.as_u16(), r.code()));
    }
    assert_eq!(codes.iter().filter(|c| c.0 == 200).count(), 10, "{codes:?}");
    assert_eq!(codes[10], (429, "ERR_TOO_MANY_REQUESTS".to_string()), "{codes:?}");

    // 4.5 MB rows compress to a few KB: four fit in 20 MB, the fifth in the same second does not. A try whose five
    // appends took a second or more (a loaded machine) proves nothing and is made again on a new channel.
    let row = format!("{{\"id\":1,\"name\":\"{}\"}}\n", "w".repeat(4_500_000));
    let body = zstd::encode_all(row.as_bytes(), 3).unwrap();
    let mut tries = vec![];
    let (channel, t) = loop {
        assert!(tries.len() < 5, "five appends never fitted in a second: {tries:?}");
        let channel = format!("d{}", tries.len());
        let mut t = e.open_ok("T", &channel).await;
        let started = Instant::now();
        let mut codes = vec![];
        for i in 0..5 {
            let q = format!("continuationToken={t}&offsetToken={i}");
            let r = e.append_raw("T", &channel, &q, body.clone(), Some("zstd")).await;
            r.advance(&mut t);
            codes.push(r.status.as_u16());
        }
        let took = started.elapsed();
        if took < Duration::from_millis(900) {
            assert_eq!(codes, [200, 200, 200, 200, 429], "the fifth 4.5 MB append passes 20 MB in one second");
            break (channel, t);
        }
        tries.push((took, codes));
    };
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = e.append_raw("T", &channel, &format!("continuationToken={t}&offsetToken=5"), body, Some("zstd")).await;
    assert_eq!(r.status, 200, "a second later: {}", r.text);
    assert_eq!(e.wait_committed("T", &channel, "5").await["rows_inserted"].as_i64(), Some(5));
}

// ---------------------------------------------------------------- admin, TLS, persistence

#[tokio::test]
async fn admin_tables_json_and_query_guard() {
    let e = env(50).await;
    e.admin(
        "POST",
        "/admin/tables",
        json!({"database": "DB", "name": "J", "columns": [{"name": "id", "type": "NUMBER(10,2)", "nullable": false}, {"name": "ts", "type": "TIMESTAMP_NTZ"}], "error_logging": true}),
    )
    .await;
    let t = e.open_ok("J", "c").await;
    e.append(
        "J",
        "c",
        &t,
        "1",
        &[json!({"id": "1.25", "ts": "2024-01-02T03:04:05.123Z"}), json!({"id": 2, "ts": 1700000000000i64})],
    )
    .await;
    e.wait_committed("J", "c", "1").await;
    let rows = e.query("SELECT id, CAST(ts AS VARCHAR) AS ts FROM DB.PUBLIC.J ORDER BY id").await;
    assert_eq!(
        rows,
        vec![json!({"ID": 1.25, "ts": "2024-01-02 03:04:05.123"}), json!({"ID": 2.0, "ts": "2023-11-14 22:13:20"})]
    );
    let r = e
        .http
        .post(format!("{}/admin/query", e.base))
        .json(&json!({"sql": "DROP TABLE DB.PUBLIC.J"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let log = e.admin("GET", "/admin/requests?path_contains=/rows", json!(null)).await;
    assert_eq!(log["requests"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn tls_listener_with_generated_ca() {
    let dir = std::env::temp_dir().join(format!("standin-tls-{}", uuid::Uuid::new_v4()));
    let run = snowflake_standin::start(snowflake_standin::Options {
        tls: true,
        state_dir: Some(dir.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(run.url.starts_with("https://127.0.0.1:"));
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("port")).unwrap(), run.port.to_string());
    for host in ["127.0.0.1", "localhost"] {
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        let r = client.get(format!("https://{host}:{}/admin/health", run.port)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{host}");
    }
    let untrusting = reqwest::Client::builder().tls_built_in_root_certs(false).build().unwrap();
    assert!(untrusting.get(format!("{}/admin/health", run.url)).send().await.is_err());
    run.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn state_dir_persists_tables_rows_and_channels() {
    let dir = std::env::temp_dir().join(format!("standin-state-{}", uuid::Uuid::new_v4()));
    let settings = snowflake_standin::Settings { commit_lag_ms: 20, ..Default::default() };
    {
        let run = snowflake_standin::start(snowflake_standin::Options {
            state_dir: Some(dir.clone()),
            settings: settings.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
        let mut e =
            Env { base: run.url.clone(), http: reqwest::Client::new(), jwt: user_jwt(), scoped: String::new(), run };
        e.admin("POST", "/admin/users", json!({"account": ACCOUNT, "user": USER, "public_key_pem": USER_PUB})).await;
        e.scoped = e.oauth(&e.jwt.clone()).await.text;
        e.sql(T_DDL).await;
        let t = e.open_ok("T", "c").await;
        e.append("T", "c", &t, "5", &[json!({"id": 5})]).await;
        e.wait_committed("T", "c", "5").await;
        e.run.shutdown().await;
    }
    let run = snowflake_standin::start(snowflake_standin::Options {
        state_dir: Some(dir.clone()),
        settings,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut e =
        Env { base: run.url.clone(), http: reqwest::Client::new(), jwt: user_jwt(), scoped: String::new(), run };
    e.scoped = e.oauth(&e.jwt.clone()).await.text;
    assert_eq!(e.status("T", "c").await["last_committed_offset_token"], "5");
    assert_eq!(e.query("SELECT id FROM DB.PUBLIC.T").await, vec![json!({"ID": 5})]);
    e.run.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------- SQL API (metadata)

/// `POST /api/v2/statements` answers DESCRIBE TABLE and SHOW TABLES from the catalog in the SQL
/// API's result-set shape, with the same authentication as the REST API; a missing table is 422
/// code 002003, as Snowflake answers it.
#[tokio::test]
async fn sql_api_describes_tables_and_their_settings() {
    let e = env_with_t(50).await;
    e.sql("CREATE TABLE DB.PUBLIC.LOGGED (v VARIANT) ENABLE_SCHEMA_EVOLUTION = TRUE ERROR_LOGGING = TRUE").await;
    let describe = e
        .call(
            "POST",
            "/api/v2/statements",
            Some(json!({"statement": "DESCRIBE TABLE t", "database": "DB", "schema": "PUBLIC"})),
        )
        .await;
    assert_eq!(describe.status, 200, "{}", describe.text);
    let body = describe.json();
    assert_eq!(body["code"], "090001");
    let names: Vec<&str> =
        body["resultSetMetaData"]["rowType"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&names[..4], ["name", "type", "kind", "null?"]);
    assert_eq!(
        body["data"],
        json!([
            ["ID", "NUMBER(38,0)", "COLUMN", "N", null, "N", "N", null, null, null, null, null],
            ["NAME", "VARCHAR", "COLUMN", "Y", null, "N", "N", null, null, null, null, null],
            ["SCORE", "FLOAT", "COLUMN", "Y", null, "N", "N", null, null, null, null, null]
        ])
    );

    let show = e
        .call("POST", "/api/v2/statements", Some(json!({"statement": "SHOW TABLES LIKE 'LOGGED' IN SCHEMA DB.PUBLIC"})))
        .await;
    assert_eq!(show.status, 200, "{}", show.text);
    let body = show.json();
    let names: Vec<String> = body["resultSetMetaData"]["rowType"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    let col = |row: &Value, name: &str| row[names.iter().position(|n| n == name).unwrap()].clone();
    let rows = body["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "LIKE names one table: {rows:?}");
    assert_eq!(
        (col(&rows[0], "name"), col(&rows[0], "enable_schema_evolution"), col(&rows[0], "error_logging")),
        (json!("LOGGED"), json!("Y"), json!("Y"))
    );
    let all = e
        .call("POST", "/api/v2/statements", Some(json!({"statement": "show tables in schema DB.PUBLIC"})))
        .await
        .json();
    let t = all["data"].as_array().unwrap().iter().find(|r| col(r, "name") == json!("T")).expect("T is listed").clone();
    assert_eq!(
        (col(&t, "enable_schema_evolution"), col(&t, "error_logging"), col(&t, "is_iceberg")),
        (json!("N"), json!("N"), json!("N"))
    );

    let missing =
        e.call("POST", "/api/v2/statements", Some(json!({"statement": "DESCRIBE TABLE DB.PUBLIC.NOPE"}))).await;
    assert_eq!((missing.status.as_u16(), missing.code()), (422, "002003".to_owned()), "{}", missing.text);
    assert!(missing.json()["message"].as_str().unwrap().contains("does not exist or not authorized"));
    let other = e.call("POST", "/api/v2/statements", Some(json!({"statement": "SELECT 1"}))).await;
    assert_eq!(other.status, 422);
    let anonymous = e
        .http
        .post(format!("{}/api/v2/statements", e.base))
        .header("Accept", "application/json")
        .json(&json!({"statement": "SHOW TABLES IN SCHEMA DB.PUBLIC"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "the SQL API needs a token too");
}

// ---------------------------------------------------------------- bench mode

/// Bench mode counts rows instead of storing them: the protocol still holds (the same append route, offset tokens,
/// commit lag, channel counters), a line that is not delimited like a JSON object is still a row error, and the
/// counts per table are at /admin/bench-counts while the table itself stays empty.
#[tokio::test]
async fn bench_mode_counts_committed_rows_without_storing_them() {
    let e = env_with(snowflake_standin::Settings { commit_lag_ms: 50, bench_mode: true, ..Default::default() }).await;
    e.sql(T_DDL).await;
    let t = e.open_ok("T", "c").await;
    let r = e.append("T", "c", &t, "3", &[json!({"id": 1}), json!({"id": 2}), json!({"id": 3})]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let next = r.json()["next_continuation_token"].as_str().unwrap().to_string();
    let q = format!("continuationToken={next}&offsetToken=5&requestId={}&retryCount=0", uuid::Uuid::new_v4());
    let r = e.append_raw("T", "c", &q, b"{\"id\":4}\r\n\nnot json\n".to_vec(), None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let s = e.wait_committed("T", "c", "5").await;
    assert_eq!(s["rows_inserted"], 4, "{s}");
    assert_eq!(s["rows_error_count"], 1, "{s}");
    let counts = e.admin("GET", "/admin/bench-counts", json!(null)).await;
    assert_eq!(counts, json!({"bench_mode": true, "tables": {"DB.PUBLIC.T": 4}}));
    // Each committed batch is recorded once, oldest first, for a benchmark's latency (bench/pipeline.sh).
    let commits = e.admin("GET", "/admin/bench-commits", json!(null)).await;
    let list = commits["commits"].as_array().unwrap();
    let tokens: Vec<_> = list.iter().map(|c| (c["offset_token"].clone(), c["rows"].clone())).collect();
    assert_eq!(tokens, vec![(json!("3"), json!(3)), (json!("5"), json!(1))], "{commits}");
    for c in list {
        assert_eq!((c["table"].as_str(), c["channel"].as_str()), (Some("DB.PUBLIC.T"), Some("c")), "{c}");
        assert!(c["committed_ms"].as_i64().unwrap() >= c["accepted_ms"].as_i64().unwrap() + 50, "{c}");
    }
    assert_eq!(commits["dropped"], 0);
    assert_eq!(e.admin("GET", "/admin/bench-commits", json!(null)).await["commits"], json!([]));
    assert_eq!(e.query("SELECT COUNT(*) AS C FROM DB.PUBLIC.T").await, vec![json!({"C": 0})]);
    // A table made again starts from zero.
    e.sql(T_DDL).await;
    assert_eq!(e.admin("GET", "/admin/bench-counts", json!(null)).await["tables"], json!({}));
}
