package io.kinesnow.nifi.processors;

import org.apache.nifi.serialization.SimpleRecordSchema;
import org.apache.nifi.serialization.record.MapRecord;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordField;
import org.apache.nifi.serialization.record.RecordFieldType;
import org.apache.nifi.serialization.record.RecordSchema;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Output Strategy for Processing Strategy RECORD, as NiFi's ConsumeKinesis applies it: USE_VALUE writes the record as
 * read, USE_WRAPPER a record of {@code kinesisMetadata} and {@code value} (the record), INJECT_METADATA the record's
 * fields followed by {@code kinesisMetadata}.
 */
enum RecordOutput {
    USE_VALUE,
    USE_WRAPPER,
    INJECT_METADATA;

    private static final String VALUE = "value";

    /** The Output Strategy property's value; anything else is a bug of the validation. */
    static RecordOutput of(final String value) {
        return valueOf(value);
    }

    /** The schema of the records {@link #convert} makes from records of {@code readSchema}. */
    RecordSchema writeSchema(final RecordSchema readSchema) {
        return switch (this) {
            case USE_VALUE -> readSchema;
            case USE_WRAPPER -> new SimpleRecordSchema(List.of(KinesisMetadata.FIELD,
                    new RecordField(VALUE, RecordFieldType.RECORD.getRecordDataType(readSchema))));
            case INJECT_METADATA -> {
                final List<RecordField> fields = new ArrayList<>(readSchema.getFields());
                fields.add(KinesisMetadata.FIELD);
                yield new SimpleRecordSchema(fields);
            }
        };
    }

    /** The record to write for {@code record}, given its Kinesis record's metadata and {@link #writeSchema}. */
    Record convert(final Record record, final Record metadata, final RecordSchema writeSchema) {
        return switch (this) {
            case USE_VALUE -> record;
            case USE_WRAPPER -> {
                final Map<String, Object> values = new HashMap<>(4);
                values.put(KinesisMetadata.FIELD_NAME, metadata);
                values.put(VALUE, record);
                yield new MapRecord(writeSchema, values);
            }
            case INJECT_METADATA -> {
                final Map<String, Object> values = new HashMap<>(record.toMap());
                values.put(KinesisMetadata.FIELD_NAME, metadata);
                yield new MapRecord(writeSchema, values);
            }
        };
    }
}
