package io.kinesnow.nifi.nativebridge;

import io.kinesnow.nifi.contract.Wire;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;

/**
 * Reads one batch in the layout the native library writes (see rust-core's {@code ffi/batch.rs}): the FlowFiles to
 * write, grouped by shard. Content stays in the received array; {@link FlowFileData#writeTo} copies it once. The
 * batch may fill only the start of the array (its header says how long it is), so one array can carry batch after
 * batch; a decoded batch refers to the array and must be done with before the array is used again.
 */
public final class RecordBatch {
    static final int MAGIC = Wire.BATCH_MAGIC;

    /** Magic, length and batch id: the least a batch can be before its link and shard count. */
    private static final int HEADER = 16;

    /** {@link FlowFileData#route()} values. */
    public static final int ROUTE_SUCCESS = 0;
    public static final int ROUTE_PARSE_FAILURE = 1;

    private final long batchId;
    private final String link;
    private final List<Shard> shards;

    private RecordBatch(final long batchId, final String link, final List<Shard> shards) {
        this.batchId = batchId;
        this.link = link;
        this.shards = shards;
    }

    public long batchId() {
        return batchId;
    }

    /**
     * The stream's ARN when the consumer tracks what Snowflake has (Failover Position SNOWFLAKE_COMMIT): its FlowFiles
     * then carry the attributes PutSnowflake needs for that; empty otherwise.
     */
    public String link() {
        return link;
    }

    public List<Shard> shards() {
        return shards;
    }

    public int flowFileCount() {
        return shards.stream().mapToInt(s -> s.flowFiles().size()).sum();
    }

    public long recordCount() {
        return shards.stream().flatMap(s -> s.flowFiles().stream()).mapToLong(FlowFileData::recordCount).sum();
    }

    /**
     * One FlowFile to write. Sub-sequence numbers are -1 for records that were not KPL aggregated; {@code error} is
     * empty unless the route is parse failure. {@code previousSequence} is the shard's record read just before the
     * first one by the same lease (empty when the lease read nothing before it from the shard's start).
     */
    public record FlowFileData(int route, int recordCount, String firstSequence, long firstSubSequence,
                               String lastSequence, long lastSubSequence, String previousSequence,
                               long previousSubSequence, String partitionKey,
                               long approximateArrivalMillis, String error, byte[] buffer, int offset, int length) {
        public void writeTo(final OutputStream out) throws IOException {
            out.write(buffer, offset, length);
        }

        public byte[] content() {
            final byte[] copy = new byte[length];
            System.arraycopy(buffer, offset, copy, 0, length);
            return copy;
        }

        /** This Kinesis record routed to parse failure, for {@code error}. */
        public FlowFileData failed(final String error) {
            return new FlowFileData(ROUTE_PARSE_FAILURE, recordCount, firstSequence, firstSubSequence, lastSequence,
                    lastSubSequence, previousSequence, previousSubSequence, partitionKey, approximateArrivalMillis, error,
                    buffer, offset, length);
        }

        /**
         * A FlowFile holding {@code first} to {@code last} (entries of one shard, in order) as {@code recordCount} records:
         * its positions are the first's and the last's, its previous, partition key and arrival the first's. No content.
         */
        public static FlowFileData spanning(final FlowFileData first, final FlowFileData last, final int recordCount) {
            return new FlowFileData(ROUTE_SUCCESS, recordCount, first.firstSequence, first.firstSubSequence, last.lastSequence,
                    last.lastSubSequence, first.previousSequence, first.previousSubSequence, first.partitionKey,
                    first.approximateArrivalMillis, "", new byte[0], 0, 0);
        }
    }

    /**
     * One shard's FlowFiles; {@code parentShardIds} is comma-separated, empty unless a split or merge made it;
     * {@code tenure} is the lease counter of the tenure that read them with a {@link #link()}, -1 without.
     */
    public record Shard(String shardId, String parentShardIds, long millisBehind, long tenure, List<FlowFileData> flowFiles) {
    }

    public static RecordBatch decode(final byte[] bytes) {
        try {
            return read(bytes);
        } catch (final BufferUnderflowException | IndexOutOfBoundsException | IllegalArgumentException e) {
            throw new FatalNativeException("Record batch is cut short or malformed: " + e);
        }
    }

