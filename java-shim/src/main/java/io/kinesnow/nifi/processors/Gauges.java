package io.kinesnow.nifi.processors;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Optional;
import org.apache.nifi.processor.ProcessSession;

/**
 * NiFi's gauges ({@code ProcessSession.recordGauge(String, double, CommitTiming)}, nifi-api 2.6 and later), where the
 * NiFi running the NAR has them. The NAR is built against nifi-api 2.0.0, which has no gauges: the method and its
 * {@code CommitTiming} are looked up by name when the processor runs, once per session class, and on NiFi 2.0 to 2.5
 * nothing is recorded.
 */
final class Gauges {
    static final String COMMIT_TIMING = "org.apache.nifi.processor.metrics.CommitTiming";

    private static final ConcurrentHashMap<Class<?>, Optional<MethodHandle>> RECORDERS = new ConcurrentHashMap<>();

    private Gauges() {
    }

    /** Whether {@code session} records gauges. */
    static boolean supported(final ProcessSession session) {
        return recorder(session.getClass()).isPresent();
    }

    /** Records {@code value} for the gauge {@code name} at once ({@code CommitTiming.NOW}); false where there are no gauges. */
    static boolean record(final ProcessSession session, final String name, final double value) {
        final Optional<MethodHandle> recorder = recorder(session.getClass());
        if (recorder.isEmpty()) {
            return false;
        }
        try {
            recorder.get().invoke(session, name, value);
            return true;
        } catch (final RuntimeException | Error e) {
            throw e;
        } catch (final Throwable e) {
            throw new IllegalStateException("recordGauge failed: " + e, e);
        }
    }

    private static Optional<MethodHandle> recorder(final Class<?> sessionClass) {
        return RECORDERS.computeIfAbsent(sessionClass, Gauges::recorderOf);
    }

    /** The API's own method where {@code ProcessSession} declares it (NiFi 2.6+), else the session class's. */
    private static Optional<MethodHandle> recorderOf(final Class<?> sessionClass) {
        return lookUp(ProcessSession.class, ProcessSession.class.getClassLoader())
                .or(() -> lookUp(sessionClass, sessionClass.getClassLoader()));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Optional<MethodHandle> lookUp(final Class<?> declaring, final ClassLoader loader) {
        try {
            final Class<? extends Enum> timing = (Class<? extends Enum>) Class.forName(COMMIT_TIMING, false, loader);
            final Object now = Enum.valueOf(timing, "NOW");
            final MethodHandle method = MethodHandles.lookup().findVirtual(declaring, "recordGauge",
                    MethodType.methodType(void.class, String.class, double.class, timing));
            return Optional.of(MethodHandles.insertArguments(method, 3, now)
                    .asType(MethodType.methodType(void.class, ProcessSession.class, String.class, double.class)));
        } catch (final ReflectiveOperationException | IllegalArgumentException | LinkageError | ClassCastException e) {
            return Optional.empty();
        }
    }
}
