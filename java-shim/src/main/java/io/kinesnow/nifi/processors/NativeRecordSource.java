package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeBridge;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.logging.ComponentLog;

import java.nio.ByteBuffer;

/** The native Kinesis consumer engine behind {@link ConsumeKinesis}. */
final class NativeRecordSource implements RecordSource {
    private final NativeComponent component = new NativeComponent(NativeBridge.CONSUME_KINESIS);

    @Override
    public void open(final PropertyContext context, final ComponentLog log, final String node) {
        // The engine keeps the credentials service's callback once open; the registration only spans the open.
        try (CredentialsService.Registration credentials = CredentialsService.register(context)) {
            component.open(context, ConsumeKinesis.PROPERTIES, log,
                    credentials.facts(NativeComponent.withFacts(ProxyService.facts(context), NativeComponent.NODE_IDENTITY, node)));
        }
    }

    @Override
    public void close() {
        component.close();
    }

    @Override
    public String startupStatus() {
        return NativeBridge.startupStatus(component.handle());
    }

    @Override
    public ByteBuffer poll(final ByteBuffer reusable) {
        return NativeBridge.pollDirect(component.handle(), reusable);
    }

    @Override
    public void noteSkipped(final byte[] skippedRecords) {
        NativeBridge.noteSkipped(component.handle(), skippedRecords);
    }

    @Override
    public void ack(final long batchId) {
        NativeBridge.ack(component.handle(), batchId);
    }

    @Override
    public void nack(final long batchId) {
        NativeBridge.nack(component.handle(), batchId);
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
