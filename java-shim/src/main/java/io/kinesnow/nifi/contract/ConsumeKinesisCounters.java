// Generated from rust-core/src/contract/counters.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

import java.util.List;

/** ConsumeKinesis's counters in NiFi: the engine's, in the order it reports them, and the processor's own. */
public final class ConsumeKinesisCounters {
    private ConsumeKinesisCounters() {
    }

    /** The engine's counters, by their index in what it reports. */
    public static final List<String> ENGINE = List.of(
            "Records Read from Kinesis",
            "Bytes Read from Kinesis",
            "GetRecords Calls",
            "Kinesis Throttles",
            "Batches Handed to NiFi",
            "Leases Taken",
            "Leases Lost",
            "Leases Handed Back",
            "Checkpoints Written",
            "Records Read Again after a Rollback");

    /** The gauges (NiFi 2.6 and later), by their index after the engine's counts. */
    public static final List<String> GAUGES = List.of(
            "Kinesis Millis Behind Latest",
            "Shards Leased");

    /** Kinesis records written into FlowFiles of committed sessions (NiFi's own ConsumeKinesis has the same counter). */
    public static final String RECORDS_CONSUMED = "Records Consumed";

    /** Records routed to parse.failure: the Record Reader could not read them (Processing Strategy RECORD). */
    public static final String RECORDS_PARSE_FAILURE = "Records Parse Failure";
}
