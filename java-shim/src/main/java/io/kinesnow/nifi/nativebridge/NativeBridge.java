package io.kinesnow.nifi.nativebridge;

import java.nio.ByteBuffer;

/**
 * The native functions of the Rust core. Objects live in Rust behind opaque {@code long} handles that Java
 * must {@link #close(long)}; a closed or unknown handle raises {@link FatalNativeException}, never a crash.
 * Every function may throw {@link RetryableNativeException}, {@link ConfigurationNativeException} or
 * {@link FatalNativeException}. Call {@link NativeLibrary#require()} before the first call.
 */
public final class NativeBridge {
    /** The {@code component} argument of {@link #validate}, {@link #open} and {@link #propertyNames}. */
    public static final String CONSUME_KINESIS = "ConsumeKinesis";
    public static final String PUT_SNOWFLAKE = "PutSnowflake";

    private NativeBridge() {
    }

    public static native String libraryVersion();

    /** Every property name the native rules read for {@code component}. */
    public static native String[] propertyNames(String component);

    /**
     * Checks settings without keeping anything.
     *
     * @param properties alternating property names and evaluated values
     * @return alternating property names and explanations; empty when valid
     */
    public static native String[] validate(String component, String[] properties);

    /**
     * "Verify Properties": tries the settings against the services with read-only probes.
     *
     * @param properties alternating property names and evaluated values
     * @return the steps as alternating step name, outcome ({@code SUCCESSFUL}, {@code FAILED} or {@code SKIPPED})
     *         and explanation
     */
    public static native String[] verify(String component, String[] properties);

    /**
     * ConsumeKinesis was removed: deregisters its Enhanced Fan-Out consumer. Returns "" when it reads by polling,
     * else what was done; throws with a message naming the consumer when it could not be deregistered.
     */
    public static native String removeConsumer(String[] properties);

    /** Creates a component from its settings; its log events go to {@code sink} until closed. */
    public static native long open(String component, String[] properties, NativeLogSink sink);

    /**
     * Hands a credentials callback to the engine; returns the handle that {@code open} and {@code verify} take as the
     * fact "AWS Credentials Provider Service Handle". Components opened with it keep it; release the handle after.
     */
    public static native long registerCredentials(CredentialsCallback callback);

    /** Releases a handle of {@link #registerCredentials}; releasing twice does nothing. */
    public static native void releaseCredentials(long handle);


    /**
     * Starts the component's engine. ConsumeKinesis's engine starts in the background (a KCL migration by another
     * node, an Enhanced Fan-Out consumer becoming ACTIVE can take minutes): this returns at once, and
     * {@link #startupStatus} says when it runs.
     */
    public static native void start(long handle);

    /** Null once the component works; else why not yet (starting, or the last start attempt failed and is retried). */
    public static native String startupStatus(long handle);

    /**
     * The next batch of FlowFiles in the {@link RecordBatch} layout, or null when nothing arrived within the
     * processor's Max Batch Duration. ConsumeKinesis only. The engine writes the batch straight into {@code reusable}
     * (a direct buffer, or null) when it is long enough, and returns it; else into a new direct buffer
     * ({@code ByteBuffer.allocateDirect}, in steps of 64 KiB, 1 MiB beyond 1 MiB), which it returns. Either way the
     * batch may fill only the start of the buffer (its header says how long it is), and the buffer's position and
     * limit are not changed. The caller must not read or lend the buffer to another call while this one runs. The
     * memory is the JVM's (outside the heap): the engine keeps no pointer to it after the call.
     */
    public static native ByteBuffer pollDirect(long handle, ByteBuffer reusable);

    /**
     * ConsumeKinesis with Processing Strategy RECORD: the Kinesis records of a batch that Java sent to parse.failure
     * ({@link SkippedRecords#encode}), once per batch before its session commits, so PutSnowflake knows they never
     * come (Failover Position SNOWFLAKE_COMMIT; nothing happens without it).
     */
    public static native void noteSkipped(long handle, byte[] skippedRecords);

    /** NiFi committed the batch: the engine writes its checkpoints. */
    public static native void ack(long handle, long batchId);

    /** NiFi did not commit the batch: its shards rewind to their last checkpoint. */
    public static native void nack(long handle, long batchId);

    /** Stops and frees the component; the handle is invalid afterwards. */
    public static native void close(long handle);

    /** PutSnowflake: hands FlowFiles (encoded by {@link SinkBatch#encode}) to their channels; returns at once. */
    public static native void submit(long handle, byte[] flowFiles);

    /**
     * PutSnowflake: outcomes of submitted FlowFiles (decoded by {@link SinkBatch#decodeOutcomes}), waiting up to
     * {@code waitMillis} for the first; null when none is known yet.
     */
    public static native byte[] outcomes(long handle, long waitMillis);

    /** PutSnowflake: bytes of FlowFile content the engine can take before its in-flight budget is full. */
    public static native long capacity(long handle);

    /**
     * PutSnowflake: which of the queued FlowFiles (encoded by {@link SinkBatch.Candidates}, in the queue's order) to
     * take now, as indexes into them: within each shard the records read first, within the room left in the budget.
     */
    public static native int[] choose(long handle, byte[] candidates);

    /**
     * The counts of the engine's counters since the last call, by index as {@code ConsumeKinesisCounters.ENGINE} or
     * {@code PutSnowflakeCounters.ENGINE} names them (zeros while no engine runs).
     */
    public static native long[] counters(long handle);

    /**
     * The component's View State lines as key, value, key, value... (ConsumeKinesis: this node and each leased shard;
     * PutSnowflake: each open channel); empty while not running.
     */
    public static native String[] status(long handle);
}
