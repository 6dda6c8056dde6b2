package io.kinesnow.nifi.nativebridge;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Crosses the real JNI boundary: every failure kind arrives as its typed exception and the JVM survives. */
class NativeBridgeTest {

    private static final String[] VALID_CONSUMER = {
        "Stream Name", "orders", "Application Name", "orders-app", "Region", "us-east-1"
    };

    @BeforeAll
    static void load() {
        NativeLibrary.require();
    }

    @Test
    void aPanicBecomesAFatalExceptionAndTheJvmLivesOn() {
        for (int i = 0; i < 3; i++) {
            final FatalNativeException e = assertThrows(FatalNativeException.class, () -> NativeTestSupport.raiseForTest(0));
            assertTrue(e.getMessage().contains("deliberate panic for the bridge test"), e.getMessage());
            assertTrue(e.getMessage().contains("a bug"), e.getMessage());
        }
        assertFalse(NativeBridge.libraryVersion().isEmpty());
    }

    @Test
    void eachErrorClassArrivesAsItsException() {
        assertEquals("deliberate retryable error",
                assertThrows(RetryableNativeException.class, () -> NativeTestSupport.raiseForTest(1)).getMessage());
        assertEquals("deliberate configuration error",
                assertThrows(ConfigurationNativeException.class, () -> NativeTestSupport.raiseForTest(2)).getMessage());
        assertEquals("deliberate fatal error",
                assertThrows(FatalNativeException.class, () -> NativeTestSupport.raiseForTest(3)).getMessage());
        NativeTestSupport.raiseForTest(99);
    }

    @Test
    void closedAndUnknownHandlesAreExceptionsNotCrashes() {
        final int before = NativeTestSupport.openComponents();
        final long handle = NativeBridge.open(NativeBridge.CONSUME_KINESIS, VALID_CONSUMER, null);
        assertEquals(before + 1, NativeTestSupport.openComponents());
        NativeBridge.close(handle);
        assertEquals(before, NativeTestSupport.openComponents());
        final FatalNativeException twice = assertThrows(FatalNativeException.class, () -> NativeBridge.close(handle));
        assertTrue(twice.getMessage().contains("closed or unknown"), twice.getMessage());
        assertThrows(FatalNativeException.class, () -> NativeBridge.start(handle));
        assertThrows(FatalNativeException.class, () -> NativeBridge.close(0));
        assertThrows(FatalNativeException.class, () -> NativeBridge.start(-42));
    }

    @Test
    void openRefusesBadSettingsAndLeavesNothingOpen() {
        final int before = NativeTestSupport.openComponents();
        final ConfigurationNativeException e = assertThrows(ConfigurationNativeException.class,
                () -> NativeBridge.open(NativeBridge.CONSUME_KINESIS, new String[] {"Stream Name", "orders"}, null));
        assertTrue(e.getMessage().contains("Application Name: is required"), e.getMessage());
        assertEquals(before, NativeTestSupport.openComponents());
    }

    @Test
    void unknownComponentTypeAndMalformedArgumentsAreConfigurationErrors() {
        assertThrows(ConfigurationNativeException.class, () -> NativeBridge.validate("ConsumeSQS", new String[0]));
        assertThrows(ConfigurationNativeException.class,
                () -> NativeBridge.validate(NativeBridge.CONSUME_KINESIS, new String[] {"Stream Name"}));
        assertThrows(ConfigurationNativeException.class, () -> NativeBridge.validate(null, new String[0]));
        assertThrows(ConfigurationNativeException.class, () -> NativeBridge.validate(NativeBridge.CONSUME_KINESIS, null));
    }

    @Test
    void validateReturnsPropertyAndExplanationPairs() {
        final String[] problems = NativeBridge.validate(NativeBridge.CONSUME_KINESIS,
                new String[] {"Stream Name", "orders", "Application Name", "orders-app", "Region", "Mars"});
        assertArrayEquals(new String[] {"Region", "'Mars' is not an AWS region code such as us-east-1"}, problems);
        assertEquals(0, NativeBridge.validate(NativeBridge.CONSUME_KINESIS, VALID_CONSUMER).length);
    }

