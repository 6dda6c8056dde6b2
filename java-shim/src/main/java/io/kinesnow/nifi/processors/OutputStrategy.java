package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/** ConsumeKinesis' Output Strategy: what of a record, and of its Kinesis metadata, is written. The names are the property's values, as the engine reads them. */
public enum OutputStrategy implements DescribedValue {
    USE_VALUE("Use Value",
            "Write each record's bytes as they are."),
    USE_WRAPPER("Use Wrapper",
            "Write each JSON record as {\"value\": <record>, \"kinesisMetadata\": {...}}."),
    INJECT_METADATA("Inject Metadata",
            "Add a kinesisMetadata field (stream, shardId, approximateArrival, partitionKey, sequenceNumber, "
            + "subSequenceNumber, shardedSequenceNumber) to each JSON object record.");

    private final String displayName;
    private final String description;

    OutputStrategy(final String displayName, final String description) {
        this.displayName = displayName;
        this.description = description;
    }

    @Override
    public String getValue() {
        return name();
    }

    @Override
    public String getDisplayName() {
        return displayName;
    }

    @Override
    public String getDescription() {
        return description;
    }
}
