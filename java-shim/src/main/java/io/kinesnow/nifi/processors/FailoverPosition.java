package io.kinesnow.nifi.processors;

/** ConsumeKinesis' Failover Position: where a node that takes a shard over resumes. The names are the property's values, as the engine reads them. */
public enum FailoverPosition implements Choice {
    NIFI_COMMIT("NiFi Commit",
            "A node that takes a shard over resumes after the last record NiFi committed (the checkpoint). "
            + "Records NiFi committed on the old node but that no destination has yet are loaded from that node's "
            + "queues once it returns: PutSnowflake loads them at least once across a failover, through per-node "
            + "channels."),
    SNOWFLAKE_COMMIT("Snowflake Commit",
            "A node that takes a shard over resumes after the last record Snowflake is known to have, as "
            + "PutSnowflake on the same NiFi node reports it into the lease table: exactly once into Snowflake "
            + "across failover, through one shared channel per shard. Needs PutSnowflake fed by this processor on "
            + "the same node (no load-balanced connection between them); other destinations of the same records see "
            + "the records between that position and the checkpoint again after a failover.");

    private final Words words;

    FailoverPosition(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
