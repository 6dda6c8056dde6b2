package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.ProcessSessionFactory;

/**
 * Adds what an engine counted since the last drain to NiFi's counters, and records its gauges where NiFi has them (see
 * {@link Gauges}). Both apply at once, whatever becomes of the session: what the engine counted happened (a checkpoint
 * written, a call retried) whether or not this session commits. At most one drain per {@link #INTERVAL_NANOS}, so a
 * processor triggered thousands of times a second makes one JNI call a second for them. The engine reports its counts
 * in the order of {@code names}, then the gauges' values in the order of {@code gauges} ({@link #NO_VALUE}: none).
 */
final class EngineCounters {
    static final long INTERVAL_NANOS = 1_000_000_000L;
    /** A gauge the engine has nothing to measure for (the contract's {@code NO_VALUE}). */
    static final long NO_VALUE = Long.MIN_VALUE;
    private static final long[] NONE = new long[0];

    private final List<String> names;
    private final List<String> gauges;
    /** Whether the sessions seen so far record gauges (until one did not: NiFi before 2.6). */
    private volatile boolean gaugesSupported = true;
    /** When the next drain is due; several concurrent tasks may trigger at once, and one of them drains. */
    private final AtomicLong dueAt = new AtomicLong(System.nanoTime());

    EngineCounters(final List<String> names, final List<String> gauges) {
        this.names = names;
        this.gauges = gauges;
    }

    /** Drains {@code counts} (supplied only when due) into {@code session}'s counters. */
    void drain(final ProcessSession session, final Supplier<long[]> counts) {
        adjust(session, due(counts));
    }

    /**
     * {@link #drain(ProcessSession, Supplier)} through a session of its own, created only when there is a count or,
     * where NiFi has gauges, a gauge's value.
     */
    void drain(final ProcessSessionFactory sessions, final Supplier<long[]> counts) {
        final long[] taken = due(counts);
        final boolean anyCount = Arrays.stream(taken, 0, Math.min(taken.length, names.size())).anyMatch(n -> n != 0);
        if (!anyCount && (taken.length <= names.size() || !gaugesSupported)) {
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
        for (int g = 0; g < gauges.size() && names.size() + g < taken.length; g++) {
            final long value = taken[names.size() + g];
            if (value != NO_VALUE && !Gauges.record(session, gauges.get(g), value)) {
                gaugesSupported = false;
                return;
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