    private static RecordBatch read(final byte[] bytes) {
        if (bytes.length < HEADER || ByteBuffer.wrap(bytes).getInt() != MAGIC) {
            throw new FatalNativeException("Not a record batch (wrong magic or too short)");
        }
        final int length = ByteBuffer.wrap(bytes).getInt(4);
        if (length < HEADER || length > bytes.length) {
            throw new FatalNativeException("Record batch is cut short or malformed: its header says " + length
                    + " bytes, the array holds " + bytes.length);
        }
        final ByteBuffer in = ByteBuffer.wrap(bytes, 0, length);
        in.position(8);
        final long batchId = in.getLong();
        final String link = str16(in);
        final int shardCount = in.getInt();
        final List<Shard> shards = new ArrayList<>(shardCount);
        for (int s = 0; s < shardCount; s++) {
            final String shardId = str16(in);
            final String parentShardIds = str16(in);
            final long millisBehind = in.getLong();
            final long tenure = in.getLong();
            final int count = in.getInt();
            final List<FlowFileData> flowFiles = new ArrayList<>(count);
            // A FlowFile of one record has the same first and last sequence, and a FlowFile's previous is the one
            // before it's last: those texts are shared, not decoded again (half the Strings of a batch).
            String before = null;
            int beforeAt = 0;
            int beforeLength = 0;
            for (int f = 0; f < count; f++) {
                final int route = in.get();
                final int recordCount = in.getInt();
                final int firstLength = skip16(in);
                final int firstAt = in.position() - firstLength;
                final String first = text(bytes, firstAt, firstLength);
                final long firstSub = in.getLong();
                final int lastLength = skip16(in);
                final int lastAt = in.position() - lastLength;
                final String last = same(bytes, firstAt, firstLength, lastAt, lastLength) ? first : text(bytes, lastAt, lastLength);
                final long lastSub = in.getLong();
                final int previousLength = skip16(in);
                final int previousAt = in.position() - previousLength;
                final String previous = before != null && same(bytes, beforeAt, beforeLength, previousAt, previousLength)
                        ? before : text(bytes, previousAt, previousLength);
                final long previousSub = in.getLong();
                final String partitionKey = str32(in);
                final long arrival = in.getLong();
                final String error = str16(in);
                final int contentLength = in.getInt();
                final int offset = in.position();
                in.position(offset + contentLength);
                flowFiles.add(new FlowFileData(route, recordCount, first, firstSub, last, lastSub,
                        previous, previousSub, partitionKey, arrival, error, bytes, offset, contentLength));
                before = last;
                beforeAt = lastAt;
                beforeLength = lastLength;
            }
            shards.add(new Shard(shardId, parentShardIds, millisBehind, tenure, Collections.unmodifiableList(flowFiles)));
        }
        if (in.hasRemaining()) {
            throw new FatalNativeException("Record batch has " + in.remaining() + " trailing bytes");
        }
        return new RecordBatch(batchId, link, Collections.unmodifiableList(shards));
    }

    /** Steps over a text with a 16-bit length; its length. */
    private static int skip16(final ByteBuffer in) {
        final int length = Short.toUnsignedInt(in.getShort());
        if (length > in.remaining()) {
            throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
        }
        in.position(in.position() + length);
        return length;
    }

    private static boolean same(final byte[] bytes, final int a, final int aLength, final int b, final int bLength) {
        return aLength == bLength && Arrays.equals(bytes, a, a + aLength, bytes, b, b + bLength);
    }

    private static String text(final byte[] bytes, final int at, final int length) {
        return length == 0 ? "" : new String(bytes, at, length, StandardCharsets.UTF_8);
    }

    /**
     * The id of the batch in {@code bytes} if they are long enough to hold one, even when the rest cannot be read:
     * a batch that fails to decode must still be settled (nacked), or its shards stay frozen.
     */
    public static OptionalLong batchIdOf(final byte[] bytes) {
        if (bytes == null || bytes.length < HEADER) {
            return OptionalLong.empty();
        }
        return OptionalLong.of(ByteBuffer.wrap(bytes).getLong(8));
    }

    private static String str16(final ByteBuffer in) {
        return text(in, Short.toUnsignedInt(in.getShort()));
    }

    /** Partition keys: a KPL aggregate's key table can hold keys far beyond 64 KiB. */
    private static String str32(final ByteBuffer in) {
        final int length = in.getInt();
        if (length < 0 || length > in.remaining()) {
            throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
        }
        return text(in, length);
    }

    private static String text(final ByteBuffer in, final int length) {
        if (length > in.remaining()) {
            throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
        }
        if (length == 0) {
            return "";
        }
        final String value = new String(in.array(), in.position(), length, StandardCharsets.UTF_8);
        in.position(in.position() + length);
        return value;
    }
}
