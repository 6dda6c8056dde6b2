package io.kinesnow.nifi.nativebridge;

import java.io.InputStream;
import java.nio.ByteBuffer;

/** Reads a buffer's remaining bytes, with mark and reset (moving its position: pass a view of your own, such as a slice). */
final class ByteBufferInputStream extends InputStream {
    private final ByteBuffer buffer;
    private int mark;

    ByteBufferInputStream(final ByteBuffer buffer) {
        this.buffer = buffer;
    }

    @Override
    public int read() {
        return buffer.hasRemaining() ? buffer.get() & 0xFF : -1;
    }

    @Override
    public int read(final byte[] bytes, final int offset, final int length) {
        java.util.Objects.checkFromIndexSize(offset, length, bytes.length);
        if (length == 0) {
            return 0;
        }
        if (!buffer.hasRemaining()) {
            return -1;
        }
        final int n = Math.min(length, buffer.remaining());
        buffer.get(bytes, offset, n);
        return n;
    }

    @Override
    public long skip(final long n) {
        final int skipped = (int) Math.max(0, Math.min(n, buffer.remaining()));
        buffer.position(buffer.position() + skipped);
        return skipped;
    }

    @Override
    public int available() {
        return buffer.remaining();
    }

    /** As {@code ByteArrayInputStream}: Record Readers that infer a schema read ahead and go back. */
    @Override
    public boolean markSupported() {
        return true;
    }

    @Override
    public synchronized void mark(final int readLimit) {
        mark = buffer.position();
    }

    @Override
    public synchronized void reset() {
        buffer.position(mark);
    }
}
