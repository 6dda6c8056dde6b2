package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.KinesisMetadataFields;
import io.kinesnow.nifi.nativebridge.RecordBatch;
import org.apache.nifi.serialization.SimpleRecordSchema;
import org.apache.nifi.serialization.record.MapRecord;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordField;
import org.apache.nifi.serialization.record.RecordFieldType;
import org.apache.nifi.serialization.record.RecordSchema;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@code kinesisMetadata} record field of Processing Strategy RECORD, with the schema of NiFi's own ConsumeKinesis
 * (same names, types and order), so flows built for NiFi's processor read ours. Its values are the ones Rust put in the
 * batch; the JSON strategies write the same fields in Rust ({@code consumer::output}).
 */
final class KinesisMetadata {
    static final String FIELD_NAME = KinesisMetadataFields.KEY;

    static final RecordSchema SCHEMA = new SimpleRecordSchema(List.of(
            new RecordField(KinesisMetadataFields.STREAM, RecordFieldType.STRING.getDataType()),
            new RecordField(KinesisMetadataFields.SHARD_ID, RecordFieldType.STRING.getDataType()),
            new RecordField(KinesisMetadataFields.SEQUENCE_NUMBER, RecordFieldType.STRING.getDataType()),
            new RecordField(KinesisMetadataFields.SUB_SEQUENCE_NUMBER, RecordFieldType.LONG.getDataType()),
            new RecordField(KinesisMetadataFields.SHARDED_SEQUENCE_NUMBER, RecordFieldType.STRING.getDataType()),
            new RecordField(KinesisMetadataFields.PARTITION_KEY, RecordFieldType.STRING.getDataType()),
            new RecordField(KinesisMetadataFields.APPROXIMATE_ARRIVAL, RecordFieldType.TIMESTAMP.getDataType())));

    static final RecordField FIELD = new RecordField(FIELD_NAME, RecordFieldType.RECORD.getRecordDataType(SCHEMA));

    private KinesisMetadata() {
    }

    /**
     * The metadata of one Kinesis record. A record that was not KPL aggregated has sub-sequence number 0, as in NiFi's
     * processor (the KCL's) and in Rust's {@code sharded_sequence_number}.
     */
    static Record of(final String stream, final String shardId, final RecordBatch.FlowFileData kinesisRecord) {
        final long sub = subSequenceNumber(kinesisRecord.firstSubSequence());
        final Map<String, Object> values = new HashMap<>(8);
        values.put(KinesisMetadataFields.STREAM, stream);
        values.put(KinesisMetadataFields.SHARD_ID, shardId);
        values.put(KinesisMetadataFields.SEQUENCE_NUMBER, kinesisRecord.firstSequence());
        values.put(KinesisMetadataFields.SUB_SEQUENCE_NUMBER, sub);
        values.put(KinesisMetadataFields.SHARDED_SEQUENCE_NUMBER, shardedSequenceNumber(kinesisRecord.firstSequence(), sub));
        values.put(KinesisMetadataFields.PARTITION_KEY, kinesisRecord.partitionKey());
        values.put(KinesisMetadataFields.APPROXIMATE_ARRIVAL, kinesisRecord.approximateArrivalMillis());
        return new MapRecord(SCHEMA, values);
    }

    /** -1 (not aggregated) is 0. */
    static long subSequenceNumber(final long sub) {
        return Math.max(sub, 0);
    }

    /** The sequence number followed by the sub-sequence number zero-padded to 20 digits. */
    static String shardedSequenceNumber(final String sequenceNumber, final long sub) {
        return sequenceNumber + String.format("%020d", sub);
    }
}
