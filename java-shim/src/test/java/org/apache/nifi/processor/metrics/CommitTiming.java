package org.apache.nifi.processor.metrics;

/**
 * Test only: nifi-api 2.6's {@code CommitTiming}, with the same name and constants. The NAR compiles and these tests
 * run against nifi-api 2.0.0, which has no gauges; this enum and {@code GaugesTest}'s session that declares
 * {@code recordGauge} stand in for a NiFi that has them (NiFi's own mock session of 2.6 to 2.7.2 does not record them).
 */
public enum CommitTiming {
    NOW,
    SESSION_COMMITTED
}
