package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/** ConsumeKinesis' Consumer Type: how the shards are read. The names are the property's values, as the engine reads them. */
public enum ConsumerType implements DescribedValue {
    SHARED_THROUGHPUT("Shared Throughput",
            "Polls each shard with GetRecords, sharing the shard's 2 MiB/s read limit with other consumers."),
    ENHANCED_FAN_OUT("Enhanced Fan-Out",
            "Subscribes to each shard through a registered consumer with its own 2 MiB/s per shard.");

    private final String displayName;
    private final String description;

    ConsumerType(final String displayName, final String description) {
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