    /** A batch of megabytes arrives whole in a new direct buffer, read through the 64 KiB chunks of writeTo. */
    @Test
    void aBatchOfMegabytesArrivesWholeInADirectBuffer() throws Exception {
        final ByteBuffer small = NativeTestSupport.syntheticBatchDirect(1, 1, 8, null);
        final ByteBuffer big = NativeTestSupport.syntheticBatchDirect(2, 300, 4096, small);
        assertNotSame(small, big);
        assertTrue(big.isDirect());
        assertEquals(0, big.capacity() % (1024 * 1024), "beyond 1 MiB, allocated in 1 MiB steps");
        final RecordBatch batch = RecordBatch.decode(big);
        assertEquals(600, batch.flowFileCount());
        final RecordBatch.FlowFileData f = batch.shards().get(1).flowFiles().get(299);
        final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        f.writeTo(out);
        final byte[] data = out.toByteArray();
        assertEquals(4096, data.length);
        for (int i = 0; i < data.length; i++) {
            assertEquals((byte) ((299 + i) % 251), data[i], "byte " + i);
        }
        // Done with that batch: its buffer carries the next one, a FlowFile longer than writeTo's chunk.
        final RecordBatch.FlowFileData whole = RecordBatch.decode(NativeTestSupport.syntheticBatchDirect(1, 1, 200_000, big))
                .shards().get(0).flowFiles().get(0);
        final java.io.ByteArrayOutputStream chunked = new java.io.ByteArrayOutputStream();
        whole.writeTo(chunked);
        assertEquals(200_000, chunked.size());
        assertArrayEquals(whole.content(), chunked.toByteArray(), "more than one chunk");
        assertArrayEquals(whole.content(), whole.open().readAllBytes());
        assertEquals((byte) (199_999 % 251), whole.content()[199_999]);
    }

    @Test
    void aBatchMadeInRustDecodesInJava() throws Exception {
        final RecordBatch batch = RecordBatch.decode(NativeTestSupport.syntheticBatch(3, 50, 64));
        assertEquals(3, batch.shards().size());
        assertEquals(150, batch.flowFileCount());
        assertEquals(150, batch.recordCount());
        final RecordBatch.Shard shard = batch.shards().get(2);
        assertEquals("shardId-000000000002", shard.shardId());
        assertEquals(20, shard.millisBehind());
        assertEquals("", shard.parentShardIds());
        assertEquals("shardId-000000000101", batch.shards().get(1).parentShardIds());
        final RecordBatch.FlowFileData f = shard.flowFiles().get(7);
        assertEquals(RecordBatch.ROUTE_SUCCESS, f.route());
        assertEquals("key-7", f.partitionKey());
        assertEquals(7, f.firstSubSequence());
        assertEquals(7, f.lastSubSequence());
        assertEquals(-1, shard.flowFiles().get(6).firstSubSequence());
        assertEquals(shard.flowFiles().get(6).lastSequence(), f.previousSequence(), "the record read before it");
        assertEquals(-1, f.previousSubSequence());
        assertEquals("", shard.flowFiles().get(0).previousSequence(), "nothing read before the first");
        assertEquals(1_764_000_000_007L, f.approximateArrivalMillis());
        assertEquals("", f.error());
        final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        f.writeTo(out);
        final byte[] data = out.toByteArray();
        assertArrayEquals(data, f.content());
        assertEquals(64, data.length);
        for (int i = 0; i < data.length; i++) {
            assertEquals((byte) ((7 + i) % 251), data[i]);
        }
        assertTrue(f.firstSequence().startsWith("4963"), f.firstSequence());
    }

    @Test
    void skippedRecordsReachTheCoreAsJavaWroteThemWithOrWithoutATrackingLease() {
        final SkippedRecords skipped = new SkippedRecords();
        final RecordBatch.Shard tracked = new RecordBatch.Shard("shardId-000000000001", "", 0, 7, List.of());
        final RecordBatch.Shard untracked = new RecordBatch.Shard("shardId-000000000002", "", 0, -1, List.of());
        skipped.add(tracked, kinesisRecord("", -1, "49630000000000000000000000000000000000000000000000000011", -1));
        skipped.add(tracked, kinesisRecord("12", 1, "12", 2));
        skipped.add(untracked, kinesisRecord("12", -1, "13", -1));
        assertEquals(3, skipped.count());
        assertArrayEquals(new String[] {
            "shardId-000000000001 7 - 49630000000000000000000000000000000000000000000000000011/-",
            "shardId-000000000001 7 12/1 12/2",
            "shardId-000000000002 -1 12/- 13/-"
        }, NativeTestSupport.describeSkippedForTest(skipped.encode()));
        final byte[] cut = java.util.Arrays.copyOf(skipped.encode(), 20);
        assertThrows(FatalNativeException.class, () -> NativeTestSupport.describeSkippedForTest(cut));
        assertThrows(FatalNativeException.class, () -> NativeBridge.noteSkipped(Long.MAX_VALUE, skipped.encode()),
                "an unknown handle is an exception, never a crash");
    }

