package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.Attributes;
import io.kinesnow.nifi.contract.Wire;
import io.kinesnow.nifi.nativebridge.SinkBatch;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.util.MockFlowFile;
import org.apache.nifi.util.MockProcessSession;
import org.apache.nifi.util.MockSessionFactory;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * PutSnowflake's own routing, with a stand-in engine ({@link RowSink}) that gives each FlowFile the outcome the test
 * names: success goes to success, a give-back returns to the queue penalized, a reload returns marked for the
 * at-least-once channels, failure goes to failure; the session commits once every FlowFile has its outcome.
 */
class PutSnowflakeRoutingTest {
    /** Gives the i-th FlowFile submitted the i-th route, once; a negative route gives it none (it stays in the engine). */
    private static final class ScriptedSink implements RowSink {
        private final int[] routes;
        private final List<Long> submitted = new ArrayList<>();
        private boolean answered;

        ScriptedSink(final int... routes) {
            this.routes = routes;
        }

        @Override
        public void open(final PropertyContext context, final ComponentLog log, final String... facts) {
        }

        @Override
        public void close() {
        }

        @Override
        public long capacity() {
            return submitted.isEmpty() ? 1 << 20 : 0;
        }

        @Override
        public int[] choose(final byte[] candidates) {
            throw new AssertionError("the queue fits the budget: nothing to choose");
        }

        @Override
        public void submit(final byte[] flowFiles) {
            final ByteBuffer in = ByteBuffer.wrap(flowFiles);
            in.getInt(); // magic
            final int n = in.getInt();
            for (int i = 0; i < n; i++) {
                submitted.add(in.getLong());
                for (int a = in.getInt() * 2 + 1; a > 0; a--) { // each attribute's name and value, then the content
                    skip(in);
                }
            }
        }

        private static void skip(final ByteBuffer in) {
            final int length = in.getInt();
            in.position(in.position() + length);
        }

        @Override
        public byte[] outcomes(final long waitMillis) {
            if (answered || submitted.isEmpty()) {
                return null;
            }
            answered = true;
            final int known = (int) java.util.Arrays.stream(routes).limit(submitted.size()).filter(r -> r >= 0).count();
            final ByteBuffer out = ByteBuffer.allocate(4096).putInt(Wire.OUTCOMES_MAGIC).putInt(known);
            for (int i = 0; i < submitted.size(); i++) {
                if (routes[i] < 0) {
                    continue; // no outcome yet: it waits in the engine (parked)
                }
                out.putLong(submitted.get(i)).put((byte) routes[i]).putInt(1).putInt(0);
                for (final String s : List.of("ch", "42", "said " + i)) {
                    final byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
                    out.putInt(utf8.length).put(utf8);
                }
            }
            final byte[] bytes = new byte[out.position()];
            out.flip().get(bytes);
            return bytes;
        }
    }

    /** PutSnowflake over the given engine, with the least settings that validate. */
    private static TestRunner runner(final RowSink sink) {
        final TestRunner runner = TestRunners.newTestRunner(new PutSnowflake(sink));
        runner.setValidateExpressionUsage(false);
        runner.setProperty(PutSnowflake.ACCOUNT_IDENTIFIER, "myorg-myaccount");
        runner.setProperty(PutSnowflake.USER, "KINESNOW_SVC");
        runner.setProperty(PutSnowflake.PRIVATE_KEY, "-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n");
        runner.setProperty(PutSnowflake.DATABASE, "RAW");
        runner.setProperty(PutSnowflake.SCHEMA, "KINESIS");
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
        return runner;
    }

