package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/** ConsumeKinesis' Initial Position: where a shard without a checkpoint starts. The names are the property's values, as the engine reads them. */
public enum InitialPosition implements DescribedValue {
    TRIM_HORIZON("Trim Horizon",
            "Start from the oldest record still in the stream."),
    LATEST("Latest",
            "Start with records written after the processor first takes each shard (that time is kept in the "
            + "lease table)."),
    AT_TIMESTAMP("At Timestamp",
            "Start from the records written at or after the Stream Position Timestamp.");

    private final String displayName;
    private final String description;

    InitialPosition(final String displayName, final String description) {
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
