package io.kinesnow.nifi.processors;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.nifi.components.state.Scope;
import org.apache.nifi.components.state.StateManager;
import org.apache.nifi.logging.ComponentLog;

/**
 * Writes the engine's status lines into the processor's local state, which NiFi's "View State" shows: from a thread of
 * its own while the processor is scheduled (so the view stays current when NiFi stops triggering the processor, under
 * back-pressure, exactly when an operator looks), every {@link #INTERVAL_SECONDS} seconds, only when a line changed.
 * Nothing reads the status back; stopping the processor clears it, so View State never shows a stopped engine's work
 * as current. Entries the processor keeps in the same state for itself ({@code kept}, such as PutSnowflake's
 * {@code instance.id}) are carried over into every write and survive the clear; when they cannot be read, nothing is
 * written. Entries the engine keeps ({@code engineKept}, such as PutSnowflake's {@code passed.gaps}) are written from
 * its lines like the status (absent from them: removed), and survive the clear as last written.
 */
final class StatusState {
    static final long INTERVAL_SECONDS = 5;

    private final Set<String> kept;

    private final Set<String> engineKept;

    private ScheduledExecutorService writer;

    /** Starts writing {@code lines} (see {@link #update}) every {@link #INTERVAL_SECONDS} seconds until {@link #stop}. */
    synchronized void start(final StateManager state, final ComponentLog log, final Supplier<String[]> lines) {
        stop();
        writer = Executors.newSingleThreadScheduledExecutor(task -> {
            final Thread thread = new Thread(task, "kinesnow-view-state");
            thread.setDaemon(true);
            return thread;
        });
        writer.scheduleWithFixedDelay(() -> {
            try {
                update(state, log, lines);
            } catch (final RuntimeException e) {
                log.debug("View State not updated: {}", e.getMessage()); // the engine is starting or closing
            }
        }, INTERVAL_SECONDS, INTERVAL_SECONDS, TimeUnit.SECONDS);
    }

    /** Stops the writer and waits for a write in progress, so the engine can be closed under it. */
    synchronized void stop() {
        if (writer == null) {
            return;
        }
        writer.shutdownNow();
        try {
            writer.awaitTermination(10, TimeUnit.SECONDS);
        } catch (final InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        writer = null;
    }

    private volatile Map<String, String> written = Map.of();
    private volatile boolean warned;

    /** For a processor that keeps nothing else in its local state. */
    StatusState() {
        this(Set.of());
    }

    StatusState(final Set<String> kept) {
        this(kept, Set.of());
    }

    StatusState(final Set<String> kept, final Set<String> engineKept) {
        this.kept = Set.copyOf(kept);
        this.engineKept = Set.copyOf(engineKept);
    }

    /** Writes {@code lines} (key, value, key, value...) if they changed since the last write. */
    void update(final StateManager state, final ComponentLog log, final Supplier<String[]> lines) {
        final String[] flat = lines.get();
        final Map<String, String> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < flat.length; i += 2) {
            map.put(flat[i], flat[i + 1]);
        }
        if (map.equals(written)) {
            return;
        }
        try {
            state.setState(withKept(state, map), Scope.LOCAL);
            written = map;
        } catch (final IOException e) {
            if (!warned) {
                warned = true;
                log.warn("View State not updated (the status of each shard or channel): {}", e.getMessage());
            }
        }
    }

    /** {@code status} with the kept entries as the state holds them now. */
    private Map<String, String> withKept(final StateManager state, final Map<String, String> status) throws IOException {
        return withKept(state, status, kept);
    }

    /** {@code status} with the entries of {@code keep} as the state holds them now. */
    private static Map<String, String> withKept(final StateManager state, final Map<String, String> status,
            final Set<String> keep) throws IOException {
        if (keep.isEmpty()) {
            return status;
        }
        final Map<String, String> all = new LinkedHashMap<>();
        state.getState(Scope.LOCAL).toMap().forEach((key, value) -> {
            if (keep.contains(key)) {
                all.put(key, value);
            }
        });
        status.forEach((key, value) -> {
            if (!keep.contains(key)) {
                all.put(key, value);
            }
        });
        return all;
    }

    /** Clears the status (the processor stopped); the kept entries and the engine's stay. */
    void clear(final StateManager state, final ComponentLog log) {
        written = Map.of();
        final Set<String> keep = new java.util.HashSet<>(kept);
        keep.addAll(engineKept);
        try {
            if (keep.isEmpty()) {
                state.clear(Scope.LOCAL);
            } else {
                state.setState(withKept(state, Map.of(), keep), Scope.LOCAL);
            }
        } catch (final IOException e) {
            log.warn("View State not cleared (the status of each shard or channel): {}", e.getMessage());
        }
    }
}