    private static RecordBatch.FlowFileData kinesisRecord(final String previous, final long previousSub, final String last,
                                                          final long lastSub) {
        return new RecordBatch.FlowFileData(RecordBatch.ROUTE_SUCCESS, 1, last, lastSub, last, lastSub, previous, previousSub,
                "key", 0, "", ByteBuffer.allocate(0), 0, 0);
    }

    @Test
    void aPartitionKeyBeyond64KiBReachesJavaIntact() throws Exception {
        final RecordBatch batch = RecordBatch.decode(NativeTestSupport.partitionKeyBatch(70_000));
        final List<RecordBatch.FlowFileData> flowFiles = batch.shards().get(0).flowFiles();
        final String key = flowFiles.get(0).partitionKey();
        assertEquals(70_000, key.getBytes(StandardCharsets.UTF_8).length);
        assertEquals(longPartitionKey(70_000), key);
        assertEquals("key-1", flowFiles.get(1).partitionKey(), "the FlowFile after it is intact");
        for (int i = 0; i < 8; i++) {
            assertEquals((byte) ((1 + i) % 251), flowFiles.get(1).content()[i]);
        }
        assertEquals(70_000, RecordBatch.decode(NativeTestSupport.partitionKeyBatch(70_000)).shards().get(0).flowFiles().get(0)
                .partitionKey().getBytes(StandardCharsets.UTF_8).length);
    }

    /** The pattern of rust-core's {@code batch::long_partition_key}: letters, with an 'é' every seventh character. */
    private static String longPartitionKey(final int bytes) {
        final StringBuilder key = new StringBuilder();
        int length = 0;
        for (int n = 0; length < bytes; n++) {
            if (bytes - length >= 2 && n % 7 == 0) {
                key.append('é');
                length += 2;
            } else {
                key.append((char) ('a' + n % 26));
                length += 1;
            }
        }
        return key.toString();
    }

    @Test
    void aMillionNativeLogLinesLeaveTheHeapFlat() {
        final AtomicLong lines = new AtomicLong();
        final NativeLogSink counting = (level, message) -> {
            if (message.startsWith("log bridge test line")) {
                lines.incrementAndGet();
            }
        };
        final long handle = NativeBridge.open(NativeBridge.CONSUME_KINESIS, VALID_CONSUMER, counting);
        try {
            NativeTestSupport.logForTest(handle, 20_000); // warm-up: classes loaded, queues and buffers at size
            final long before = usedHeapAfterGc();
            NativeTestSupport.logForTest(handle, 1_000_000);
            final long after = usedHeapAfterGc();
            assertEquals(1_020_000, lines.get(), "every line delivered");
            final long grownMiB = (after - before) >> 20;
            System.out.println("log bridge: used heap after GC " + (before >> 20) + " MiB before and " + (after >> 20)
                    + " MiB after 10^6 native log lines");
            // Each line's Java string is about 250 bytes: a leaked local reference per line keeps ~240 MiB alive.
            assertTrue(grownMiB < 24, "the heap grew by " + grownMiB + " MiB over 10^6 log lines");
        } finally {
            NativeBridge.close(handle);
        }
    }

