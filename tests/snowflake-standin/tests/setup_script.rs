//! `parameter-contexts/template/snowflake-setup.sql`, statement by statement, through the SQL API
//! (`POST /api/v2/statements`) of a stand-in with an empty catalog, as an administrator's client
//! sends them: every statement is accepted in the script's order (each `USE`, `GRANT` and
//! `CREATE SCHEMA` names objects made before it), the script runs again unchanged (IF NOT EXISTS),
//! and afterwards the service user the script made authenticates with its key pair and opens a
//! channel on the table's default pipe.
//!
//! What the stand-in cannot check (see `src/account.rs`): privileges. It does not know whether the
//! role running a statement may run it, nor whether the grants suffice for Snowpipe Streaming; it
//! checks that each statement is well formed, names objects that exist, and what it models of the
//! result (the table with its settings, the user's public key). The grants follow Snowflake's
//! documented list for the high-performance architecture (docs/setup-snowflake.md), unchecked here.

mod common;

use common::*;
use serde_json::json;

const SCRIPT: &str = include_str!("../../../parameter-contexts/template/snowflake-setup.sql");
/// The one value the script asks its reader to replace.
const KEY_PLACEHOLDER: &str = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA-replace-with-your-public-key";

/// The script's statements: `--` comments dropped, split at each `;` outside quotes.
fn statements(script: &str) -> Vec<String> {
    let mut out = vec![];
    let mut current = String::new();
    for line in script.lines() {
        let mut in_quote = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => in_quote = !in_quote,
                '-' if !in_quote && chars.peek() == Some(&'-') => break,
                ';' if !in_quote => {
                    out.push(std::mem::take(&mut current).trim().to_owned());
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        current.push('\n');
    }
    assert!(current.trim().is_empty(), "text after the last statement: {current}");
    out
}

/// The base64 body of a PEM public key, as `RSA_PUBLIC_KEY` takes it.
fn key_body(pem: &str) -> String {
    pem.lines().filter(|l| !l.starts_with("-----")).collect()
}

async fn run(e: &Env, statement: &str) -> Resp {
    e.call("POST", "/api/v2/statements", Some(json!({ "statement": statement }))).await
}

#[tokio::test]
async fn the_set_up_script_runs_as_written_on_an_empty_account() {
    let mut e = env(50).await;
    let script = SCRIPT.replace(KEY_PLACEHOLDER, &key_body(FOREIGN_PUB));
    assert_ne!(script, SCRIPT, "the script names the placeholder key this test replaces");
    let all = statements(&script);
    assert!(all.len() >= 15, "{all:#?}");
    let svc_jwt = || keypair_jwt_of("KINESNOW_SVC", FOREIGN_KEY, FOREIGN_PUB, now_s(), now_s() + 3540, false);
    assert_eq!(e.oauth(&svc_jwt()).await.status, 401, "no such user before the script");

    for pass in ["first run", "second run"] {
        for statement in &all {
            let r = run(&e, statement).await;
            assert_eq!(r.status, 200, "{pass}: {statement}\n{}", r.text);
            assert_eq!(r.json()["code"], "090001", "{pass}: {statement}\n{}", r.text);
        }
    }

    let show = run(&e, "SHOW TABLES LIKE 'EVENTS' IN SCHEMA KINESIS_DB.KINESIS_SCHEMA").await.json();
    let names: Vec<&str> =
        show["resultSetMetaData"]["rowType"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    let row = &show["data"][0];
    let col = |name: &str| row[names.iter().position(|n| *n == name).unwrap()].clone();
    assert_eq!((col("enable_schema_evolution"), col("error_logging")), (json!("Y"), json!("Y")), "{show}");

    // The user the script made, with the key it set: its JWT is accepted and opens a channel.
    let r = e.oauth(&svc_jwt()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    e.scoped = r.text;
    let open = e
        .call(
            "PUT",
            "/v2/streaming/databases/KINESIS_DB/schemas/KINESIS_SCHEMA/pipes/EVENTS-STREAMING/channels/c1",
            Some(json!({"fail_on_uncommitted_rows": false})),
        )
        .await;
    assert_eq!(open.status, 200, "{}", open.text);
}

#[tokio::test]
async fn the_script_unedited_stops_at_the_placeholder_key_and_nothing_before_it() {
    let e = env(50).await;
    let all = statements(SCRIPT);
    let at = all.iter().position(|s| s.contains(KEY_PLACEHOLDER)).expect("the key statement");
    for statement in &all[..at] {
        let r = run(&e, statement).await;
        assert_eq!(r.status, 200, "{statement}\n{}", r.text);
    }
    let r = run(&e, &all[at]).await;
    assert_eq!(r.status, 422, "the placeholder is no public key: {}", r.text);
    assert!(r.text.contains("RSA_PUBLIC_KEY"), "{}", r.text);
}

#[tokio::test]
async fn statements_out_of_order_or_malformed_are_refused() {
    let e = env(50).await;
    for (statement, code) in [
        // The script before this change granted on a database it assumed to exist.
        ("GRANT USAGE ON DATABASE kinesis_db TO ROLE kinesnow_role", "002003"),
        ("CREATE SCHEMA kinesis_db.kinesis_schema", "002003"),
        ("USE ROLE kinesnow_role", "002003"),
        ("GRANT USAGE ON WAREHOUSE kinesnow_wh TO ROLE SYSADMIN", "002003"),
        ("CREATE TABLE kinesis_db.kinesis_schema.EVENTS (kinesisMetadata OBJECT)", "002003"),
        ("ALTER USER kinesnow_svc SET RSA_PUBLIC_KEY = 'MIIB'", "002003"),
        ("CREATE WAREHOUSE kinesnow_wh WAREHOUSE_SIZE = ENORMOUS", "001003"),
        ("GRANT ROLE TO ROLE SYSADMIN", "001003"),
        ("CREATE ROLE", "001003"),
        ("DROP DATABASE kinesis_db", "001003"),
    ] {
        let r = run(&e, statement).await;
        assert_eq!((r.status.as_u16(), r.code()), (422, code.to_owned()), "{statement}: {}", r.text);
    }
}
