package io.kinesnow.nifi.nativebridge;

import io.kinesnow.nifi.contract.Wire;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;

/**
 * Reads one batch in the layout the native library writes (see rust-core's {@code ffi/batch.rs}): the FlowFiles to
 * write, grouped by shard. Content stays in the received buffer (a direct buffer from {@link NativeBridge#pollDirect},
 * outside the Java heap; or a wrapped array in tests); {@link FlowFileData#writeTo} copies it once into the FlowFile.
 * The batch may fill only the start of the buffer (its header says how long it is), so one buffer can carry batch
 * after batch; a decoded batch refers to the buffer and must be done with before the buffer is used again. The
 * buffer is read with absolute gets only: its position and limit are never changed.
 */
public final class RecordBatch {
    static final int MAGIC = Wire.BATCH_MAGIC;

    /** Magic, length and batch id: the least a batch can be before its link and shard count. */
    private static final int HEADER = 16;

    /** {@link FlowFileData#route()} values. */
    public static final int ROUTE_SUCCESS = Wire.BATCH_ROUTE_SUCCESS;
    public static final int ROUTE_PARSE_FAILURE = Wire.BATCH_ROUTE_PARSE_FAILURE;

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
                               long approximateArrivalMillis, String error, ByteBuffer buffer, int offset, int length) {
        /** Bytes copied at a time from a direct buffer into a stream. */
        private static final int CHUNK = 64 * 1024;
        /** Each thread's chunk, so writing a FlowFile's content allocates nothing. */
        private static final ThreadLocal<byte[]> CHUNKS = ThreadLocal.withInitial(() -> new byte[CHUNK]);
        private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);

        /** Writes the content to {@code out}: from an array as it is, from a direct buffer through a per-thread chunk. */
        public void writeTo(final OutputStream out) throws IOException {
            if (buffer.hasArray()) {
                out.write(buffer.array(), buffer.arrayOffset() + offset, length);
                return;
            }
            final byte[] chunk = CHUNKS.get();
            for (int done = 0; done < length; ) {
                final int n = Math.min(chunk.length, length - done);
                buffer.get(offset + done, chunk, 0, n);
                out.write(chunk, 0, n);
                done += n;
            }
        }

        /** The content as a stream over the buffer, no copy. */
        public InputStream open() {
            return new ByteBufferInputStream(buffer.slice(offset, length));
        }

        public byte[] content() {
            final byte[] copy = new byte[length];
            buffer.get(offset, copy, 0, length);
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
                    first.approximateArrivalMillis, "", EMPTY, 0, 0);
        }
    }

    /**
     * One shard's FlowFiles; {@code parentShardIds} is comma-separated, empty unless a split or merge made it;
     * {@code tenure} is the lease counter of the tenure that read them with a {@link #link()}, -1 without.
     */
    public record Shard(String shardId, String parentShardIds, long millisBehind, long tenure, List<FlowFileData> flowFiles) {
    }

    /** A batch in an array (tests, and batches built in Java). */
    public static RecordBatch decode(final byte[] bytes) {
        return decode(ByteBuffer.wrap(bytes));
    }

    /** The batch at the start of {@code buffer} (from its index 0, whatever its position). */
    public static RecordBatch decode(final ByteBuffer buffer) {
        try {
            return new Reader(buffer).read();
        } catch (final BufferUnderflowException | IndexOutOfBoundsException | IllegalArgumentException e) {
            throw new FatalNativeException("Record batch is cut short or malformed: " + e);
        }
    }

    /**
     * The id of the batch in {@code bytes} if they are long enough to hold one, even when the rest cannot be read:
     * a batch that fails to decode must still be settled (nacked), or its shards stay frozen.
     */
    public static OptionalLong batchIdOf(final byte[] bytes) {
        return bytes == null ? OptionalLong.empty() : batchIdOf(ByteBuffer.wrap(bytes));
    }

    /** {@link #batchIdOf(byte[])} of the batch at the start of {@code buffer}. */
    public static OptionalLong batchIdOf(final ByteBuffer buffer) {
        if (buffer == null || buffer.capacity() < HEADER) {
            return OptionalLong.empty();
        }
        return OptionalLong.of(buffer.duplicate().clear().order(ByteOrder.BIG_ENDIAN).getLong(8));
    }

    /** One decoding pass: a cursor over a view of the buffer, and a scratch array for texts of a direct buffer. */
    private static final class Reader {
        private final ByteBuffer in;
        private byte[] scratch = new byte[128];

        Reader(final ByteBuffer buffer) {
            // A view: the caller's buffer keeps its position and limit.
            this.in = buffer.duplicate().order(ByteOrder.BIG_ENDIAN).clear();
        }

        RecordBatch read() {
            if (in.capacity() < HEADER || in.getInt(0) != MAGIC) {
                throw new FatalNativeException("Not a record batch (wrong magic or too short)");
            }
            final int length = in.getInt(4);
            if (length < HEADER || length > in.capacity()) {
                throw new FatalNativeException("Record batch is cut short or malformed: its header says " + length
                        + " bytes, the buffer holds " + in.capacity());
            }
            in.limit(length);
            in.position(8);
            final long batchId = in.getLong();
            final String link = str16();
            final int shardCount = in.getInt();
            final List<Shard> shards = new ArrayList<>(shardCount);
            for (int s = 0; s < shardCount; s++) {
                final String shardId = str16();
                final String parentShardIds = str16();
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
                    final int firstLength = skip16();
                    final int firstAt = in.position() - firstLength;
                    final String first = text(firstAt, firstLength);
                    final long firstSub = in.getLong();
                    final int lastLength = skip16();
                    final int lastAt = in.position() - lastLength;
                    final String last = same(firstAt, firstLength, lastAt, lastLength) ? first : text(lastAt, lastLength);
                    final long lastSub = in.getLong();
                    final int previousLength = skip16();
                    final int previousAt = in.position() - previousLength;
                    final String previous = before != null && same(beforeAt, beforeLength, previousAt, previousLength)
                            ? before : text(previousAt, previousLength);
                    final long previousSub = in.getLong();
                    final String partitionKey = str32();
                    final long arrival = in.getLong();
                    final String error = str16();
                    final int contentLength = in.getInt();
                    final int offset = in.position();
                    if (contentLength < 0) {
                        throw new FatalNativeException("Record batch has a content of " + contentLength + " bytes");
                    }
                    in.position(offset + contentLength);
                    flowFiles.add(new FlowFileData(route, recordCount, first, firstSub, last, lastSub,
                            previous, previousSub, partitionKey, arrival, error, in, offset, contentLength));
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
        private int skip16() {
            final int length = Short.toUnsignedInt(in.getShort());
            if (length > in.remaining()) {
                throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
            }
            in.position(in.position() + length);
            return length;
        }

        private boolean same(final int a, final int aLength, final int b, final int bLength) {
            if (aLength != bLength) {
                return false;
            }
            for (int i = 0; i < aLength; i++) {
                if (in.get(a + i) != in.get(b + i)) {
                    return false;
                }
            }
            return true;
        }

        /** The UTF-8 text of {@code length} bytes at {@code at}. */
        private String text(final int at, final int length) {
            if (length == 0) {
                return "";
            }
            if (in.hasArray()) {
                return new String(in.array(), in.arrayOffset() + at, length, StandardCharsets.UTF_8);
            }
            if (scratch.length < length) {
                scratch = new byte[Math.max(length, scratch.length * 2)];
            }
            in.get(at, scratch, 0, length);
            return new String(scratch, 0, length, StandardCharsets.UTF_8);
        }

        private String str16() {
            return text(Short.toUnsignedInt(in.getShort()));
        }

        /** Partition keys: a KPL aggregate's key table can hold keys far beyond 64 KiB. */
        private String str32() {
            final int length = in.getInt();
            if (length < 0 || length > in.remaining()) {
                throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
            }
            return text(length);
        }

        private String text(final int length) {
            if (length > in.remaining()) {
                throw new FatalNativeException("Record batch has a text of " + length + " bytes where " + in.remaining() + " remain");
            }
            final String value = text(in.position(), length);
            in.position(in.position() + length);
            return value;
        }
    }
}
