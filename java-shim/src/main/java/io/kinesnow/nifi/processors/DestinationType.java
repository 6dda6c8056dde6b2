package io.kinesnow.nifi.processors;

/** PutSnowflake's Destination Type: which pipe the rows go through. The names are the property's values, as the engine reads them. */
public enum DestinationType implements Choice {
    TABLE("Table",
            "Write through the table's default pipe <TABLE>-STREAMING."),
    PIPE("Pipe",
            "Write through a named pipe.");

    private final Words words;

    DestinationType(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
