package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeBridge;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.logging.ComponentLog;

/** The native Snowpipe Streaming engine behind {@link PutSnowflake}. */
final class NativeRowSink implements RowSink {
    private final NativeComponent component = new NativeComponent(NativeBridge.PUT_SNOWFLAKE);

    @Override
    public void open(final PropertyContext context, final ComponentLog log, final String... facts) {
        component.open(context, PutSnowflake.PROPERTIES, log, facts);
    }

    @Override
    public void close() {
        component.close();
    }

    @Override
    public long capacity() {
        return NativeBridge.capacity(component.handle());
    }

    @Override
    public int[] choose(final byte[] candidates) {
        return NativeBridge.choose(component.handle(), candidates);
    }

    @Override
    public void submit(final byte[] flowFiles) {
        NativeBridge.submit(component.handle(), flowFiles);
    }

    @Override
    public byte[] outcomes(final long waitMillis) {
        return NativeBridge.outcomes(component.handle(), waitMillis);
    }

    @Override
    public long[] counters() {
        return NativeBridge.counters(component.handle());
    }

    @Override
    public String[] status() {
        return NativeBridge.status(component.handle());
    }
}
