package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.FatalNativeException;
import io.kinesnow.nifi.nativebridge.NativeTestSupport;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import io.kinesnow.nifi.nativebridge.RecordBatch;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.exception.FlowFileAccessException;
import org.apache.nifi.processor.exception.ProcessException;
import org.apache.nifi.processor.io.OutputStreamCallback;
import org.apache.nifi.util.LogMessage;
import org.apache.nifi.util.MockFlowFile;
import org.apache.nifi.util.MockProcessSession;
import org.apache.nifi.util.SharedSessionState;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every batch ConsumeKinesis polls is settled, whatever fails between poll and commit: else its shard's records
 * stay in flight, their budget is never returned and every reader of the engine blocks. The engine here is a
 * stand-in with the native engine's contract (a batch stays in flight until acked or nacked, nothing else is handed
 * out meanwhile, a nack hands the same records out again in a new batch); the batch bytes are made by the native
 * library and decoded by the real {@link RecordBatch}.
 */
class ConsumeKinesisSettlementTest {
    private OneShardEngine engine;
    private ConsumeKinesis processor;
    private TestRunner runner;

    @BeforeAll
    static void load() {
        NativeLibrary.require();
    }

    @BeforeEach
    void setUp() {
        engine = new OneShardEngine(NativeTestSupport.syntheticBatch(1, 3, 16));
        processor = new ConsumeKinesis(engine);
        runner = TestRunners.newTestRunner(processor);
        runner.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        runner.setProperty(ConsumeKinesis.REGION, "us-east-1");
    }

    @Test
    void theEnginesCountsReachNiFisCountersByTheContractsNamesOncePerInterval() {
        final long[] counts = new long[io.kinesnow.nifi.contract.ConsumeKinesisCounters.ENGINE.size()];
        counts[0] = 3; // Records Read from Kinesis
        counts[counts.length - 1] = 2; // Records Read Again after a Rollback
        final List<long[]> handed = new java.util.ArrayList<>(List.of(counts, new long[counts.length]));
        final ConsumeKinesis counting = new ConsumeKinesis(new OneShardEngine(NativeTestSupport.syntheticBatch(1, 3, 16)) {
            @Override
            public long[] counters() {
                return handed.isEmpty() ? new long[counts.length] : handed.remove(0);
            }
        });
        final TestRunner counted = TestRunners.newTestRunner(counting);
        counted.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        counted.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        counted.setProperty(ConsumeKinesis.REGION, "us-east-1");
        counted.run(5);
        assertEquals(3L, counted.getCounterValue("Records Read from Kinesis"));
        assertEquals(2L, counted.getCounterValue("Records Read Again after a Rollback"));
        assertEquals(3L, counted.getCounterValue("Records Consumed"), "the processor's own counter");
        assertNull(counted.getCounterValue("Kinesis Throttles"), "a zero count is not added");
        assertEquals(1, 2 - handed.size(), "five triggers within a second drain the engine once");
    }

    @Test
    void aFullContentRepositoryNacksTheBatchAndItsRecordsComeAgain() {
        final RuntimeException e = assertThrows(FlowFileAccessException.class, () -> triggerWith(ContentRepositoryFull::new));
        assertTrue(e.getMessage().contains("No space left"), e.getMessage());
        assertEquals(List.of("poll 1", "nack 1"), engine.calls);
        assertDeliveredAgainAndAcked(2);
    }