    @Test
    void eachOutcomeTakesItsFlowFileWhereItSays() {
        final ScriptedSink sink = new ScriptedSink(SinkBatch.ROUTE_SUCCESS, SinkBatch.ROUTE_RETRY, SinkBatch.ROUTE_RELOAD,
                SinkBatch.ROUTE_FAILURE);
        final TestRunner runner = runner(sink);
        for (int i = 0; i < 4; i++) {
            runner.enqueue("{\"id\":" + i + "}");
        }
        runner.run(1, false, true);

        runner.assertTransferCount(PutSnowflake.REL_SUCCESS, 1);
        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 1);
        final MockFlowFile success = runner.getFlowFilesForRelationship(PutSnowflake.REL_SUCCESS).get(0);
        success.assertAttributeEquals(Attributes.CHANNEL, "ch");
        success.assertAttributeEquals(Attributes.OFFSET_TOKEN, "42");
        runner.getFlowFilesForRelationship(PutSnowflake.REL_FAILURE).get(0).assertAttributeEquals(Attributes.ERROR_MESSAGE, "said 3");
        final ProcessSession look = runner.getProcessSessionFactory().createSession();
        final List<FlowFile> back = look.get(10);
        look.rollback();
        runner.run(0, true, false);
        assertEquals(2, back.size(), "the given-back FlowFile and the reload are back in the queue");
        final FlowFile reload = back.stream().filter(f -> "said 2".equals(f.getAttribute(Attributes.ERROR_MESSAGE))).findFirst().orElseThrow();
        assertEquals(Attributes.AT_LEAST_ONCE, reload.getAttribute(Attributes.DELIVERY), "the reload, marked");
        final FlowFile retry = back.stream().filter(f -> "said 1".equals(f.getAttribute(Attributes.ERROR_MESSAGE))).findFirst().orElseThrow();
        assertEquals(null, retry.getAttribute(Attributes.DELIVERY), "the give-back, not marked");
        assertTrue(runner.getPenalizedFlowFiles().stream().anyMatch(f -> "said 1".equals(f.getAttribute(Attributes.ERROR_MESSAGE))),
                "the given-back FlowFile is penalized");
        assertTrue(runner.getPenalizedFlowFiles().stream().noneMatch(f -> "said 2".equals(f.getAttribute(Attributes.ERROR_MESSAGE))),
                "the reload is not penalized");
    }

    /**
     * A FlowFile that failed goes to failure at once, even while another FlowFile of its session waits in the engine:
     * that one may be waiting for the failed one to come back on a looped {@code failure} (an earlier FlowFile of its
     * lease, refused with a 403 on the shard's shared channel), so holding the failed one until the session commits
     * would keep both waiting until Order Wait broke the lease's exactly-once chain (found by the chaos hour).
     */
    @Test
    void aFailedFlowFileLeavesAtOnceWhileAnotherOfItsSessionWaits() {
        final ScriptedSink sink = new ScriptedSink(SinkBatch.ROUTE_FAILURE, -1, SinkBatch.ROUTE_RETRY, SinkBatch.ROUTE_RELOAD);
        final TestRunner runner = runner(sink);
        for (int i = 0; i < 4; i++) {
            runner.enqueue("{\"id\":" + i + "}");
        }
        runner.run(1, false, true);

        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 1);
        runner.getFlowFilesForRelationship(PutSnowflake.REL_FAILURE).get(0).assertAttributeEquals(Attributes.ERROR_MESSAGE, "said 0");
        final MockSessionFactory sessions = (MockSessionFactory) runner.getProcessSessionFactory();
        for (final MockProcessSession session : sessions.getCreatedSessions()) {
            if (!session.getFlowFilesForRelationship(PutSnowflake.REL_FAILURE).isEmpty()) {
                session.assertCommitted(); // the failed FlowFile is on its way, not held with FlowFile 1
            }
        }
        final ProcessSession look = runner.getProcessSessionFactory().createSession();
        final List<FlowFile> back = look.get(10);
        look.rollback();
        assertEquals(List.of("said 2", "said 3"), back.stream().map(f -> f.getAttribute(Attributes.ERROR_MESSAGE)).sorted().toList(),
                "the given-back FlowFile and the reload are back in the queue while FlowFile 1 still waits");
        runner.run(0, true, false);
    }

    /**
     * A sink that drops rows once appended (issue 50): its first answer asks for the content of the first FlowFile again;
     * once handed over (the same bytes, while the FlowFile stays held), every FlowFile succeeds.
     */
    private static final class ResendingSink implements RowSink {
        private final List<Long> submitted = new ArrayList<>();
        private final List<String> contents = new ArrayList<>();
        private int answers;

        @Override
        public void open(final PropertyContext context, final ComponentLog log, final String... facts) {
        }

        @Override
        public void close() {
        }

        @Override
        public long capacity() {
            return submitted.isEmpty() ? 1 << 20 : 0;
        }

        @Override
        public int[] choose(final byte[] candidates) {
            throw new AssertionError("the queue fits the budget: nothing to choose");
        }

        @Override
        public void submit(final byte[] flowFiles) {
            final ByteBuffer in = ByteBuffer.wrap(flowFiles);
            in.getInt(); // magic
            final int n = in.getInt();
            for (int i = 0; i < n; i++) {
                submitted.add(in.getLong());
                for (int a = in.getInt() * 2; a > 0; a--) {
                    final int length = in.getInt();
                    in.position(in.position() + length);
                }
                final byte[] content = new byte[in.getInt()];
                in.get(content);
                contents.add(new String(content, StandardCharsets.UTF_8));
            }
        }

        @Override
        public byte[] outcomes(final long waitMillis) {
            answers++;
            if (answers == 1) {
                return answer(List.of(submitted.get(0)), SinkBatch.ROUTE_RESEND);
            }
            if (answers == 2) {
                return null;
            }
            if (answers == 3) {
                return answer(submitted.subList(0, 2), SinkBatch.ROUTE_SUCCESS);
            }
            return null;
        }

        private static byte[] answer(final List<Long> ids, final int route) {
            final ByteBuffer out = ByteBuffer.allocate(4096).putInt(Wire.OUTCOMES_MAGIC).putInt(ids.size());
            for (final long id : ids) {
                out.putLong(id).put((byte) route).putInt(1).putInt(0);
                for (final String s : List.of("ch", route == SinkBatch.ROUTE_RESEND ? "" : "42", "")) {
                    final byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
                    out.putInt(utf8.length).put(utf8);
                }
            }
            final byte[] bytes = new byte[out.position()];
            out.flip().get(bytes);
            return bytes;
        }
    }

    @Test
    void aFlowFileAskedForAgainIsHandedOverAgainAndStaysHeldUntilItsOutcome() {
        final ResendingSink sink = new ResendingSink();
        final TestRunner runner = runner(sink);
        runner.enqueue("{\"id\":0}");
        runner.enqueue("{\"id\":1}");
        runner.run(1, false, true); // takes both; the engine asks for the first one's content again
        runner.assertTransferCount(PutSnowflake.REL_SUCCESS, 0);
        runner.assertQueueEmpty();
        runner.run(1, false, false); // hands it over again
        assertEquals(3, sink.submitted.size(), "the first FlowFile is handed over a second time");
        assertEquals(sink.submitted.get(0), sink.submitted.get(2), "by its own id");
        assertEquals(sink.contents.get(0), sink.contents.get(2), "with the same content");
        runner.run(1, true, false);
        runner.assertTransferCount(PutSnowflake.REL_SUCCESS, 2);
        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 0);
    }
}
