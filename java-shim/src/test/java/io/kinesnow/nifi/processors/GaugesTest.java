package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.ConsumeKinesisCounters;
import io.kinesnow.nifi.contract.PutSnowflakeCounters;
import org.apache.nifi.processor.metrics.CommitTiming;
import org.apache.nifi.util.MockProcessSession;
import org.apache.nifi.util.SharedSessionState;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The engine's gauges reach NiFi where its API has {@code recordGauge} (2.6 and later) and change nothing where it has
 * none (NiFi 2.0 to 2.5, the nifi-api these tests compile against): the counters drain as before.
 */
class GaugesTest {
    private final ConsumeKinesis processor = new ConsumeKinesis();
    private final SharedSessionState state = new SharedSessionState(processor, new AtomicLong());

    /** A session as NiFi 2.6+ makes them: it records gauges. */
    public static final class GaugeSession extends MockProcessSession {
        final List<String> recorded = new ArrayList<>();

        GaugeSession(final SharedSessionState state, final ConsumeKinesis processor) {
            super(state, processor);
        }

        public void recordGauge(final String name, final double value, final CommitTiming timing) {
            recorded.add(name + "=" + (long) value + "@" + timing);
        }
    }

    private long[] metrics(final long records, final long behind, final long shards) {
        final int counters = ConsumeKinesisCounters.ENGINE.size();
        final long[] metrics = new long[counters + ConsumeKinesisCounters.GAUGES.size()];
        metrics[0] = records;
        metrics[counters] = behind;
        metrics[counters + 1] = shards;
        return metrics;
    }

    @Test
    void aNiFiWithGaugesRecordsEachWithAValueAtOnce() {
        final GaugeSession session = new GaugeSession(state, processor);
        assertTrue(Gauges.supported(session));
        new EngineCounters(ConsumeKinesisCounters.ENGINE, ConsumeKinesisCounters.GAUGES).drain(session, () -> metrics(4, 2500, 3));
        assertEquals(List.of("Kinesis Millis Behind Latest=2500@NOW", "Shards Leased=3@NOW"), session.recorded);
        assertEquals(4L, state.getCounterValue("Records Read from Kinesis"));
    }

    @Test
    void aGaugeWithNothingToMeasureIsNotRecorded() {
        final GaugeSession session = new GaugeSession(state, processor);
        new EngineCounters(ConsumeKinesisCounters.ENGINE, ConsumeKinesisCounters.GAUGES)
                .drain(session, () -> metrics(0, EngineCounters.NO_VALUE, 0));
        assertEquals(List.of("Shards Leased=0@NOW"), session.recorded);
    }

    @Test
    void aNiFiWithoutGaugesGetsTheCountersAsBefore() {
        final MockProcessSession session = new MockProcessSession(state, processor);
        assertFalse(Gauges.supported(session), "nifi-api 2.0.0's session has no recordGauge");
        new EngineCounters(ConsumeKinesisCounters.ENGINE, ConsumeKinesisCounters.GAUGES).drain(session, () -> metrics(5, 100, 1));
        assertEquals(5L, state.getCounterValue("Records Read from Kinesis"));
    }

    @Test
    void putSnowflakeOpensASessionForItsGaugeOnlyWhereNiFiHasGauges() {
        final List<GaugeSession> made = new ArrayList<>();
        final long[] lagOnly = new long[PutSnowflakeCounters.ENGINE.size() + 1];
        lagOnly[PutSnowflakeCounters.ENGINE.size()] = 7000;
        new EngineCounters(PutSnowflakeCounters.ENGINE, PutSnowflakeCounters.GAUGES).drain(() -> {
            final GaugeSession s = new GaugeSession(state, processor);
            made.add(s);
            return s;
        }, () -> lagOnly);
        assertEquals(1, made.size(), "no count, but a gauge: a session is made for it");
        assertEquals(List.of("Snowflake Freshness Lag=7000@NOW"), made.get(0).recorded);

        final AtomicLong plainSessions = new AtomicLong();
        final EngineCounters withoutGauges = new EngineCounters(PutSnowflakeCounters.ENGINE, PutSnowflakeCounters.GAUGES);
        final org.apache.nifi.processor.ProcessSessionFactory plain = () -> {
            plainSessions.incrementAndGet();
            return new MockProcessSession(state, processor);
        };
        withoutGauges.drain(plain, () -> lagOnly);
        assertEquals(1, plainSessions.get(), "the first drain finds out NiFi has no gauges");
    }
}
