//! The integration tests that need no allocator of their own, in one test binary: each file under
//! `tests/` was its own binary, and linking the engine (thin LTO) into ten binaries cost the test
//! suite many minutes of a 2-core CI machine. The files stay where they were; `cargo test --test
//! integration <file>::` runs one of them. `deaggregate_bounds` and `consumer_hostile` stay separate
//! binaries: they count allocations with their own global allocator.

#[path = "../standin_support/mod.rs"]
mod standin_support;
#[path = "../support/mod.rs"]
mod support;
// Shared by consumer_cluster and consumer_fanout: loaded once here, not once in each.
#[path = "../support/resharding.rs"]
mod resharding;

#[path = "../aws_credentials.rs"]
mod aws_credentials;
#[path = "../component_consumer.rs"]
mod component_consumer;
#[path = "../consumer_cluster.rs"]
mod consumer_cluster;
#[path = "../consumer_emulators.rs"]
mod consumer_emulators;
#[path = "../consumer_fanout.rs"]
mod consumer_fanout;
#[path = "../consumer_lifecycle.rs"]
mod consumer_lifecycle;
#[path = "../deaggregate_fixtures.rs"]
mod deaggregate_fixtures;
#[path = "../iam_policy.rs"]
mod iam_policy;
#[path = "../large_records.rs"]
mod large_records;
#[path = "../lease_migration.rs"]
mod lease_migration;
#[path = "../nifi_table.rs"]
mod nifi_table;
#[path = "../ops_tool.rs"]
mod ops_tool;
#[path = "../reset_state.rs"]
mod reset_state;
#[path = "../sink_pressure.rs"]
mod sink_pressure;
#[path = "../sink_standin.rs"]
mod sink_standin;
#[path = "../snowflake_failover.rs"]
mod snowflake_failover;
#[path = "../stream_arn.rs"]
mod stream_arn;
#[path = "../verify_services.rs"]
mod verify_services;
