package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.FatalNativeException;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.logging.ComponentLog;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * A stand-in engine with one shard, with the native engine's settlement contract: a batch stays in flight until acked
 * or nacked, nothing else is handed out meanwhile, a nack hands the same records out again in a new batch.
 */
class OneShardEngine implements RecordSource {
    final List<String> calls = new ArrayList<>();
    /** What each {@link #noteSkipped} call carried. */
    final List<byte[]> skipped = new ArrayList<>();
    /** The buffer each {@link #poll} was lent (null for none). */
    final List<ByteBuffer> lent = new ArrayList<>();
    byte[] records;
    String startup;
    private long nextBatch = 1;
    private long inFlight;
    private boolean committed;

    OneShardEngine(final byte[] records) {
        this.records = records;
    }

    boolean inFlight() {
        return inFlight != 0;
    }

    @Override
    public void open(final PropertyContext context, final ComponentLog log, final String node) {
    }

    @Override
    public void close() {
    }

    @Override
    public String startupStatus() {
        return startup;
    }

    @Override
    public ByteBuffer poll(final ByteBuffer reusable) {
        if (committed || inFlight != 0) {
            return null; // a shard whose batch is in flight hands nothing else out
        }
        inFlight = nextBatch++;
        calls.add("poll " + inFlight);
        lent.add(reusable);
        // As the native engine does: into the lent direct buffer when it fits, else a new, longer one; the rest of
        // the buffer is left as it was (garbage for the decoder to ignore), its position and limit untouched.
        final ByteBuffer batch = reusable != null && reusable.capacity() >= records.length ? reusable : garbage(records.length + 4096);
        batch.put(0, records);
        batch.putLong(8, inFlight);
        return batch;
    }

    @Override
    public void noteSkipped(final byte[] skippedRecords) {
        if (inFlight == 0) {
            throw new FatalNativeException("skipped records reported with no batch in flight");
        }
        calls.add("skipped " + inFlight);
        skipped.add(skippedRecords);
    }

    @Override
    public void ack(final long batchId) {
        settle("ack", batchId);
        committed = true;
    }

    @Override
    public void nack(final long batchId) {
        settle("nack", batchId);
    }

    private void settle(final String how, final long batchId) {
        if (batchId != inFlight) {
            throw new FatalNativeException("batch " + batchId + " is unknown or already settled");
        }
        calls.add(how + " " + batchId);
        inFlight = 0;
    }

    private static ByteBuffer garbage(final int length) {
        final byte[] array = new byte[length];
        java.util.Arrays.fill(array, (byte) 0x55);
        return ByteBuffer.allocateDirect(length).put(0, array);
    }
}