    @Test
    void theArrayOfABatchIsLentToTheNextPollOnceItsFlowFilesAreWritten() throws Exception {
        assertThrows(FlowFileAccessException.class, () -> triggerWith(ContentRepositoryFull::new));
        assertNull(engine.lent.get(0), "nothing to lend before the first batch");
        runner.run(1);
        assertEquals(List.of("poll 1", "nack 1", "poll 2", "ack 2"), engine.calls);
        assertNotNull(engine.lent.get(1), "the first batch's buffer is lent to the next poll");
        assertEquals(engine.records.length + 4096, engine.lent.get(1).capacity(), "the buffer, not the batch");
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 3);
        final List<MockFlowFile> written = runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        final RecordBatch expected = RecordBatch.decode(engine.records);
        for (int i = 0; i < 3; i++) {
            written.get(i).assertContentEquals(expected.shards().get(0).flowFiles().get(i).content());
        }
    }

    @Test
    void aFailedCommitNacksTheBatchOnce() {
        assertThrows(ProcessException.class, () -> triggerWith(CommitFails::new));
        assertEquals(List.of("poll 1", "nack 1"), engine.calls, "nacked by the failure callback, not again by onTrigger");
        assertDeliveredAgainAndAcked(2);
    }

    @Test
    void aBatchThatCannotBeDecodedIsNacked() {
        final byte[] good = engine.records;
        engine.records = good.clone(); // cut short: the id is there, the rest is not
        java.nio.ByteBuffer.wrap(engine.records).putInt(4, Integer.MAX_VALUE);
        assertThrows(FatalNativeException.class, () -> triggerWith(MockProcessSession::new));
        assertEquals(List.of("poll 1", "nack 1"), engine.calls);
        engine.records = good;
        assertDeliveredAgainAndAcked(2);
    }

    @Test
    void whileTheEngineStartsTheProcessorYieldsWithANoticeAndPollsNothing() {
        engine.startup = "the engine is starting: it prepares the lease table";
        runner.run(3);
        assertTrue(runner.isYieldCalled());
        assertEquals(List.of(), engine.calls, "nothing polled");
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 0);
        final List<String> notices = runner.getLogger().getInfoMessages().stream().map(LogMessage::getMsg)
                .filter(m -> m.contains("Not reading yet")).toList();
        assertEquals(1, notices.size(), "one notice, not one per trigger: " + notices);
        assertTrue(notices.get(0).contains("it prepares the lease table"), notices.get(0));
        engine.startup = "the engine could not start (attempt 1): table unreachable; it tries again in 5 s";
        runner.run(1);
        final List<LogMessage> warnings = runner.getLogger().getWarnMessages();
        assertTrue(warnings.stream().anyMatch(m -> m.getMsg().contains("table unreachable")), warnings.toString());
        engine.startup = null;
        runner.run(1);
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 3);
        assertEquals(List.of("poll 1", "ack 1"), engine.calls);
    }

    /** The next trigger, with an ordinary session, gets the same records in a new batch and acks it. */
    private void assertDeliveredAgainAndAcked(final long batchId) {
        runner.run(1);
        assertEquals(List.of("poll " + batchId, "ack " + batchId), engine.calls.subList(2, 4));
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 3);
        final RecordBatch expected = RecordBatch.decode(engine.records);
        final List<MockFlowFile> delivered = runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        for (int i = 0; i < 3; i++) {
            final RecordBatch.FlowFileData data = expected.shards().get(0).flowFiles().get(i);
            assertArrayEquals(data.content(), delivered.get(i).toByteArray());
            delivered.get(i).assertAttributeEquals("aws.kinesis.last.sequence.number", data.lastSequence());
        }
        assertFalse(engine.inFlight(), "nothing left in flight");
    }

    /** Triggers once the way NiFi does (its framework rolls the session back when onTrigger throws). */
    private void triggerWith(final SessionMaker maker) {
        final SharedSessionState state = new SharedSessionState(processor, new AtomicLong());
        processor.onTrigger(runner.getProcessContext(), () -> maker.make(state, processor));
    }

    private interface SessionMaker {
        ProcessSession make(SharedSessionState state, ConsumeKinesis processor);
    }

    /** A session whose content repository is full, as NiFi's throws when its disk is. */
    private static final class ContentRepositoryFull extends MockProcessSession {
        ContentRepositoryFull(final SharedSessionState state, final ConsumeKinesis processor) {
            super(state, processor);
        }

        @Override
        public MockFlowFile write(final FlowFile flowFile, final OutputStreamCallback callback) {
            throw new FlowFileAccessException("Failed to write to the content repository: No space left on device");
        }
    }

    /** A session whose commit fails (as StandardProcessSession's does: failure callback, then the exception). */
    private static final class CommitFails extends MockProcessSession {
        CommitFails(final SharedSessionState state, final ConsumeKinesis processor) {
            super(state, processor);
        }

        @Override
        public void commitAsync(final Runnable onSuccess, final Consumer<Throwable> onFailure) {
            rollback();
            final ProcessException e = new ProcessException("FlowFile repository unavailable");
            onFailure.accept(e);
            throw e;
        }
    }
}
