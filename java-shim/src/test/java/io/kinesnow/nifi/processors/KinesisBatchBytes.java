package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.RecordBatch;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Batches of one shard in the JNI layout ({@code rust-core/src/ffi/batch.rs}), as the engine hands them out with
 * Processing Strategy RECORD: one entry per Kinesis record, its bytes as they are. For tests that need chosen contents;
 * {@link RecordBatch} decodes them.
 */
final class KinesisBatchBytes {
    static final String SHARD = "shardId-000000000003";

    /** One Kinesis record: sequence number, sub-sequence (-1 when not aggregated), the one read before it, its data. */
    record Entry(String sequence, long sub, String previousSequence, long previousSub, String partitionKey,
                 long arrivalMillis, byte[] data) {
        static Entry of(final int n, final String data) {
            return of(n, data.getBytes(StandardCharsets.UTF_8));
        }

        /** Record {@code n} of the shard, after record {@code n - 1} (none before record 1). */
        static Entry of(final int n, final byte[] data) {
            return new Entry(KinesisBatchBytes.sequence(n), -1, n == 1 ? "" : KinesisBatchBytes.sequence(n - 1), -1, "key-" + n, 1_764_000_000_000L + n, data);
        }
    }

    static String sequence(final int n) {
        return "4963" + String.format("%052d", n);
    }

    private KinesisBatchBytes() {
    }

    /** A batch of {@link #SHARD}; {@code link} non-empty: read by lease counter {@code tenure}. */
    static byte[] oneShard(final String link, final long tenure, final List<Entry> entries) {
        try {
            final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            final DataOutputStream out = new DataOutputStream(bytes);
            out.writeInt(0x4B4E4237); // "KNB7"
            out.writeInt(0); // the length, written below
            out.writeLong(1);
            str16(out, link);
            out.writeInt(1);
            str16(out, SHARD);
            str16(out, "");
            out.writeLong(5);
            out.writeLong(link.isEmpty() ? -1 : tenure);
            out.writeInt(entries.size());
            for (final Entry e : entries) {
                out.writeByte(RecordBatch.ROUTE_SUCCESS);
                out.writeInt(1);
                str16(out, e.sequence());
                out.writeLong(e.sub());
                str16(out, e.sequence());
                out.writeLong(e.sub());
                str16(out, e.previousSequence());
                out.writeLong(e.previousSub());
                final byte[] key = e.partitionKey().getBytes(StandardCharsets.UTF_8);
                out.writeInt(key.length);
                out.write(key);
                out.writeLong(e.arrivalMillis());
                str16(out, "");
                out.writeInt(e.data().length);
                out.write(e.data());
            }
            final byte[] batch = bytes.toByteArray();
            java.nio.ByteBuffer.wrap(batch).putInt(4, batch.length);
            return batch;
        } catch (final IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void str16(final DataOutputStream out, final String text) throws IOException {
        final byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
        out.writeShort(utf8.length);
        out.write(utf8);
    }
}
