package software.amazon.kinesis.coordinator;

import java.lang.reflect.Field;

import software.amazon.kinesis.checkpoint.CheckpointConfig;
import software.amazon.kinesis.leases.LeaseManagementConfig;
import software.amazon.kinesis.leases.LeaseRefresher;
import software.amazon.kinesis.lifecycle.LifecycleConfig;
import software.amazon.kinesis.metrics.MetricsConfig;
import software.amazon.kinesis.processor.ProcessorConfig;
import software.amazon.kinesis.retrieval.RetrievalConfig;

/**
 * KCL's Scheduler, unchanged except for one start-up delay: on an EMPTY lease table a stock Scheduler waits a
 * random 1-30 s (checking every 3 s whether another worker filled the table) before it syncs the shards into
 * leases, so that many workers starting together do not all sync. This program is always the only worker, so
 * it makes the same decision at once: sync if the table is empty, as the stock one does after its wait (a
 * non-empty table still skips the sync, as in the stock code). What KCL writes to the table is unchanged.
 *
 * It lives in KCL's package because shouldInitiateLeaseSync() is package-private (same in KCL 2.x and 3.x).
 */
public class FastStartScheduler extends Scheduler {
    public FastStartScheduler(CheckpointConfig checkpointConfig, CoordinatorConfig coordinatorConfig,
                              LeaseManagementConfig leaseManagementConfig, LifecycleConfig lifecycleConfig,
                              MetricsConfig metricsConfig, ProcessorConfig processorConfig,
                              RetrievalConfig retrievalConfig) {
        super(checkpointConfig, coordinatorConfig, leaseManagementConfig, lifecycleConfig, metricsConfig,
                processorConfig, retrievalConfig);
    }

    @Override
    boolean shouldInitiateLeaseSync() {
        try {
            Field f = Scheduler.class.getDeclaredField("leaseRefresher");
            f.setAccessible(true);
            return ((LeaseRefresher) f.get(this)).isLeaseTableEmpty();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("KCL's Scheduler has no leaseRefresher field", e);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
