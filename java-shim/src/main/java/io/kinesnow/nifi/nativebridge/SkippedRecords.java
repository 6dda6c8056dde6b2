package io.kinesnow.nifi.nativebridge;

import io.kinesnow.nifi.contract.Wire;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The Kinesis records of one batch that Java sent to parse.failure (Processing Strategy RECORD), in the layout
 * {@link NativeBridge#noteSkipped} takes (documented in rust-core/src/ffi/skips.rs). The engine decides what they mean.
 */
public final class SkippedRecords {
    static final int MAGIC = Wire.SKIPS_MAGIC;

    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final DataOutputStream out = new DataOutputStream(bytes);
    private int count;

    /** Adds one Kinesis record of {@code shard} sent to parse.failure, with its position and the one before it. */
    public void add(final RecordBatch.Shard shard, final RecordBatch.FlowFileData kinesisRecord) {
        try {
            writeString(shard.shardId());
            out.writeLong(shard.tenure());
            writeString(kinesisRecord.previousSequence());
            out.writeLong(kinesisRecord.previousSubSequence());
            writeString(kinesisRecord.lastSequence());
            out.writeLong(kinesisRecord.lastSubSequence());
            count++;
        } catch (final IOException e) {
            throw new UncheckedIOException(e); // a ByteArrayOutputStream does not fail
        }
    }

    public int count() {
        return count;
    }

    public byte[] encode() {
        final byte[] body = bytes.toByteArray();
        return ByteBuffer.allocate(8 + body.length).putInt(MAGIC).putInt(count).put(body).array();
    }

    private void writeString(final String s) throws IOException {
        final byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        out.writeShort(utf8.length);
        out.write(utf8);
    }
}
