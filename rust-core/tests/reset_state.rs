//! Resetting state as docs/operations.md ("Resetting state") tells a user to, under each Failover
//! Position: the consumer engine on kinesis-local and dynalite re-reads a stream from
//! TRIM_HORIZON into a simulated NiFi queue, and the real sink engine loads that queue into the
//! Snowflake stand-in. The documented duplicate-free resets load every record once; the resets the
//! page says load again (a new Application Name with `SNOWFLAKE_COMMIT`, a shard landing on another
//! PutSnowflake with `NIFI_COMMIT`) are shown to load again, so the page's warnings stay true.
//!
//! The harness (FlowFiles as ConsumeKinesis writes them, PutSnowflake routed as the Java shim
//! does) is `snowflake_failover`'s.

use crate::snowflake_failover::{
    check_once, create_table, loaded, runtime, tracked_settings, wait_until, Consumer, Loader, Queue,
};
use crate::standin_support::Standin;
use crate::support::{self, aws, create_stream, settings, Emulators};

use std::time::Duration;

use kinesnow_core::aws::{clients, AwsClients};
use kinesnow_core::consumer::EngineSettings;
use tokio::runtime::Runtime;

/// Records put before the reset and after it.
const BEFORE: usize = 100;
const AFTER: usize = 40;

/// Starts a consumer and a PutSnowflake of `instance`, waits until the queue holds `expect`
/// FlowFiles (every record the consumer should read), loads them all, then stops both as the
/// canvas does.
fn run_flow(rt: &Runtime, e: &Emulators, standin: &Standin, s: EngineSettings, instance: &str, expect: usize) -> usize {
    let queue: Queue = Default::default();
    let consumer = rt.block_on(Consumer::start("node-a", s, e, queue.clone()));
    wait_until("the consumer reads every record", Duration::from_secs(90), || queue.lock().unwrap().len() >= expect);
    let read = queue.lock().unwrap().len();
    let mut loader = Loader::start(rt, standin, "node-a", instance);
    loader.drain(rt, &queue, Duration::from_secs(90));
    loader.stop(&queue);
    rt.block_on(consumer.stop());
    read
}

/// What "delete the lease table" means: stop the flow on every node, then delete the DynamoDB
/// table named after the Application Name.
fn delete_lease_table(rt: &Runtime, c: &AwsClients, application: &str) {
    rt.block_on(async {
        c.dynamodb.delete_table().table_name(application).send().await.expect("delete the lease table");
    });
}

/// How many of records `0..n` are in the table twice or more.
fn twice(standin: &Standin, n: usize) -> usize {
    loaded(standin).iter().filter(|(k, c)| (**k as usize) < n && **c > 1).count()
}

/// SNOWFLAKE_COMMIT (both shipped flow definitions): deleting the lease table under the same
/// Application Name re-reads the stream from TRIM_HORIZON into the same shared channels, whose
/// committed offset tokens skip every row already loaded; a new Application Name opens new shared
/// channels (the name is part of theirs) and loads every retained record again.
#[test]
fn snowflake_commit_reset_by_deleting_the_lease_table_loads_nothing_twice() {
    support::log();
    let rt = runtime();
    let e = Emulators::start("reset-sf");
    let standin = Standin::start("reset-sf", 50);
    create_table(&standin);
    let (stream, app) = ("reset-sf", "reset-sf-app");
    let c = rt.block_on(clients(&aws(&e)));
    rt.block_on(create_stream(&c, stream, 2));
    rt.block_on(support::put(&c, stream, 0, BEFORE));
    run_flow(&rt, &e, &standin, tracked_settings(stream, app), "aaaa", BEFORE);
    check_once(&standin, BEFORE, "before the reset");

    // The documented reset: same Application Name, same Channel Name Prefix, lease table deleted.
    delete_lease_table(&rt, &c, app);
    rt.block_on(support::put(&c, stream, BEFORE, AFTER));
    let read = run_flow(&rt, &e, &standin, tracked_settings(stream, app), "aaaa", BEFORE + AFTER);
    assert_eq!(read, BEFORE + AFTER, "the reset re-read the whole stream from TRIM_HORIZON");
    check_once(&standin, BEFORE + AFTER, "after deleting the lease table");

    // A new Application Name: new shared channels, so every retained record loads again.
    let read = run_flow(&rt, &e, &standin, tracked_settings(stream, "reset-sf-app-2"), "aaaa", BEFORE + AFTER);
    assert_eq!(read, BEFORE + AFTER);
    assert_eq!(twice(&standin, BEFORE + AFTER), BEFORE + AFTER, "a new Application Name loads every row again");
}

/// NIFI_COMMIT (the processor's default): a new Application Name (or a deleted lease table)
/// re-reads from TRIM_HORIZON, and a PutSnowflake that loaded a shard before skips its rows at
/// or below its channel's committed token; a shard that lands on another PutSnowflake instance
/// (another node of a cluster) goes into that instance's own channel and loads again.
#[test]
fn nifi_commit_reset_loads_nothing_twice_on_the_putsnowflake_that_loaded_it() {
    support::log();
    let rt = runtime();
    let e = Emulators::start("reset-nifi");
    let standin = Standin::start("reset-nifi", 50);
    create_table(&standin);
    let stream = "reset-nifi";
    let c = rt.block_on(clients(&aws(&e)));
    rt.block_on(create_stream(&c, stream, 2));
    rt.block_on(support::put(&c, stream, 0, BEFORE));
    run_flow(&rt, &e, &standin, settings(stream, "reset-nifi-app"), "aaaa", BEFORE);
    check_once(&standin, BEFORE, "before the reset");

    // A new Application Name, the same PutSnowflake (its instance id is kept in NiFi's local state).
    rt.block_on(support::put(&c, stream, BEFORE, AFTER));
    let read = run_flow(&rt, &e, &standin, settings(stream, "reset-nifi-app-2"), "aaaa", BEFORE + AFTER);
    assert_eq!(read, BEFORE + AFTER, "the reset re-read the whole stream from TRIM_HORIZON");
    check_once(&standin, BEFORE + AFTER, "after a new Application Name");

    // Deleting the lease table under the same name: the same.
    delete_lease_table(&rt, &c, "reset-nifi-app-2");
    let read = run_flow(&rt, &e, &standin, settings(stream, "reset-nifi-app-2"), "aaaa", BEFORE + AFTER);
    assert_eq!(read, BEFORE + AFTER);
    check_once(&standin, BEFORE + AFTER, "after deleting the lease table");

    // The shards read by another node's PutSnowflake after a reset: its own channels, loaded again.
    let read = run_flow(&rt, &e, &standin, settings(stream, "reset-nifi-app-3"), "bbbb", BEFORE + AFTER);
    assert_eq!(read, BEFORE + AFTER);
    assert_eq!(twice(&standin, BEFORE + AFTER), BEFORE + AFTER, "another instance's channels load every row again");
}
