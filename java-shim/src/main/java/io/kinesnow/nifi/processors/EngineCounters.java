package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.ProcessSessionFactory;

/**
 * Adds what an engine counted since the last drain to NiFi's counters. They apply at once, whatever becomes of the
 * session: what the engine counted happened (a checkpoint written, a call retried) whether or not this session commits.
 * At most one drain per {@link #INTERVAL_NANOS}, so a processor triggered thousands of times a second makes one JNI
 * call a second for its counters.
 */
final class EngineCounters {
    static final long INTERVAL_NANOS = 1_000_000_000L;
    private static final long[] NONE = new long[0];

    private final List<String> names;
    /** When the next drain is due; several concurrent tasks may trigger at once, and one of them drains. */
    private final AtomicLong dueAt = new AtomicLong(System.nanoTime());

    EngineCounters(final List<String> names) {
        this.names = names;
    }

    /** Drains {@code counts} (supplied only when due) into {@code session}'s counters. */
    void drain(final ProcessSession session, final Supplier<long[]> counts) {
        adjust(session, due(counts));
    }

    /** {@link #drain(ProcessSession, Supplier)} through a session of its own, created only when there is a count. */
    void drain(final ProcessSessionFactory sessions, final Supplier<long[]> counts) {
        final long[] taken = due(counts);
        if (Arrays.stream(taken).allMatch(n -> n == 0)) {
            return;
        }
        final ProcessSession session = sessions.createSession();
        adjust(session, taken);
        session.commitAsync();
    }

    private void adjust(final ProcessSession session, final long[] taken) {
        for (int i = 0; i < taken.length && i < names.size(); i++) {
            if (taken[i] != 0) {
                session.adjustCounter(names.get(i), taken[i], true);
            }
        }
    }

    private long[] due(final Supplier<long[]> counts) {
        final long now = System.nanoTime();
        final long due = dueAt.get();
        if (now - due < 0 || !dueAt.compareAndSet(due, now + INTERVAL_NANOS)) {
            return NONE;
        }
        try {
            return counts.get();
        } catch (final NativeException e) {
            return NONE; // the engine was closed under this last trigger (the processor is stopping)
        }
    }
}
