package io.kinesnow.nifi.processors;

/** ConsumeKinesis' Initial Position: where a shard without a checkpoint starts. The names are the property's values, as the engine reads them. */
public enum InitialPosition implements Choice {
    TRIM_HORIZON("Trim Horizon",
            "Start from the oldest record still in the stream."),
    LATEST("Latest",
            "Start with records written after the processor first takes each shard (that time is kept in the "
            + "lease table)."),
    AT_TIMESTAMP("At Timestamp",
            "Start from the records written at or after the Stream Position Timestamp.");

    private final Words words;

    InitialPosition(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
