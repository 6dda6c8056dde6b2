package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/** ConsumeKinesis' Processing Strategy: how records become FlowFiles. The names are the property's values, as the engine reads them. */
public enum ProcessingStrategy implements DescribedValue {
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

    private final String displayName;
    private final String description;

    ProcessingStrategy(final String displayName, final String description) {
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
