package io.kinesnow.tests.kcl;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Proxy;
import java.net.ProxySelector;
import java.net.SocketAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClient;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.common.InitialPositionInStream;
import software.amazon.kinesis.common.InitialPositionInStreamExtended;
import software.amazon.kinesis.common.LeaseCleanupConfig;
import software.amazon.kinesis.common.StreamIdentifier;
import software.amazon.kinesis.coordinator.FastStartScheduler;
import software.amazon.kinesis.coordinator.Scheduler;
import software.amazon.kinesis.exceptions.ShutdownException;
import software.amazon.kinesis.exceptions.ThrottlingException;
import software.amazon.kinesis.exceptions.KinesisClientLibDependencyException;
import software.amazon.kinesis.lifecycle.events.InitializationInput;
import software.amazon.kinesis.lifecycle.events.LeaseLostInput;
import software.amazon.kinesis.lifecycle.events.ProcessRecordsInput;
import software.amazon.kinesis.lifecycle.events.ShardEndedInput;
import software.amazon.kinesis.lifecycle.events.ShutdownRequestedInput;
import software.amazon.kinesis.metrics.MetricsLevel;
import software.amazon.kinesis.metrics.NullMetricsFactory;
import software.amazon.kinesis.processor.RecordProcessorCheckpointer;
import software.amazon.kinesis.processor.ShardRecordProcessor;
import software.amazon.kinesis.processor.SingleStreamTracker;
import software.amazon.kinesis.retrieval.KinesisClientRecord;
import software.amazon.kinesis.retrieval.RetrievalSpecificConfig;
import software.amazon.kinesis.retrieval.fanout.FanOutConfig;
import software.amazon.kinesis.retrieval.polling.PollingConfig;

/**
 * A real KCL (Amazon Kinesis Client Library) consumer for tests: reads a stream with KCL's polling retrieval,
 * prints one JSON line per user record to stdout and checkpoints after every record (record level, so an
 * aggregate's subsequence number is stored), so the lease table it leaves behind is exactly what KCL writes for
 * exactly the printed records. Logs go to stderr.
 *
 * <pre>
 * --stream NAME --application NAME [--kinesis-endpoint URL] [--dynamodb-endpoint URL]
 * [--initial-position TRIM_HORIZON|LATEST] [--max-records N (0 = no limit)] [--exit halt|graceful]
 * [--idle-exit-seconds S] [--failover-millis MS] [--lease-cleanup-millis MS] [--worker-id ID]
 * [--retrieval polling|fanout] [--throughput true (no output per record, one checkpoint per batch: the benchmark peer)]
 * </pre>
 *
 * --retrieval fanout: enhanced fan-out (KCL's FanOutConfig: a stream consumer named after the application,
 * SubscribeToShard over HTTP/2) instead of polling GetRecords; the Kinesis client then speaks HTTP/2 (h2c with
 * prior knowledge on an http:// endpoint).
 *
 * --idle-exit-seconds: ends the run (as --exit says) once S seconds passed without progress (a record, a shard
 * end, a shard consumer starting), counted from the first shard consumer's start.
 * --lease-cleanup-millis: KCL's lease cleanup intervals (default: 1 min / completed leases 5 min / garbage 30 min).
 * --billing-mode PAY_PER_REQUEST (default) | PROVISIONED: of the lease table (and KCL 3.x's other tables).
 *
 * stdout lines: {"shard","seq","sub","pk","data"} per record; {"shardEnd": id} when KCL reports a shard's end;
 * {"exit": reason, "records": n} last, unless the process halts (the halt after --max-records prints nothing
 * more, like a crash).
 */
public final class LegacyConsumer {
    private static final Logger log = LoggerFactory.getLogger(LegacyConsumer.class);

