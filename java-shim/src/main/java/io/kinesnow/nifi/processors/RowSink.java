package io.kinesnow.nifi.processors;

import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.logging.ComponentLog;

/**
 * What {@link PutSnowflake} asks of its engine: the native one ({@link NativeRowSink}), or a stand-in in tests of the
 * processor's own logic. Byte layouts are {@link io.kinesnow.nifi.nativebridge.SinkBatch}'s.
 */
interface RowSink {
    /** Opens the engine with the processor's settings and {@code facts} (name and value pairs: its instance id, the node, the proxy). */
    void open(PropertyContext context, ComponentLog log, String... facts);

    /** Stops the engine and frees it; FlowFiles it has not given an outcome get none. */
    void close();

    /** Bytes of content the engine can still take before its in-flight budget is full. */
    long capacity();

    /**
     * Which of the queued FlowFiles ({@link io.kinesnow.nifi.nativebridge.SinkBatch.Candidates}, in the queue's order)
     * to take now, as indexes into them.
     */
    int[] choose(byte[] candidates);

    /** Hands FlowFiles over ({@link io.kinesnow.nifi.nativebridge.SinkBatch}); each gets exactly one outcome. */
    void submit(byte[] flowFiles);

    /** The outcomes known so far, waiting up to {@code waitMillis} for the first; null when none is known yet. */
    byte[] outcomes(long waitMillis);

    /** The engine's counts since the last call, by index into {@code PutSnowflakeCounters.ENGINE}, then its gauges' values ({@code GAUGES}); a stand-in counts nothing. */
    default long[] counters() {
        return new long[0];
    }

    /** View State's lines as key, value, key, value... (each open channel); a stand-in has none. */
    default String[] status() {
        return new String[0];
    }
}
