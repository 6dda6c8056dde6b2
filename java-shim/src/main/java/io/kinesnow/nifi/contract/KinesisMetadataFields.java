// Generated from rust-core/src/contract/metadata.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

/** The kinesisMetadata object's key and fields, in the order of NiFi's schema. */
public final class KinesisMetadataFields {
    private KinesisMetadataFields() {
    }

    /** The key under which a record carries its metadata. */
    public static final String KEY = "kinesisMetadata";

    /** The stream the record came from. */
    public static final String STREAM = "stream";

    /** The shard the record came from. */
    public static final String SHARD_ID = "shardId";

    /** The record's sequence number. */
    public static final String SEQUENCE_NUMBER = "sequenceNumber";

    /** Its sub-sequence number (0 when not KPL aggregated). */
    public static final String SUB_SEQUENCE_NUMBER = "subSequenceNumber";

    /** The exactly-once key (see `exactly_once`). */
    public static final String SHARDED_SEQUENCE_NUMBER = "shardedSequenceNumber";

    /** The record's partition key. */
    public static final String PARTITION_KEY = "partitionKey";

    /** When Kinesis received the record, in milliseconds since the epoch. */
    public static final String APPROXIMATE_ARRIVAL = "approximateArrival";
}
