package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/** PutSnowflake's Destination Type: which pipe the rows go through. The names are the property's values, as the engine reads them. */
public enum DestinationType implements DescribedValue {
    TABLE("Table",
            "Write through the table's default pipe <TABLE>-STREAMING."),
    PIPE("Pipe",
            "Write through a named pipe.");

    private final String displayName;
    private final String description;

    DestinationType(final String displayName, final String description) {
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
