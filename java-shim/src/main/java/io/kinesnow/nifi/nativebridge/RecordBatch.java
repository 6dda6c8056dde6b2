package io.kinesnow.nifi.nativebridge;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Reads one batch of Kinesis records in the layout the native library writes (see rust-core's
 * {@code ffi/batch.rs}): records grouped by shard, each record's data left in place as a slice of the array.
 */
public final class RecordBatch {
    static final int MAGIC = 0x4B4E4231; // "KNB1"

    private final long batchId;
    private final List<Shard> shards;

    private RecordBatch(final long batchId, final List<Shard> shards) {
        this.batchId = batchId;
        this.shards = shards;
    }

    public long batchId() {
        return batchId;
    }

    public List<Shard> shards() {
        return shards;
    }

    public int recordCount() {
        return shards.stream().mapToInt(s -> s.records().size()).sum();
    }

    /** One record; {@link #data()} shares the batch's array. */
    public record Record(long approximateArrivalMillis, long subSequenceNumber, String sequenceNumber,
                         String partitionKey, byte[] buffer, int dataOffset, int dataLength) {
        /** True when the record came out of a KPL aggregate (it then has a sub-sequence number). */
        public boolean aggregated() {
            return subSequenceNumber >= 0;
        }

        public byte[] data() {
            final byte[] copy = new byte[dataLength];
            System.arraycopy(buffer, dataOffset, copy, 0, dataLength);
            return copy;
        }
    }

    public record Shard(String shardId, long millisBehind, List<Record> records) {
    }

    public static RecordBatch decode(final byte[] bytes) {
        final ByteBuffer in = ByteBuffer.wrap(bytes);
        final int magic = in.getInt();
        if (magic != MAGIC) {
            throw new FatalNativeException("Not a record batch: magic " + Integer.toHexString(magic));
        }
        final long batchId = in.getLong();
        final int shardCount = in.getInt();
        final List<Shard> shards = new ArrayList<>(shardCount);
        for (int s = 0; s < shardCount; s++) {
            final String shardId = str16(in);
            final long millisBehind = in.getLong();
            final int recordCount = in.getInt();
            final List<Record> records = new ArrayList<>(recordCount);
            for (int r = 0; r < recordCount; r++) {
                final long arrival = in.getLong();
                final long subSequence = in.getLong();
                final String sequence = str16(in);
                final String partitionKey = str16(in);
                final int length = in.getInt();
                final int offset = in.position();
                in.position(offset + length);
                records.add(new Record(arrival, subSequence, sequence, partitionKey, bytes, offset, length));
            }
            shards.add(new Shard(shardId, millisBehind, Collections.unmodifiableList(records)));
        }
        if (in.hasRemaining()) {
            throw new FatalNativeException("Record batch has " + in.remaining() + " trailing bytes");
        }
        return new RecordBatch(batchId, Collections.unmodifiableList(shards));
    }

    private static String str16(final ByteBuffer in) {
        final int length = Short.toUnsignedInt(in.getShort());
        final String value = new String(in.array(), in.position(), length, StandardCharsets.UTF_8);
        in.position(in.position() + length);
        return value;
    }
}
