package io.kinesnow.nifi.nativebridge;

import java.nio.ByteBuffer;

/**
 * The natives only tests and benchmarks call: synthetic batches, leak counters, a log flood and deliberate
 * failures. They live in the library the NAR ships, so the tests exercise that very library; this class is not
 * in the NAR, so no flow can call them. Call {@link NativeLibrary#require()} before the first call.
 */
public final class NativeTestSupport {
    private NativeTestSupport() {
    }

    /** Credentials callbacks registered and not released; for leak checks in tests. */
    public static native int registeredCredentials();

    /** How many components are open in this JVM. */
    public static native int openComponents();

    /** A deterministic batch in the {@link RecordBatch} layout, for benchmarks and codec tests. */
    public static native byte[] syntheticBatch(int shards, int recordsPerShard, int payloadBytes);

    /**
     * {@link #syntheticBatch} handed over the way {@link NativeBridge#pollDirect} hands a batch over: into the direct
     * buffer {@code reusable} if it fits, else into a new direct buffer.
     */
    public static native ByteBuffer syntheticBatchDirect(int shards, int recordsPerShard, int payloadBytes, ByteBuffer reusable);

    /** A batch of one shard and two FlowFiles whose first partition key is {@code keyBytes} UTF-8 bytes long; for tests. */
    public static native byte[] partitionKeyBatch(int keyBytes);

    /**
     * The skipped records of {@link SkippedRecords#encode} as the core reads them, one line each: shard, lease counter,
     * the record before and the last record ({@code sequence/sub}, {@code -} for none); for tests.
     */
    public static native String[] describeSkippedForTest(byte[] skippedRecords);

    /** Logs {@code lines} native INFO events for the component and returns once they reached its sink; for tests. */
    public static native void logForTest(long handle, int lines);

    /** Raises one failure on purpose: 0 panic, 1 retryable, 2 configuration, 3 fatal; for tests. */
    public static native void raiseForTest(int mode);
}
