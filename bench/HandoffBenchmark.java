import io.kinesnow.nifi.nativebridge.NativeTestSupport;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import io.kinesnow.nifi.nativebridge.RecordBatch;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The JNI batch hand-off on one thread, its ways side by side in one run (rounds interleaved, so the machine's noise
 * falls on all of them alike), against System.arraycopy of the same number of bytes:
 * <ul>
 * <li>{@code fresh}: how it was: Rust encodes into its own buffer, JNI copies that into a new Java array, Java decodes
 * the batch and writes every FlowFile's content to an output stream (as onTrigger does into FlowFiles);</li>
 * <li>{@code lent}: how ConsumeKinesis does it now: Rust encodes straight into a direct buffer Java lends it (outside
 * the heap), then the same decode and write (through a per-thread 64 KiB chunk);</li>
 * <li>{@code cross}: the crossing alone (encode into the lent buffer), no decode;</li>
 * <li>{@code decode}: Java's decode and write alone, of a batch already in an array;</li>
 * <li>{@code memcpy}: System.arraycopy of a batch-sized array, the ceiling for anything that moves the bytes once.</li>
 * </ul>
 * The records are generated once per shape and kept in Rust, so the figures are the hand-off's, not the generator's.
 * Arguments: shards, FlowFiles per shard, bytes per FlowFile (4 2500 1024: FLOW_FILE with 1 KiB records; 4 1 3200000:
 * LINE_DELIMITED, one large FlowFile per shard).
 */
public final class HandoffBenchmark {
    private static final int WARM_UP = 20;
    private static final int RUNS = 15;

    public static void main(final String[] args) throws IOException {
        NativeLibrary.require();
        final int shards = Integer.parseInt(args.length > 0 ? args[0] : "4");
        final int perShard = Integer.parseInt(args.length > 1 ? args[1] : "2500");
        final int payload = Integer.parseInt(args.length > 2 ? args[2] : "1024");
        final Shape shape = new Shape(shards, perShard, payload);
        final Map<String, double[]> seconds = new LinkedHashMap<>();
        for (final String mode : new String[] {"fresh", "lent", "cross", "decode", "memcpy"}) {
            seconds.put(mode, new double[RUNS]);
        }
        for (int round = -WARM_UP; round < RUNS; round++) {
            for (final Map.Entry<String, double[]> mode : seconds.entrySet()) {
                final double s = shape.time(mode.getKey());
                if (round >= 0) {
                    mode.getValue()[round] = s;
                }
            }
        }
        final double memcpy = median(seconds.get("memcpy"));
        System.out.printf("shards=%d flowfiles/shard=%d bytes/flowfile=%d batch=%.1f MiB, median of %d interleaved rounds%n",
                shards, perShard, payload, shape.length / 1048576.0, RUNS);
        for (final Map.Entry<String, double[]> mode : seconds.entrySet()) {
            final double median = median(mode.getValue());
            System.out.printf("%-7s %7.3f ms  %6.2f GB/s  %5.2f M FlowFiles/s  %4.2fx memcpy's rate%n", mode.getKey(),
                    median * 1000, shape.length / median / 1e9, (double) shards * perShard / median / 1e6, memcpy / median);
        }
    }

    private static double median(final double[] values) {
        final double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    private static final class Shape {
        final int shards;
        final int perShard;
        final int payload;
        final int length;
        final OutputStream sink = OutputStream.nullOutputStream();
        ByteBuffer lent;
        final byte[] decoded;
        final byte[] copy;

        Shape(final int shards, final int perShard, final int payload) {
            this.shards = shards;
            this.perShard = perShard;
            this.payload = payload;
            this.decoded = NativeTestSupport.syntheticBatch(shards, perShard, payload);
            this.length = decoded.length;
            this.lent = NativeTestSupport.syntheticBatchDirect(shards, perShard, payload, null);
            this.copy = new byte[lent.capacity()];
        }

        double time(final String mode) throws IOException {
            final long t0 = System.nanoTime();
            switch (mode) {
                case "fresh" -> write(RecordBatch.decode(NativeTestSupport.syntheticBatch(shards, perShard, payload)));
                case "lent" -> write(RecordBatch.decode(lend()));
                case "cross" -> lend();
                case "decode" -> write(RecordBatch.decode(decoded));
                case "memcpy" -> System.arraycopy(decoded, 0, copy, 0, length);
                default -> throw new IllegalArgumentException(mode);
            }
            return (System.nanoTime() - t0) / 1e9;
        }

        private ByteBuffer lend() {
            lent = NativeTestSupport.syntheticBatchDirect(shards, perShard, payload, lent);
            return lent;
        }

        private void write(final RecordBatch batch) throws IOException {
            for (final RecordBatch.Shard shard : batch.shards()) {
                for (final RecordBatch.FlowFileData f : shard.flowFiles()) {
                    f.writeTo(sink);
                }
            }
        }
    }
}
