package io.kinesnow.nifi.processors;

/** ConsumeKinesis' Consumer Type: how the shards are read. The names are the property's values, as the engine reads them. */
public enum ConsumerType implements Choice {
    SHARED_THROUGHPUT("Shared Throughput",
            "Polls each shard with GetRecords, sharing the shard's 2 MiB/s read limit with other consumers."),
    ENHANCED_FAN_OUT("Enhanced Fan-Out",
            "Subscribes to each shard through a registered consumer with its own 2 MiB/s per shard.");

    private final Words words;

    ConsumerType(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
