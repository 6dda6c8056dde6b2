package io.kinesnow.nifi.processors;

import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The arrays {@link ConsumeKinesis} lends the engine to write batches into, so a batch costs no new array of its size
 * (and the garbage collector no array of megabytes per batch). Each concurrent task holds at most one, so the pool
 * holds at most one array per concurrent task, each about one Max Batch Size long; arrays longer than
 * {@link #LARGEST_KEPT} are dropped instead of kept.
 */
final class BatchArrays {
    static final int LARGEST_KEPT = 64 * 1024 * 1024;

    private final ConcurrentLinkedQueue<byte[]> free = new ConcurrentLinkedQueue<>();

    /** An array to lend, or null when none is free (the engine then allocates one). */
    byte[] take() {
        return free.poll();
    }

    /** Back into the pool once nothing refers into it any more (the batch decoded from it is written out). */
    void give(final byte[] array) {
        if (array != null && array.length <= LARGEST_KEPT) {
            free.offer(array);
        }
    }

    /** Frees every array, when the processor stops. */
    void clear() {
        free.clear();
    }

    int size() {
        return free.size();
    }
}
