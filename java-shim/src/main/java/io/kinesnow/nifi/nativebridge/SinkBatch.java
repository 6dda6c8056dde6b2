package io.kinesnow.nifi.nativebridge;

import io.kinesnow.nifi.contract.Wire;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * PutSnowflake's JNI layouts (documented in rust-core/src/ffi/sink_io.rs): FlowFiles go in as one byte array,
 * their outcomes come back as another. Nothing here interprets content.
 */
public final class SinkBatch {
    static final int FLOW_FILES_MAGIC = Wire.FLOW_FILES_MAGIC;
    static final int OUTCOMES_MAGIC = Wire.OUTCOMES_MAGIC;
    static final int CANDIDATES_MAGIC = Wire.CANDIDATES_MAGIC;

    public static final int ROUTE_SUCCESS = Wire.ROUTE_SUCCESS;
    public static final int ROUTE_INVALID = Wire.ROUTE_INVALID;
    public static final int ROUTE_FAILURE = Wire.ROUTE_FAILURE;
    public static final int ROUTE_EMPTY = Wire.ROUTE_EMPTY;
    /** Back to the queue for the at-least-once channels (rust-core's {@code book::Route::Reload}). */
    public static final int ROUTE_RELOAD = Wire.ROUTE_RELOAD;
    /** Back to the queue, penalized: it waited for an earlier FlowFile while the in-flight budget was full. */
    public static final int ROUTE_RETRY = Wire.ROUTE_RETRY;
    /**
     * Not an outcome: the FlowFile stays held and its content is handed over again (its channel reopened before its rows,
     * dropped once appended, were committed; rust-core's {@code book::Route::Resend}).
     */
    public static final int ROUTE_RESEND = Wire.ROUTE_RESEND;

    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final DataOutputStream out = new DataOutputStream(bytes);
    private int count;

    /** Adds one FlowFile: its id, the attributes the core reads, and its content. */
    public void add(final long id, final Map<String, String> attributes, final byte[] content) {
        try {
            out.writeLong(id);
            writeAttributes(out, attributes);
            out.writeInt(content.length);
            out.write(content);
            count++;
        } catch (final IOException e) {
            throw new UncheckedIOException(e); // a ByteArrayOutputStream does not fail
        }
    }

    public int count() {
        return count;
    }

    /** The queued FlowFiles PutSnowflake may take, in the queue's order: each one's size and the attributes the core reads. */
    public static final class Candidates {
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        private final DataOutputStream out = new DataOutputStream(bytes);
        private int count;

        public void add(final long size, final Map<String, String> attributes) {
            try {
                out.writeLong(size);
                writeAttributes(out, attributes);
                count++;
            } catch (final IOException e) {
                throw new UncheckedIOException(e); // a ByteArrayOutputStream does not fail
            }
        }

        public byte[] encode() {
            final byte[] body = bytes.toByteArray();
            return ByteBuffer.allocate(8 + body.length).putInt(CANDIDATES_MAGIC).putInt(count).put(body).array();
        }
    }

    public byte[] encode() {
        final byte[] body = bytes.toByteArray();
        return ByteBuffer.allocate(8 + body.length).putInt(FLOW_FILES_MAGIC).putInt(count).put(body).array();
    }

    private static void writeAttributes(final DataOutputStream out, final Map<String, String> attributes) throws IOException {
        out.writeInt(attributes.size());
        for (final Map.Entry<String, String> e : attributes.entrySet()) {
            writeString(out, e.getKey());
            writeString(out, e.getValue());
        }
    }

    private static void writeString(final DataOutputStream out, final String s) throws IOException {
        final byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(utf8.length);
        out.write(utf8);
    }

    /** What happened to one FlowFile. */
    public record Outcome(long flowFileId, int route, int rowsSent, int rowsSkipped, String channel, String offsetToken,
                          String message) {
    }

    public static List<Outcome> decodeOutcomes(final byte[] encoded) {
        final ByteBuffer in = ByteBuffer.wrap(encoded);
        if (in.getInt() != OUTCOMES_MAGIC) {
            throw new IllegalArgumentException("not an outcome batch");
        }
        final int n = in.getInt();
        final List<Outcome> outcomes = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            final long id = in.getLong();
            final int route = in.get();
            final int sent = in.getInt();
            final int skipped = in.getInt();
            outcomes.add(new Outcome(id, route, sent, skipped, readString(in), readString(in), readString(in)));
        }
        return outcomes;
    }

    private static String readString(final ByteBuffer in) {
        final byte[] utf8 = new byte[in.getInt()];
        in.get(utf8);
        return new String(utf8, StandardCharsets.UTF_8);
    }
}
