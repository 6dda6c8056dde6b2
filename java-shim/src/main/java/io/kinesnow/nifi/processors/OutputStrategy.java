package io.kinesnow.nifi.processors;

/** ConsumeKinesis' Output Strategy: what of a record, and of its Kinesis metadata, is written. The names are the property's values, as the engine reads them. */
public enum OutputStrategy implements Choice {
    USE_VALUE("Use Value",
            "Write each record's bytes as they are."),
    USE_WRAPPER("Use Wrapper",
            "Write each JSON record as {\"value\": <record>, \"kinesisMetadata\": {...}}."),
    INJECT_METADATA("Inject Metadata",
            "Add a kinesisMetadata field (stream, shardId, approximateArrival, partitionKey, sequenceNumber, "
            + "subSequenceNumber, shardedSequenceNumber) to each JSON object record.");

    private final Words words;

    OutputStrategy(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
