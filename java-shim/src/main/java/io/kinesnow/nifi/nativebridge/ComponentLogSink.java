package io.kinesnow.nifi.nativebridge;

import org.apache.nifi.logging.ComponentLog;

/** Sends native log events to a processor's ComponentLog, so warnings and errors become bulletins. */
public final class ComponentLogSink implements NativeLogSink {
    private final ComponentLog log;

    public ComponentLogSink(final ComponentLog log) {
        this.log = log;
    }

    @Override
    public void log(final int level, final String message) {
        switch (level) {
            case ERROR -> log.error(message);
            case WARN -> log.warn(message);
            case INFO -> log.info(message);
            case DEBUG -> log.debug(message);
            default -> log.trace(message);
        }
    }
}
