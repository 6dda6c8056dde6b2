package io.kinesnow.nifi.processors;

import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The direct buffers {@link ConsumeKinesis} lends the engine to write batches into, so a batch costs no new buffer of
 * its size. They are outside the Java heap (the engine writes into their memory, see {@code NativeBridge.pollDirect}):
 * the garbage collector never copies or marks a batch, and no batch is a humongous array. Each concurrent task holds
 * at most one, so the pool holds at most one buffer per concurrent task, each about one Max Batch Size long (the
 * engine allocates them in steps of at most 1 MiB); buffers longer than {@link #LARGEST_KEPT} are dropped instead of
 * kept, and freed by the JVM once unreachable (a dropped buffer's memory counts against MaxDirectMemorySize until then).
 */
final class BatchArrays {
    static final int LARGEST_KEPT = 64 * 1024 * 1024;

    private final ConcurrentLinkedQueue<ByteBuffer> free = new ConcurrentLinkedQueue<>();

    /** A buffer to lend, or null when none is free (the engine then allocates one). */
    ByteBuffer take() {
        return free.poll();
    }

    /** Back into the pool once nothing refers into it any more (the batch decoded from it is written out). */
    void give(final ByteBuffer buffer) {
        if (buffer != null && buffer.isDirect() && buffer.capacity() <= LARGEST_KEPT) {
            free.offer(buffer);
        }
    }

    /** Drops every buffer, when the processor stops. */
    void clear() {
        free.clear();
    }

    int size() {
        return free.size();
    }
}
