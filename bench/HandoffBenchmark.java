import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import io.kinesnow.nifi.nativebridge.RecordBatch;

import java.io.OutputStream;
import java.util.Arrays;

/**
 * The JNI batch hand-off on one thread: Rust builds and encodes a batch of 1 KiB records, the bytes cross JNI in
 * one call, Java decodes the batch and copies every record's content to an output stream (as onTrigger does into
 * FlowFiles). The Rust side includes generating the synthetic records, so the figure is a lower bound.
 */
public final class HandoffBenchmark {
    public static void main(final String[] args) {
        NativeLibrary.require();
        final int shards = 4;
        final int recordsPerShard = Integer.parseInt(args.length > 0 ? args[0] : "2500");
        final int payload = Integer.parseInt(args.length > 1 ? args[1] : "1024");
        final OutputStream sink = OutputStream.nullOutputStream();
        for (int i = 0; i < 20; i++) {
            run(shards, recordsPerShard, payload, sink); // warm-up
        }
        final int runs = 15;
        final double[] seconds = new double[runs];
        long bytes = 0;
        for (int i = 0; i < runs; i++) {
            final long t0 = System.nanoTime();
            bytes = run(shards, recordsPerShard, payload, sink);
            seconds[i] = (System.nanoTime() - t0) / 1e9;
        }
        Arrays.sort(seconds);
        final double median = seconds[runs / 2];
        final long records = (long) shards * recordsPerShard;
        System.out.printf("records/batch=%d payload=%dB batch=%.1f MiB median=%.2f ms -> %.0f records/s, %.0f MB/s%n",
                records, payload, bytes / 1048576.0, median * 1000, records / median, bytes / median / 1e6);
    }

    private static long run(final int shards, final int recordsPerShard, final int payload, final OutputStream sink) {
        final byte[] bytes = NativeBridge.syntheticBatch(shards, recordsPerShard, payload);
        final RecordBatch batch = RecordBatch.decode(bytes);
        try {
            for (final RecordBatch.Shard shard : batch.shards()) {
                for (final RecordBatch.FlowFileData f : shard.flowFiles()) {
                    f.writeTo(sink);
                }
            }
        } catch (final java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        return bytes.length;
    }
}
