package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeTestSupport;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.processor.VerifiableProcessor;
import org.apache.nifi.util.LogMessage;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import static io.kinesnow.nifi.processors.ProcessorTestSupport.assertProblem;
import static io.kinesnow.nifi.processors.ProcessorTestSupport.eventually;
import static io.kinesnow.nifi.processors.ProcessorTestSupport.problems;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ConsumeKinesisTest {
    private TestRunner runner;

    @BeforeEach
    void setUp() {
        runner = TestRunners.newTestRunner(ConsumeKinesis.class);
        runner.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        runner.setProperty(ConsumeKinesis.REGION, "us-east-1");
    }

    @Test
    void minimalSettingsAreValid() {
        runner.assertValid();
    }

    @Test
    void theMessageDemarcatorReachesTheEngineExactlyAfterExpressionLanguage() {
        runner.setProperty(ConsumeKinesis.PROCESSING_STRATEGY, "DEMARCATOR");
        runner.setProperty(ConsumeKinesis.MESSAGE_DEMARCATOR, "\uD83D\uDCA5${literal('\\r\\n')}|");
        assertEquals("\uD83D\uDCA5\r\n|", engineValue(ConsumeKinesis.MESSAGE_DEMARCATOR), "multi-byte text and escapes, exactly");
        runner.assertValid();
        runner.setProperty(ConsumeKinesis.MESSAGE_DEMARCATOR, "\n");
        assertEquals("\n", engineValue(ConsumeKinesis.MESSAGE_DEMARCATOR), "a new line entered as it is");
        runner.assertValid();
        runner.setProperty(ConsumeKinesis.MESSAGE_DEMARCATOR, "${literal('')}");
        assertProblem(runner, "Message Demarcator", "required with Processing Strategy DEMARCATOR");
        runner.removeProperty(ConsumeKinesis.MESSAGE_DEMARCATOR);
        runner.assertNotValid();
    }

    @Test
    void recordNeedsAReaderAndAWriter() {
        runner.setProperty(ConsumeKinesis.PROCESSING_STRATEGY, "RECORD");
        final Set<String> subjects = problems(runner).stream().map(r -> r.getSubject()).collect(Collectors.toSet());
        assertTrue(subjects.containsAll(Set.of("Record Reader", "Record Writer")), subjects.toString());
    }

    @Test
    void snowflakeCommitRefusesGroupedRecordsWithoutTheirMetadata() throws Exception {
        // NiFi runs the processor's own validation only once the services are set.
        final org.apache.nifi.json.JsonTreeReader reader = new org.apache.nifi.json.JsonTreeReader();
        runner.addControllerService("reader", reader);
        runner.enableControllerService(reader);
        final org.apache.nifi.json.JsonRecordSetWriter writer = new org.apache.nifi.json.JsonRecordSetWriter();
        runner.addControllerService("writer", writer);
        runner.enableControllerService(writer);
        runner.setProperty(ConsumeKinesis.RECORD_READER, "reader");
        runner.setProperty(ConsumeKinesis.RECORD_WRITER, "writer");
        runner.setProperty(ConsumeKinesis.FAILOVER_POSITION, "SNOWFLAKE_COMMIT");
        for (final String strategy : List.of("LINE_DELIMITED", "DEMARCATOR", "RECORD")) {
            runner.setProperty(ConsumeKinesis.PROCESSING_STRATEGY, strategy);
            runner.setProperty(ConsumeKinesis.MESSAGE_DEMARCATOR, "|");
            assertProblem(runner, "Failover Position", "no per-record positions");
            runner.setProperty(ConsumeKinesis.OUTPUT_STRATEGY, "INJECT_METADATA");
            runner.assertValid();
            runner.setProperty(ConsumeKinesis.OUTPUT_STRATEGY, "USE_VALUE");
        }
    }

    @Test
    void parseFailureIsOfferedWithEveryStrategy() {
        for (final String strategy : List.of("FLOW_FILE", "LINE_DELIMITED", "DEMARCATOR", "RECORD")) {
            runner.setProperty(ConsumeKinesis.PROCESSING_STRATEGY, strategy);
            assertEquals(Set.of("success", "parse.failure"), runner.getProcessor().getRelationships().stream()
                    .map(r -> r.getName()).collect(Collectors.toSet()), strategy);
        }
    }

    private String engineValue(final PropertyDescriptor descriptor) {
        final String[] pairs = NativeComponent.evaluated(runner.getProcessContext(), ConsumeKinesis.PROPERTIES);
        for (int i = 0; i < pairs.length; i += 2) {
            if (pairs[i].equals(descriptor.getName())) {
                return pairs[i + 1];
            }
        }
        throw new AssertionError("not handed to the engine: " + descriptor.getName());
    }

    @Test
    void missingStreamNameIsInvalid() {
        runner.removeProperty(ConsumeKinesis.STREAM_NAME);
        runner.assertNotValid();
    }

    @Test
    void badRegionIsExplainedByTheNativeRules() {
        runner.setProperty(ConsumeKinesis.REGION, "Frankfurt");
        assertProblem(runner, "Region", "'Frankfurt' is not an AWS region code such as us-east-1");
    }

    @Test
    void applicationNameMustSuitDynamoDbAndFanOut() {
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "my app!");
        assertProblem(runner, "Application Name", "names the DynamoDB table and the fan-out consumer");
    }

    @Test
    void halfOfTheCredentialsIsInvalid() {
        runner.setProperty(ConsumeKinesis.ACCESS_KEY_ID, "AKIAIOSFODNN7EXAMPLE");
        assertProblem(runner, "AWS Secret Access Key", "is required when AWS Access Key ID is set");
        runner.setProperty(ConsumeKinesis.SECRET_ACCESS_KEY, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        runner.assertValid();
    }

    @Test
    void enhancedFanOutIsAConsumerType() {
        runner.setProperty(ConsumeKinesis.CONSUMER_TYPE, "ENHANCED_FAN_OUT");
        runner.assertValid();
    }

    @Test
    void removingAPollingConsumerCallsNothing() {
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "http://127.0.0.1:1");
        ((ConsumeKinesis) runner.getProcessor()).onRemoved(runner.getProcessContext());
        assertTrue(runner.getLogger().getWarnMessages().isEmpty());
        assertTrue(runner.getLogger().getInfoMessages().isEmpty());
    }

    @Test
    void aFanOutConsumerThatCannotBeDeregisteredIsNamedInAWarning() {
        runner.setProperty(ConsumeKinesis.CONSUMER_TYPE, "ENHANCED_FAN_OUT");
        runner.setProperty(ConsumeKinesis.ACCESS_KEY_ID, "AKIAIOSFODNN7EXAMPLE");
        runner.setProperty(ConsumeKinesis.SECRET_ACCESS_KEY, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "http://127.0.0.1:1"); // nothing listens there
        ((ConsumeKinesis) runner.getProcessor()).onRemoved(runner.getProcessContext());
        final List<LogMessage> warnings = runner.getLogger().getWarnMessages();
        assertEquals(1, warnings.size());
        final String text = warnings.get(0).getMsg();
        assertTrue(text.contains("consumer 'orders-to-snowflake' of stream 'orders' could not be deregistered"), text);
        assertTrue(text.contains("deregister it by hand"), text);
        assertFalse(text.contains("wJalrXUtnFEMI"), "no secret in the message");
    }

    @Test
    void atTimestampNeedsAValidTimestamp() {
        runner.setProperty(ConsumeKinesis.INITIAL_POSITION, "AT_TIMESTAMP");
        runner.assertNotValid();
        runner.setProperty(ConsumeKinesis.POSITION_TIMESTAMP, "last tuesday");
        assertProblem(runner, "Stream Position Timestamp", "is not an ISO-8601 timestamp");
        runner.setProperty(ConsumeKinesis.POSITION_TIMESTAMP, "2026-01-31T12:00:00Z");
        runner.assertValid();
    }

    @Test
    void malformedSizesDurationsAndUrlsAreExplained() {
        runner.setProperty(ConsumeKinesis.MAX_BATCH_DURATION, "soon");
        runner.setProperty(ConsumeKinesis.MAX_BATCH_SIZE, "lots");
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "kinesis.local");
        runner.setProperty(ConsumeKinesis.MAX_RECORDS_PER_REQUEST, "0");
        assertProblem(runner, "Max Batch Duration", "is not a time period");
        assertProblem(runner, "Max Batch Size", "is not a data size");
        assertProblem(runner, "Endpoint Override URL", "is not a URL");
        assertProblem(runner, "Max Records Per Request", "from 1 to 10000");
        assertEquals(4, problems(runner).size());
    }

    @Test
    void bufferMustHoldABatch() {
        runner.setProperty(ConsumeKinesis.MAX_BATCH_SIZE, "100 MB");
        runner.setProperty(ConsumeKinesis.MAX_BUFFER_SIZE, "32 MB");
        assertProblem(runner, "Max Buffer Size", "must be at least Max Batch Size");
    }

    @Test
    void secretsAreSensitive() {
        assertTrue(ConsumeKinesis.ACCESS_KEY_ID.isSensitive());
        assertTrue(ConsumeKinesis.SECRET_ACCESS_KEY.isSensitive());
    }

    @Test
    void javaDeclaresExactlyThePropertiesTheNativeRulesRead() {
        final Set<String> declared = ConsumeKinesis.PROPERTIES.stream().map(PropertyDescriptor::getName).collect(Collectors.toSet());
        assertEquals(Set.of(NativeBridge.propertyNames(NativeBridge.CONSUME_KINESIS)), declared);
    }

    @Test
    void aStartAgainstAnUnreachableEndpointIsReportedWhileTheProcessorYieldsAndStopClosesItsHandle() {
        // Port 1 on loopback refuses connections: no traffic leaves the machine.
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "http://127.0.0.1:1");
        runner.setProperty(ConsumeKinesis.ACCESS_KEY_ID, "AKIAIOSFODNN7EXAMPLE");
        runner.setProperty(ConsumeKinesis.SECRET_ACCESS_KEY, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        final int before = NativeTestSupport.openComponents();
        final long t0 = System.nanoTime();
        runner.run(1, false); // @OnScheduled and one trigger: the engine starts in the background
        final long scheduledMillis = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(scheduledMillis < 2_000, "@OnScheduled and a trigger took " + scheduledMillis + " ms");
        assertTrue(runner.isYieldCalled(), "the trigger yields while the engine starts");
        assertEquals(before + 1, NativeTestSupport.openComponents());
        // The failed start is an error bulletin (from the engine) and the status the processor reports.
        eventually(() -> messages(runner.getLogger().getErrorMessages()), "DynamoDB call on table 'orders-to-snowflake' failed");
        runner.run(1, false, false);
        eventually(() -> messages(runner.getLogger().getWarnMessages()), "the engine could not start (attempt 1)");
        final String all = String.join(" | ", messages(runner.getLogger().getErrorMessages()))
                + String.join(" | ", messages(runner.getLogger().getWarnMessages()));
        assertFalse(all.contains("wJalrXUtnFEMI"), "the secret must not appear in errors");
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 0);
        runner.stop();
        assertEquals(before, NativeTestSupport.openComponents());
        // The native engine's own events reach the processor's log (and so become bulletins in NiFi).
        eventually(() -> messages(runner.getLogger().getInfoMessages()), "ConsumeKinesis for stream 'orders'");
    }

    private static List<String> messages(final List<LogMessage> logs) {
        return logs.stream().map(LogMessage::getMsg).collect(Collectors.toList());
    }


    /**
     * "Verify Properties" across JNI: static credentials resolve; nothing listens on the endpoint, so the stream step
     * fails naming the call; the steps arrive in order.
     */
    @Test
    void verificationStepsCrossTheBridgeInOrder() {
        runner.setProperty(ConsumeKinesis.ACCESS_KEY_ID, "AKIAIOSFODNN7EXAMPLE");
        runner.setProperty(ConsumeKinesis.SECRET_ACCESS_KEY, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "http://127.0.0.1:9");
        final List<ConfigVerificationResult> steps = ((VerifiableProcessor) runner.getProcessor())
                .verify(runner.getProcessContext(), runner.getLogger(), java.util.Map.of());
        assertEquals(List.of("AWS Credentials", "Kinesis Stream", "Lease Table", "IAM Permissions"),
                steps.stream().map(ConfigVerificationResult::getVerificationStepName).toList());
        assertEquals(ConfigVerificationResult.Outcome.SUCCESSFUL, steps.get(0).getOutcome(), steps.get(0).getExplanation());
        assertEquals(ConfigVerificationResult.Outcome.FAILED, steps.get(1).getOutcome());
        assertTrue(steps.get(1).getExplanation().contains("DescribeStream"), steps.get(1).getExplanation());
        assertFalse(steps.toString().contains("wJalrXUtnFEMI"), "no secret in any step");
    }
}
