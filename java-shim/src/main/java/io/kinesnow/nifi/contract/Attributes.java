// Generated from rust-core/src/contract/attributes.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

/** FlowFile attribute names shared by the engine and the processors. */
public final class Attributes {
    private Attributes() {
    }

    /** The Kinesis stream the records came from. */
    public static final String STREAM = "aws.kinesis.stream.name";

    /** The stream's AWS region. */
    public static final String REGION = "aws.kinesis.region";

    /** The shard the records came from. */
    public static final String SHARD = "aws.kinesis.shard.id";

    /** Partition key of the (first) record. */
    public static final String PARTITION_KEY = "aws.kinesis.partition.key";

    /** Sequence number of the FlowFile's first Kinesis record. */
    public static final String FIRST_SEQUENCE = "aws.kinesis.first.sequence.number";

    /** Sub-sequence number of the FlowFile's first user record inside a KPL aggregate. */
    public static final String FIRST_SUB = "aws.kinesis.first.subsequence.number";

    /** Sequence number of the FlowFile's last Kinesis record. */
    public static final String LAST_SEQUENCE = "aws.kinesis.last.sequence.number";

    /** Sub-sequence number of the FlowFile's last user record inside a KPL aggregate. */
    public static final String LAST_SUB = "aws.kinesis.last.subsequence.number";

    /** Approximate arrival time of the (first) record in Kinesis, in ms since the epoch. */
    public static final String ARRIVAL_MS = "aws.kinesis.approximate.arrival.timestamp.ms";

    /** The shard's parents, comma-separated, when a split or merge created it. */
    public static final String PARENT_SHARDS = "aws.kinesis.parent.shard.ids";

    /** How far the shard's reader was behind the tip of the stream, in milliseconds. */
    public static final String MILLIS_BEHIND = "kinesis.millis.behind";

    /** Number of records in the FlowFile (with RECORD, the records the Record Writer wrote). */
    public static final String RECORD_COUNT = "record.count";

    /** Why a record went to parse.failure. */
    public static final String RECORD_ERROR_MESSAGE = "record.error.message";

    /** The record ConsumeKinesis read just before the FlowFile's first one in the same lease; empty when none (read from the shard's start, or the lease's first read from LATEST or a timestamp). */
    public static final String PREVIOUS_SEQUENCE = "kinesnow.previous.sequence.number";

    /** Sub-sequence number of that record inside a KPL aggregate. */
    public static final String PREVIOUS_SUB = "kinesnow.previous.subsequence.number";

    /** With Failover Position SNOWFLAKE_COMMIT: the stream's ARN, which links PutSnowflake's reports to this consumer. */
    public static final String STREAM_ARN = "kinesnow.stream.arn";

    /** The Application Name: the flow the records belong to (PutSnowflake passes over the records this flow never loads, see parse.failure). */
    public static final String APPLICATION = "kinesnow.application.name";

    /** With Failover Position SNOWFLAKE_COMMIT: the NiFi node that read the records. */
    public static final String NODE = "kinesnow.node";

    /** With Failover Position SNOWFLAKE_COMMIT: the lease counter (tenure) the records were read under. */
    public static final String LEASE_COUNTER = "kinesnow.lease.counter";

    /** Set by PutSnowflake on a FlowFile it sends back to its own queue to load at least once (value at-least-once). */
    public static final String DELIVERY = "kinesnow.delivery";

    /** Set by PutSnowflake (never taken from the FlowFile) when its Record Reader could read no record of the FlowFile: why. */
    public static final String RECORDS_UNREADABLE = "kinesnow.records.unreadable";

    /** The Snowflake database the FlowFile's rows went to. */
    public static final String DATABASE = "kinesnow.snowflake.database";

    /** The Snowflake schema the FlowFile's rows went to. */
    public static final String SCHEMA = "kinesnow.snowflake.schema";

    /** The Snowflake table the FlowFile's rows went to. */
    public static final String TABLE = "kinesnow.snowflake.table";

    /** The Snowpipe Streaming pipe the FlowFile's rows went through. */
    public static final String PIPE = "kinesnow.snowflake.pipe";

    /** The Snowpipe Streaming channel the rows went through. */
    public static final String CHANNEL = "snowflake.channel";

    /** The offset token of the FlowFile's last row. */
    public static final String OFFSET_TOKEN = "snowflake.offset.token";

    /** Rows of the FlowFile sent by this processor. */
    public static final String ROWS_SENT = "snowflake.rows.sent";

    /** Rows of the FlowFile Snowflake had committed already, so not sent again. */
    public static final String ROWS_SKIPPED = "snowflake.rows.skipped";

    /** Why the FlowFile went to failure or invalid. */
    public static final String ERROR_MESSAGE = "snowflake.error.message";

    /** With a Record Reader: the numbers (from 1, comma-separated) of the records that could not be read or become rows. */
    public static final String RECORDS_INVALID = "snowflake.records.invalid";

    /** With a Record Reader, on the invalid child: how many records of the parent FlowFile were handed to Snowflake with it. */
    public static final String RECORDS_SENT = "snowflake.records.sent";

    /** With a Record Reader, on the invalid child: true when reading stopped at a record the reader could not get past. */
    public static final String RECORDS_UNREAD = "snowflake.records.unread";

    /** The value of DELIVERY on a FlowFile to load at least once. */
    public static final String AT_LEAST_ONCE = "at-least-once";

    /** The prefix of every attribute ConsumeKinesis writes for the exactly-once path. */
    public static final String KINESNOW_PREFIX = "kinesnow.";

    /** The prefix of the Kinesis attributes ConsumeKinesis writes (PutSnowflake passes them across JNI). */
    public static final String KINESIS_PREFIX = "aws.kinesis.";

    /** The prefix of the attributes NiFi's split processors write (a FlowFile so marked loads at least once). */
    public static final String FRAGMENT_PREFIX = "fragment.";
}