    private static final Object LOCK = new Object();
    private static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);

    private static long maxRecords;
    private static boolean halt;
    private static long processed;                 // guarded by LOCK
    private static long dataBytes;                 // guarded by LOCK; --throughput only
    private static boolean throughput;
    private static volatile boolean limitReached;
    private static final AtomicLong lastActivity = new AtomicLong(System.nanoTime());
    private static volatile boolean started;      // a shard consumer has been initialized: the idle clock runs
    private static final AtomicBoolean exiting = new AtomicBoolean();
    private static volatile Scheduler scheduler;

    private LegacyConsumer() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = parse(args);
        // Java SDK v2 sends Kinesis calls as CBOR unless this is off; kinesis-local answers CBOR with Data as base64 text.
        if (System.getProperty("aws.cborEnabled") == null) {
            System.setProperty("aws.cborEnabled", "false");
        }
        System.setProperty("aws.disableEc2Metadata", "true");
        onlyLoopback();

        String stream = require(a, "stream");
        String application = require(a, "application");
        URI kinesisEndpoint = URI.create(a.getOrDefault("kinesis-endpoint", "http://127.0.0.1:4568"));
        URI dynamoEndpoint = URI.create(a.getOrDefault("dynamodb-endpoint", "http://127.0.0.1:4571"));
        InitialPositionInStream position = InitialPositionInStream.valueOf(a.getOrDefault("initial-position", "TRIM_HORIZON"));
        maxRecords = Long.parseLong(a.getOrDefault("max-records", "0"));
        String exit = a.getOrDefault("exit", "halt");
        if (!exit.equals("halt") && !exit.equals("graceful")) {
            throw new IllegalArgumentException("--exit must be halt or graceful");
        }
        halt = exit.equals("halt");
        throughput = Boolean.parseBoolean(a.getOrDefault("throughput", "false"));
        long idleExitSeconds = Long.parseLong(a.getOrDefault("idle-exit-seconds", "0"));
        long failoverMillis = Long.parseLong(a.getOrDefault("failover-millis", "2000"));
        String retrieval = a.getOrDefault("retrieval", "polling");
        if (!retrieval.equals("polling") && !retrieval.equals("fanout")) {
            throw new IllegalArgumentException("--retrieval must be polling or fanout");
        }
        boolean fanOut = retrieval.equals("fanout");
        String workerId = a.getOrDefault("worker-id", "kcl-legacy-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID().toString().substring(0, 8));

        StaticCredentialsProvider credentials = StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test"));
        KinesisAsyncClient kinesis = KinesisAsyncClient.builder()
                .endpointOverride(kinesisEndpoint).region(Region.US_EAST_1).credentialsProvider(credentials)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(fanOut ? Protocol.HTTP2 : Protocol.HTTP1_1).maxConcurrency(50)
                        .connectionAcquisitionTimeout(java.time.Duration.ofSeconds(30)))
                .build();
        DynamoDbAsyncClient dynamo = DynamoDbAsyncClient.builder()
                .endpointOverride(dynamoEndpoint).region(Region.US_EAST_1).credentialsProvider(credentials)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(Protocol.HTTP1_1).maxConcurrency(50)
                        .connectionAcquisitionTimeout(java.time.Duration.ofSeconds(30)))
                .build();
        // Never called with metrics off; pointed at a closed local port all the same.
        CloudWatchAsyncClient cloudWatch = CloudWatchAsyncClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:9")).region(Region.US_EAST_1).credentialsProvider(credentials)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(Protocol.HTTP1_1))
                .build();

        ConfigsBuilder configs = new ConfigsBuilder(
                new SingleStreamTracker(StreamIdentifier.singleStreamInstance(stream),
                        InitialPositionInStreamExtended.newInitialPosition(position)),
                application, kinesis, dynamo, cloudWatch, workerId, Processor::new);

        RetrievalSpecificConfig retrievalConfig;
        if (fanOut) {
            retrievalConfig = new FanOutConfig(kinesis).streamName(stream).applicationName(application);
        } else {
            PollingConfig polling = new PollingConfig(stream, kinesis);
            polling.idleTimeBetweenReadsInMillis(250);
            retrievalConfig = polling;
        }

        var leaseConfig = configs.leaseManagementConfig()
                .failoverTimeMillis(failoverMillis)
                .shardSyncIntervalMillis(500); // also the idle time after each shard sync (the first one too)
        if (a.containsKey("lease-cleanup-millis")) {
            long ms = Long.parseLong(a.get("lease-cleanup-millis"));
            // a final field without a setter (default: every 1 min, completed leases after 5 min, garbage 30 min)
            java.lang.reflect.Field f = leaseConfig.getClass().getDeclaredField("leaseCleanupConfig");
            f.setAccessible(true);
            f.set(leaseConfig, LeaseCleanupConfig.builder()
                    .leaseCleanupIntervalMillis(ms).completedLeaseCleanupIntervalMillis(ms)
                    .garbageLeaseCleanupIntervalMillis(ms).build());
        }

        var coordinatorConfig = configs.coordinatorConfig();
        // PAY_PER_REQUEST (KCL's default) or PROVISIONED: KCL 3.x adds a GSI to the lease table by UpdateTable
        // without ProvisionedThroughput, which dynalite rejects for any table; see README.md.
        String billing = a.getOrDefault("billing-mode", "PAY_PER_REQUEST");
        if (billing.equals("PROVISIONED")) {
            leaseConfig.billingMode(BillingMode.PROVISIONED).initialLeaseTableReadCapacity(10).initialLeaseTableWriteCapacity(10);
            // KCL 3.x only: its CoordinatorState and WorkerMetricStats tables
            provisioned(coordinatorConfig, "coordinatorStateTableConfig");
            try {
                Object wua = leaseConfig.getClass().getMethod("workerUtilizationAwareAssignmentConfig").invoke(leaseConfig);
                provisioned(wua, "workerMetricsTableConfig");
            } catch (NoSuchMethodException e) {
                // KCL 2.x
            }
        } else if (!billing.equals("PAY_PER_REQUEST")) {
            throw new IllegalArgumentException("--billing-mode must be PAY_PER_REQUEST or PROVISIONED");
        }

        scheduler = new FastStartScheduler(
                configs.checkpointConfig(),
                coordinatorConfig.parentShardPollIntervalMillis(500).shardConsumerDispatchPollIntervalMillis(250)
                        .schedulerInitializationBackoffTimeMillis(500),
                leaseConfig,
                configs.lifecycleConfig().taskBackoffTimeMillis(250),
                configs.metricsConfig().metricsFactory(new NullMetricsFactory()).metricsLevel(MetricsLevel.NONE),
                configs.processorConfig(),
                configs.retrievalConfig().retrievalSpecificConfig(retrievalConfig));

        log.info("KCL {} worker {} reading {} as application {} from {} (leases in {}, {} retrieval), max {} records, exit {}",
                kclVersion(), workerId, stream, application,
                kinesisEndpoint, dynamoEndpoint, retrieval, maxRecords, exit);
        Thread schedulerThread = new Thread(scheduler, "kcl-scheduler");
        schedulerThread.setDaemon(true);
        schedulerThread.start();

        while (true) {
            if (!schedulerThread.isAlive()) {
                finish("scheduler stopped", false);
            }
            if (idleExitSeconds > 0 && started && System.nanoTime() - lastActivity.get() > TimeUnit.SECONDS.toNanos(idleExitSeconds)) {
                finish("idle for " + idleExitSeconds + " s", halt);
            }
            Thread.sleep(100);
        }
    }

    /** Sets a KCL 3.x DdbTableConfig (found by its getter's name on owner) to PROVISIONED 10/10; no-op on KCL 2.x. */
    private static void provisioned(Object owner, String getter) throws ReflectiveOperationException {
        java.lang.reflect.Method m;
        try {
            m = owner.getClass().getMethod(getter);
        } catch (NoSuchMethodException e) {
            return;
        }
        Object table = m.invoke(owner);
        table.getClass().getMethod("billingMode", BillingMode.class).invoke(table, BillingMode.PROVISIONED);
        table.getClass().getMethod("readCapacity", long.class).invoke(table, 10L);
        table.getClass().getMethod("writeCapacity", long.class).invoke(table, 10L);
    }

    private static String kclVersion() {
        try (var in = Scheduler.class.getResourceAsStream("/META-INF/maven/software.amazon.kinesis/amazon-kinesis-client/pom.properties")) {
            var p = new java.util.Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "?");
        } catch (IOException e) {
            return "?";
        }
    }

    /** Marks progress for --idle-exit-seconds. */
    private static void activity() {
        lastActivity.set(System.nanoTime());
    }

    private static void emit(String json) {
        synchronized (OUT) {
            OUT.println(json);
            OUT.flush();
        }
    }

    /** Ends the process: halt (leases stay with this dead worker, like a crash) or KCL's graceful shutdown. */
    private static void finish(String reason, boolean haltNow) {
        if (haltNow) {
            log.info("halting: {}", reason);
            System.err.flush();
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }
        if (!exiting.compareAndSet(false, true)) {
            return;
        }
        Thread t = new Thread(() -> {
            int rc = 0;
            try {
                Scheduler s = scheduler;
                if (s != null) {
                    log.info("graceful shutdown: {}", reason);
                    Future<Boolean> done = s.startGracefulShutdown();
                    Boolean ok = done.get(60, TimeUnit.SECONDS);
                    log.info("graceful shutdown finished: {}", ok);
                }
            } catch (Exception e) {
                log.error("graceful shutdown failed", e);
                rc = 3;
            }
            long n;
            synchronized (LOCK) {
                n = processed;
            }
            emit("{\"exit\":" + q(reason) + ",\"records\":" + n + "}");
            System.err.flush();
            Runtime.getRuntime().halt(rc);
        }, "kcl-legacy-exit");
        t.start();
    }

    private static final class Processor implements ShardRecordProcessor {
        private String shardId;

        @Override
        public void initialize(InitializationInput input) {
            shardId = input.shardId();
            activity();
            started = true;
            log.info("initialize {} at {}", shardId, input.extendedSequenceNumber());
        }

        @Override
        public void processRecords(ProcessRecordsInput input) {
            if (throughput) {
                processBatch(input);
                return;
            }
            for (KinesisClientRecord r : input.records()) {
                synchronized (LOCK) {
                    if (limitReached) {
                        return;
                    }
                    // checkpoint first: every printed record is covered by KCL's checkpoint
                    if (!checkpoint(input.checkpointer(), r.sequenceNumber(), r.subSequenceNumber())) {
                        return;
                    }
                    processed++;
                    ByteBuffer data = r.data().duplicate();
                    byte[] bytes = new byte[data.remaining()];
                    data.get(bytes);
                    emit("{\"shard\":" + q(shardId) + ",\"seq\":" + q(r.sequenceNumber()) + ",\"sub\":" + r.subSequenceNumber()
                            + ",\"pk\":" + q(r.partitionKey()) + ",\"data\":" + q(new String(bytes, StandardCharsets.UTF_8)) + "}");
                    activity();
                    if (maxRecords > 0 && processed >= maxRecords) {
                        limitReached = true;
                        finish("max records " + maxRecords, halt);
                        return;
                    }
                }
            }
        }

        /**
         * --throughput true (bench/consume-source.sh's KCL peer): every record's data is read, nothing is printed, and
         * the batch is checkpointed once, at its last record, as a consumer that hands batches on would.
         */
        private void processBatch(ProcessRecordsInput input) {
            long bytes = 0;
            KinesisClientRecord last = null;
            for (KinesisClientRecord r : input.records()) {
                bytes += r.data().remaining();
                last = r;
            }
            if (last == null) {
                return;
            }
            synchronized (LOCK) {
                if (limitReached || !checkpoint(input.checkpointer(), last.sequenceNumber(), last.subSequenceNumber())) {
                    return;
                }
                processed += input.records().size();
                dataBytes += bytes;
                activity();
                if (maxRecords > 0 && processed >= maxRecords) {
                    limitReached = true;
                    finish("max records " + maxRecords, halt);
                }
            }
        }

        /** Record-level checkpoint with retries; false if the lease is gone (shutdown). */
        private boolean checkpoint(RecordProcessorCheckpointer checkpointer, String seq, long sub) {
            for (int attempt = 1; ; attempt++) {
                try {
                    if (seq == null) {
                        checkpointer.checkpoint();
                    } else {
                        checkpointer.checkpoint(seq, sub);
                    }
                    return true;
                } catch (ShutdownException e) {
                    log.warn("{}: checkpoint refused, lease lost: {}", shardId, e.toString());
                    return false;
                } catch (ThrottlingException | KinesisClientLibDependencyException e) {
                    if (attempt >= 10) {
                        throw new IllegalStateException(e);
                    }
                    log.warn("{}: checkpoint failed (attempt {}), retrying: {}", shardId, attempt, e.toString());
                    try {
                        Thread.sleep(200);
                    } catch (InterruptedException ie) {
                        Thread.currentThread().interrupt();
                        return false;
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(shardId + ": checkpoint failed", e);
                }
            }
        }

        @Override
        public void leaseLost(LeaseLostInput input) {
            log.info("lease lost: {}", shardId);
        }

        @Override
        public void shardEnded(ShardEndedInput input) {
            synchronized (LOCK) {
                if (limitReached) {
                    return; // stopping: skipped records must not be covered by a SHARD_END checkpoint
                }
                if (checkpoint(input.checkpointer(), null, 0)) {
                    emit("{\"shardEnd\":" + q(shardId) + "}");
                }
                activity();
            }
        }

        @Override
        public void shutdownRequested(ShutdownRequestedInput input) {
            // Every processed record is already checkpointed; a bare checkpoint() here would also cover records
            // delivered but skipped after --max-records.
            log.info("shutdown requested: {}", shardId);
        }
    }

    /**
     * KCL 3.x probes EC2/ECS instance metadata (169.254.169.254) with HttpURLConnection to pick worker metrics.
     * Only 127.0.0.1 may be reached here: every non-loopback URL connection goes to a closed local port instead.
     */
    private static void onlyLoopback() {
        ProxySelector.setDefault(new ProxySelector() {
            @Override
            public List<Proxy> select(URI uri) {
                String host = uri.getHost();
                boolean loopback = host != null && (host.equals("localhost") || host.startsWith("127.") || host.equals("[::1]") || host.equals("::1"));
                if (loopback) {
                    return List.of(Proxy.NO_PROXY);
                }
                log.info("refusing non-loopback connection to {}", uri);
                return List.of(new Proxy(Proxy.Type.HTTP, new InetSocketAddress(InetAddress.getLoopbackAddress(), 9)));
            }

            @Override
            public void connectFailed(URI uri, SocketAddress sa, IOException ioe) {
            }
        });
    }

    private static String q(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> m = new HashMap<>();
        List<String> rest = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].startsWith("--") && i + 1 < args.length) {
                m.put(args[i].substring(2), args[++i]);
            } else {
                rest.add(args[i]);
            }
        }
        if (!rest.isEmpty()) {
            throw new IllegalArgumentException("unexpected arguments " + rest);
        }
        return m;
    }

    private static String require(Map<String, String> a, String name) {
        String v = a.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }
}
