package io.kinesnow.nifi.processors;

import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.logging.ComponentLog;

import java.nio.ByteBuffer;

/**
 * What {@link ConsumeKinesis} asks of its engine: the native one ({@link NativeRecordSource}), or a stand-in in
 * tests of the processor's own logic (settling every batch on every path).
 */
interface RecordSource {
    /**
     * Opens and starts the engine; returns at once, the engine may still be starting. {@code node} names the NiFi
     * node (see {@link NativeComponent#nodeIdentity}).
     */
    void open(PropertyContext context, ComponentLog log, String node);

    /** Stops the engine (cancelling a start in progress) and frees it. */
    void close();

    /** Null once batches can be polled; else why not yet, in words for a bulletin. */
    String startupStatus();

    /**
     * The next batch in the {@link io.kinesnow.nifi.nativebridge.RecordBatch} layout, or null: written into the direct
     * buffer {@code reusable} (may be null) when it is long enough, else into a new direct buffer; the buffer holding
     * it is returned.
     */
    ByteBuffer poll(ByteBuffer reusable);

    /**
     * The Kinesis records of the batch in hand that Java sent to parse.failure ({@link
     * io.kinesnow.nifi.nativebridge.SkippedRecords}), before its session commits; only for a batch with a link.
     */
    void noteSkipped(byte[] skippedRecords);

    /** NiFi committed the batch. */
    void ack(long batchId);

    /** NiFi did not commit the batch: its shards are read again from their checkpoint. */
    void nack(long batchId);

    /** The engine's counts since the last call, by index into {@code ConsumeKinesisCounters.ENGINE}, then its gauges' values ({@code GAUGES}); a stand-in counts nothing. */
    default long[] counters() {
        return new long[0];
    }

    /** View State's lines as key, value, key, value... (this node, each leased shard's status); a stand-in has none. */
    default String[] status() {
        return new String[0];
    }
}
