// Generated from rust-core/src/contract/wire.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

/** The JNI layouts' magics and PutSnowflake's route codes, shared with the engine. */
public final class Wire {
    private Wire() {
    }

    /** ConsumeKinesis' batch of FlowFiles, native to Java ("KNB7"). */
    public static final int BATCH_MAGIC = 0x4B4E4237;

    /** Records ConsumeKinesis routed to parse.failure, Java to native ("KNS1"). */
    public static final int SKIPS_MAGIC = 0x4B4E5331;

    /** PutSnowflake's FlowFiles, Java to native ("KSF1"). */
    public static final int FLOW_FILES_MAGIC = 0x4B534631;

    /** PutSnowflake's outcomes, native to Java ("KSO1"). */
    public static final int OUTCOMES_MAGIC = 0x4B534F31;

    /** PutSnowflake's queued FlowFiles to choose from, Java to native ("KSC1"). */
    public static final int CANDIDATES_MAGIC = 0x4B534331;

    /** ConsumeKinesis' route in its batch: the FlowFile goes to success. */
    public static final int BATCH_ROUTE_SUCCESS = 0;

    /** ConsumeKinesis' route in its batch: the FlowFile's record could not be parsed and goes to parse.failure. */
    public static final int BATCH_ROUTE_PARSE_FAILURE = 1;

    /** Route: committed into Snowflake. */
    public static final int ROUTE_SUCCESS = 0;

    /** Route: content that cannot become rows, or rows Snowflake rejected. */
    public static final int ROUTE_INVALID = 1;

    /** Route: not loaded (the reason in snowflake.error.message). */
    public static final int ROUTE_FAILURE = 2;

    /** Route: no rows in the content: nothing was sent. */
    public static final int ROUTE_EMPTY = 3;

    /** Route: back to the queue, marked for the at-least-once channels. */
    public static final int ROUTE_RELOAD = 4;

    /** Route: back to the queue, penalized: it waited for an earlier FlowFile while the in-flight budget was full. */
    public static final int ROUTE_RETRY = 5;

    /** Not an outcome: the FlowFile stays held, and its content is handed over again (its channel reopened before its rows, dropped once appended, were committed). */
    public static final int ROUTE_RESEND = 6;
}
