// Generated from rust-core/src/contract/counters.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

import java.util.List;

/** PutSnowflake's counters in NiFi: the engine's, in the order it reports them, and the processor's own. */
public final class PutSnowflakeCounters {
    private PutSnowflakeCounters() {
    }

    /** The engine's counters, by their index in what it reports. */
    public static final List<String> ENGINE = List.of(
            "Channel Reopens",
            "Snowflake Calls Retried (throttled)",
            "Snowflake Calls Retried (server or network)",
            "Gaps Detected");

    /** The gauges (NiFi 2.6 and later), by their index after the engine's counts. */
    public static final List<String> GAUGES = List.of(
            "Snowflake Freshness Lag");

    /** Rows Snowflake reported committed. */
    public static final String ROWS_SENT = "Rows Sent";

    /** Duplicates prevented: rows not sent again because Snowflake had committed that very record (a replay). */
    public static final String ROWS_SKIPPED = "Rows Skipped (already committed)";

    /** FlowFiles that went back to the queue, penalized, to wait for an earlier record of their shard. */
    public static final String FLOW_FILES_WAITING = "FlowFiles Waiting for an Earlier Record";

    /** FlowFiles sent back to the queue to load at least once: they bring records of a gap a channel passed over, or waited Order Wait in a shard's shared channel. */
    public static final String GAP_FLOW_FILES_RELOADED = "Gap FlowFiles Sent to Load at Least Once";
}