    private static long usedHeapAfterGc() {
        final MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 5; i++) { // until a collection frees nothing more
            System.gc();
            final long now = memory.getHeapMemoryUsage().getUsed();
            if (now >= used - (1 << 20)) {
                return Math.min(now, used);
            }
            used = now;
        }
        return used;
    }

    @Test
    void aBatchIsWrittenIntoALentDirectBufferThatFitsItAndReadsAsTheSameBatch() {
        final byte[] fresh = NativeTestSupport.syntheticBatch(3, 50, 64);
        final byte[] garbage = new byte[fresh.length + 100_000];
        Arrays.fill(garbage, (byte) 0x55);
        final ByteBuffer lent = ByteBuffer.allocateDirect(garbage.length).put(0, garbage).position(7).limit(9);
        final ByteBuffer got = NativeTestSupport.syntheticBatchDirect(3, 50, 64, lent);
        assertSame(lent, got, "the lent buffer is used");
        assertEquals(7, got.position(), "its position is left alone");
        assertEquals(9, got.limit(), "and its limit");
        assertArrayEquals(fresh, bytes(got, fresh.length));
        assertEquals((byte) 0x55, got.duplicate().clear().get(fresh.length), "the rest of the buffer is left alone");
        assertEquals(describe(RecordBatch.decode(fresh)), describe(RecordBatch.decode(got)));
        assertEquals(7, got.position(), "decoding leaves the position alone");
        assertEquals(RecordBatch.batchIdOf(fresh), RecordBatch.batchIdOf(got));
    }

    @Test
    void aLentBufferTooShortNotDirectOrNoneGetsANewDirectBufferInSteps() {
        final byte[] fresh = NativeTestSupport.syntheticBatch(2, 10, 100);
        for (final ByteBuffer lent : new ByteBuffer[] {null, ByteBuffer.allocateDirect(fresh.length - 1),
                ByteBuffer.allocateDirect(0), ByteBuffer.allocate(fresh.length + 10)}) {
            final ByteBuffer got = NativeTestSupport.syntheticBatchDirect(2, 10, 100, lent);
            assertNotSame(lent, got);
            assertTrue(got.isDirect());
            assertEquals(0, got.capacity() % (64 * 1024), "allocated in 64 KiB steps, so it fits the next batches too");
            assertArrayEquals(fresh, bytes(got, fresh.length));
            assertEquals(describe(RecordBatch.decode(fresh)), describe(RecordBatch.decode(got)));
        }
    }

    private static byte[] bytes(final ByteBuffer buffer, final int length) {
        final byte[] out = new byte[length];
        buffer.duplicate().clear().get(out);
        return out;
    }

    @Test
    void aBatchLongerThanItsArrayIsRefused() {
        final byte[] fresh = NativeTestSupport.syntheticBatch(1, 2, 8);
        final byte[] lying = fresh.clone();
        java.nio.ByteBuffer.wrap(lying).putInt(4, fresh.length + 1);
        final FatalNativeException e = assertThrows(FatalNativeException.class, () -> RecordBatch.decode(lying));
        assertTrue(e.getMessage().contains("cut short"), e.getMessage());
        java.nio.ByteBuffer.wrap(lying).putInt(4, fresh.length - 1);
        assertThrows(FatalNativeException.class, () -> RecordBatch.decode(lying), "a batch shorter than its content");
    }

    @Test
    void sequenceTextsThatRepeatAreDecodedOnce() {
        final RecordBatch batch = RecordBatch.decode(NativeTestSupport.syntheticBatch(1, 20, 8));
        final List<RecordBatch.FlowFileData> flowFiles = batch.shards().get(0).flowFiles();
        for (int i = 1; i < flowFiles.size(); i++) {
            final RecordBatch.FlowFileData f = flowFiles.get(i);
            assertSame(f.firstSequence(), f.lastSequence(), "one record: first and last are one String");
            assertSame(flowFiles.get(i - 1).lastSequence(), f.previousSequence(), "previous is the last before");
        }
    }

    /** Every field of every FlowFile of a batch, content included, as text. */
    private static String describe(final RecordBatch batch) {
        final StringBuilder out = new StringBuilder(batch.batchId() + " " + batch.link() + "\n");
        for (final RecordBatch.Shard s : batch.shards()) {
            out.append(s.shardId()).append(' ').append(s.parentShardIds()).append(' ').append(s.millisBehind())
                    .append(' ').append(s.tenure()).append('\n');
            for (final RecordBatch.FlowFileData f : s.flowFiles()) {
                out.append(f.route()).append(' ').append(f.recordCount()).append(' ').append(f.firstSequence())
                        .append('/').append(f.firstSubSequence()).append(' ').append(f.lastSequence()).append('/')
                        .append(f.lastSubSequence()).append(' ').append(f.previousSequence()).append('/')
                        .append(f.previousSubSequence()).append(' ').append(f.partitionKey()).append(' ')
                        .append(f.approximateArrivalMillis()).append(' ').append(f.error()).append(' ')
                        .append(java.util.HexFormat.of().formatHex(f.content())).append('\n');
            }
        }
        return out.toString();
    }

    @Test
    void aCorruptBatchIsRejected() {
        final byte[] junk = "not a batch at all".getBytes(StandardCharsets.UTF_8);
        assertThrows(FatalNativeException.class, () -> RecordBatch.decode(junk));
        final byte[] good = NativeTestSupport.syntheticBatch(1, 2, 8);
        for (int cut = 16; cut < good.length; cut += 7) {
            final byte[] shorter = java.util.Arrays.copyOf(good, cut);
            assertThrows(FatalNativeException.class, () -> RecordBatch.decode(shorter), "cut at " + cut);
        }
        assertEquals(RecordBatch.batchIdOf(good).getAsLong(), 1L, "the id of a batch is found even when it is cut");
    }
}
