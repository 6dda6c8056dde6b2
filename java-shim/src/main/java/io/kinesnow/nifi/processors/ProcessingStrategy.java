package io.kinesnow.nifi.processors;

/** ConsumeKinesis' Processing Strategy: how records become FlowFiles. The names are the property's values, as the engine reads them. */
public enum ProcessingStrategy implements Choice {
    FLOW_FILE("FlowFile",
            "One FlowFile per Kinesis record."),
    LINE_DELIMITED("Line Delimited",
            "One FlowFile per shard per batch, records separated by newlines (NDJSON when records are JSON)."),
    DEMARCATOR("Demarcator",
            "One FlowFile per shard per batch, records separated by the Message Demarcator. A record that "
            + "contains the demarcator is not escaped."),
    RECORD("Record",
            "Each Kinesis record is read with the Record Reader, and a shard's records are written with the "
            + "Record Writer into one FlowFile per batch (a new one when the schema changes). Records the reader "
            + "cannot read go to parse.failure.");

    private final Words words;

    ProcessingStrategy(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
