package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeTestSupport;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.processor.VerifiableProcessor;
import org.apache.nifi.components.state.Scope;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.expression.ExpressionLanguageScope;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import static io.kinesnow.nifi.processors.ProcessorTestSupport.assertProblem;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class PutSnowflakeTest {
    /** Shape only: the rules check the PEM's kind here; the key itself is parsed when the client connects. */
    private static final String PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";

    private TestRunner runner;

    @BeforeEach
    void setUp() {
        runner = TestRunners.newTestRunner(PutSnowflake.class);
        // The core's rules get the unevaluated Database, Schema, Table and Pipe (as NiFi's getValue() gives them); they
        // are evaluated per FlowFile in onTrigger. NiFi's mock would refuse that getValue() without this switch.
        runner.setValidateExpressionUsage(false);
        runner.setProperty(PutSnowflake.ACCOUNT_IDENTIFIER, "myorg-myaccount");
        runner.setProperty(PutSnowflake.USER, "KINESNOW_SVC");
        runner.setProperty(PutSnowflake.PRIVATE_KEY, PKCS8);
        runner.setProperty(PutSnowflake.DATABASE, "RAW");
        runner.setProperty(PutSnowflake.SCHEMA, "KINESIS");
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
    }

    @Test
    void minimalKeyPairSettingsAreValid() {
        runner.assertValid();
    }

    @Test
    void keyPairNeedsAKey() {
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        assertProblem(runner, "Private Key", "Private Key or Private Key File is required");
    }

    @Test
    void notBothKeyAndKeyFile(@TempDir final Path dir) throws IOException {
        final Path file = Files.writeString(dir.resolve("rsa_key.p8"), PKCS8);
        runner.setProperty(PutSnowflake.PRIVATE_KEY_FILE, file.toString());
        assertProblem(runner, "Private Key", "not both");
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        runner.assertValid();
    }

    @Test
    void unreadableKeyFileIsNamed() {
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        runner.setProperty(PutSnowflake.PRIVATE_KEY_FILE, "/nonexistent/rsa_key.p8");
        assertProblem(runner, "Private Key File", "cannot read '/nonexistent/rsa_key.p8'");
    }

    @Test
    void encryptedKeyNeedsItsPasswordAndPkcs1IsExplained() {
        runner.setProperty(PutSnowflake.PRIVATE_KEY,
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0w\n-----END ENCRYPTED PRIVATE KEY-----\n");
        assertProblem(runner, "Private Key Password", "the private key is encrypted");
        runner.setProperty(PutSnowflake.PRIVATE_KEY_PASSWORD, "correct horse");
        runner.assertValid();
        runner.setProperty(PutSnowflake.PRIVATE_KEY, "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n");
        assertProblem(runner, "Private Key", "openssl pkcs8 -topk8");
    }

    @Test
    void problemsNeverEchoTheKey() {
        runner.setProperty(PutSnowflake.PRIVATE_KEY, "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC-not-a-pem");
        assertFalse(ProcessorTestSupport.problems(runner).toString().contains("MIIEvgIBADAN"));
        assertProblem(runner, "Private Key", "is not a PEM-encoded PKCS#8 private key");
    }

    @Test
    void namedPipeNeedsItsName() {
        runner.setProperty(PutSnowflake.DESTINATION_TYPE, "PIPE");
        runner.assertNotValid();
        runner.setProperty(PutSnowflake.PIPE, "EVENTS_PIPE");
        runner.assertValid();
    }

    @Test
    void badValuesAreExplained() {
        runner.setProperty(PutSnowflake.ACCOUNT_IDENTIFIER, "my org/account");
        runner.setProperty(PutSnowflake.URL_OVERRIDE, "not a url");
        runner.setProperty(PutSnowflake.MAX_BATCH_SIZE, "64 MB");
        runner.setProperty(PutSnowflake.CHANNEL_PREFIX, "bad prefix!");
        assertProblem(runner, "Account Identifier", "is not a Snowflake account identifier");
        assertProblem(runner, "Snowflake URL Override", "is not a URL");
        assertProblem(runner, "Max Batch Size", "must be between 1 KB and 16 MB");
        assertProblem(runner, "Channel Name Prefix", "may only hold letters");
    }

    @Test
    void managedTokenNeedsNoKey() {
        runner.setProperty(PutSnowflake.AUTHENTICATION_STRATEGY, "SNOWFLAKE_MANAGED_TOKEN");
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        runner.removeProperty(PutSnowflake.USER);
        runner.assertValid();
    }

    /** Openflow's value and both earlier names validate, without account, user or key given a URL. */
    @Test
    void snowflakeManagedAndItsAliasesNeedNoAccountUserOrKey() {
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        runner.removeProperty(PutSnowflake.USER);
        runner.removeProperty(PutSnowflake.ACCOUNT_IDENTIFIER);
        runner.setProperty(PutSnowflake.URL_OVERRIDE, "https://127.0.0.1:8443");
        for (final String strategy : List.of("SNOWFLAKE_MANAGED", "SNOWFLAKE_MANAGED_TOKEN", "SNOWFLAKE_SESSION_TOKEN")) {
            runner.setProperty(PutSnowflake.AUTHENTICATION_STRATEGY, strategy);
            runner.assertValid();
        }
        runner.setProperty(PutSnowflake.AUTHENTICATION_STRATEGY, "KEY_PAIR");
        runner.setProperty(PutSnowflake.USER, "LOADER");
        assertProblem(runner, "Account Identifier", "is required when Authentication Strategy is KEY_PAIR");
    }

    /** The token file properties apply to every name of the managed strategy, with Openflow's paths. */
    @Test
    void tokenFilesDependOnEveryManagedNameWithOpenflowsDefaults() {
        assertEquals("/snowflake/serviceaccount/token", PutSnowflake.SERVICE_ACCOUNT_TOKEN_FILE.getDefaultValue());
        assertEquals("/snowflake/session/token", PutSnowflake.TOKEN_FILE.getDefaultValue());
        for (final PropertyDescriptor file : List.of(PutSnowflake.SERVICE_ACCOUNT_TOKEN_FILE, PutSnowflake.TOKEN_FILE)) {
            final Set<String> on = file.getDependencies().stream().flatMap(d -> d.getDependentValues().stream()).collect(Collectors.toSet());
            assertEquals(Set.of("SNOWFLAKE_MANAGED", "SNOWFLAKE_MANAGED_TOKEN", "SNOWFLAKE_SESSION_TOKEN"), on, file.getName());
        }
    }

    @Test
    void secretsAreSensitive() {
        assertTrue(PutSnowflake.PRIVATE_KEY.isSensitive());
        assertTrue(PutSnowflake.PRIVATE_KEY_PASSWORD.isSensitive());
    }

    @Test
    void javaDeclaresExactlyThePropertiesTheNativeRulesRead() {
        final Set<String> declared = PutSnowflake.PROPERTIES.stream().map(PropertyDescriptor::getName).collect(Collectors.toSet());
        assertEquals(Set.of(NativeBridge.propertyNames(NativeBridge.PUT_SNOWFLAKE)), declared);
    }

    /** Settings that start the engine without a key: a token file, and a Snowflake URL where nothing listens. */
    private void unreachableSnowflake(final Path dir) throws IOException {
        final Path token = Files.writeString(dir.resolve("token"), "not-a-real-token");
        runner.setProperty(PutSnowflake.AUTHENTICATION_STRATEGY, "SNOWFLAKE_MANAGED_TOKEN");
        runner.removeProperty(PutSnowflake.PRIVATE_KEY);
        runner.removeProperty(PutSnowflake.USER);
        runner.setProperty(PutSnowflake.TOKEN_FILE, token.toString());
        runner.setProperty(PutSnowflake.URL_OVERRIDE, "http://127.0.0.1:9");
    }

    @Test
    void contentThatIsNotJsonObjectsGoesToInvalidWithoutBeingSent(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.enqueue("42");
        runner.enqueue("{\"a\":1}\nnot json");
        runner.run(3);
        runner.assertTransferCount(PutSnowflake.REL_INVALID, 2);
        runner.assertTransferCount(PutSnowflake.REL_SUCCESS, 0);
        final var invalid = runner.getFlowFilesForRelationship(PutSnowflake.REL_INVALID);
        invalid.get(0).assertAttributeEquals("snowflake.error.message", "not sent: the content is a JSON number, not an object");
        assertTrue(invalid.get(1).getAttribute("snowflake.error.message").startsWith("not sent: line 2 is not JSON"));
    }

    @Test
    void flowFilesSnowflakeHasNotCommittedReturnToTheQueueOnStop(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.enqueue("{\"id\":1}");
        runner.enqueue("{\"id\":2}");
        runner.run(3); // submits, waits for outcomes that cannot come, then stops the processor
        runner.assertTransferCount(PutSnowflake.REL_SUCCESS, 0);
        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 0);
        assertEquals(2, runner.getQueueSize().getObjectCount(), "both FlowFiles are back in the queue");
        assertEquals(0, NativeTestSupport.openComponents(), "the engine is closed");
    }

    /**
     * A queue that hands newer FlowFiles out first and holds more than Max In-Flight Size: what is taken is each shard's
     * earliest records (which its channel can load now), not the newest ones (which would all wait for earlier ones,
     * holding the budget, and go back penalized: loading then moved on about once per Penalty Duration).
     */
    @Test
    void whenTheQueueHoldsMoreThanTheBudgetEachShardsEarliestRecordsAreTaken(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.setProperty(PutSnowflake.MAX_BATCH_SIZE, "1 MB");
        runner.setProperty(PutSnowflake.MAX_IN_FLIGHT_SIZE, "1 MB");
        final String pad = "x".repeat(100_000);
        for (int n = 14; n >= 0; n--) { // newest first, the two shards interleaved: 30 FlowFiles of ~100 KB
            for (final String shard : List.of("shardId-000000000000", "shardId-000000000001")) {
                final String sequence = String.format("4959%020d", n);
                runner.enqueue("{\"id\":" + n + ",\"pad\":\"" + pad + "\"}", Map.of(
                        "aws.kinesis.stream.name", "orders", "aws.kinesis.shard.id", shard,
                        "aws.kinesis.first.sequence.number", sequence, "aws.kinesis.last.sequence.number", sequence,
                        "record.count", "1", "kinesnow.previous.sequence.number", n == 0 ? "" : String.format("4959%020d", n - 1)));
            }
        }
        runner.run(1, false, true); // takes what the budget holds; Snowflake cannot be reached, so they stay taken
        final ProcessSession look = runner.getProcessSessionFactory().createSession();
        final List<FlowFile> left = look.get(100);
        look.rollback();
        runner.run(0, true, false);
        final Map<String, List<Integer>> leftByShard = left.stream().collect(Collectors.groupingBy(
                f -> f.getAttribute("aws.kinesis.shard.id"),
                Collectors.mapping(f -> Integer.parseInt(f.getAttribute("aws.kinesis.first.sequence.number").substring(4)),
                        Collectors.toList())));
        assertEquals(20, left.size(), "ten FlowFiles of ~100 KB fill 1 MB");
        for (final List<Integer> sequences : leftByShard.values()) {
            assertEquals(List.of(14, 13, 12, 11, 10, 9, 8, 7, 6, 5), sequences, "each shard's five earliest were taken");
        }
    }

    /** Openflow's PublishSnowpipeStreaming evaluates these four against each FlowFile; so does PutSnowflake. */
    @Test
    void destinationPropertiesTakeFlowFileAttributeExpressions() {
        for (final PropertyDescriptor p : List.of(PutSnowflake.DATABASE, PutSnowflake.SCHEMA, PutSnowflake.TABLE, PutSnowflake.PIPE)) {
            assertEquals(ExpressionLanguageScope.FLOWFILE_ATTRIBUTES, p.getExpressionLanguageScope(), p.getName());
            assertTrue(p.getDescription().contains("Expression Language"), p.getName());
        }
        runner.setProperty(PutSnowflake.DATABASE, "${db}");
        runner.setProperty(PutSnowflake.SCHEMA, "${schema:toUpper()}");
        runner.setProperty(PutSnowflake.TABLE, "EVENTS_${kind}");
        runner.assertValid();
        runner.setProperty(PutSnowflake.DESTINATION_TYPE, "PIPE");
        runner.setProperty(PutSnowflake.PIPE, "${pipe}");
        runner.assertValid();
    }

    /**
     * Each FlowFile's Table is evaluated against its attributes and crosses to the core, which sends an unusable name
     * to failure with the reason, while a usable one goes on (here its content has no rows, so it goes to empty; a
     * FlowFile that Snowflake would get keeps its session open, see flowFilesSnowflakeHasNotCommitted...). Before
     * Expression Language was supported, no FlowFile went to failure: all were bound for the table "${snowflake.table}".
     */
    @Test
    void aTableEvaluatedToAnEmptyOrBadNameGoesToFailureAndTheOthersGoOn(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.setProperty(PutSnowflake.TABLE, "${snowflake.table}");
        runner.enqueue("{\"id\":1}");
        runner.enqueue("{\"id\":2}", Map.of("snowflake.table", "BAD\u0007"));
        runner.enqueue("[]", Map.of("snowflake.table", "EVENTS"));
        runner.run(3);
        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 2);
        runner.assertTransferCount("empty", 1);
        final var failed = runner.getFlowFilesForRelationship(PutSnowflake.REL_FAILURE);
        final Set<String> messages = failed.stream().map(f -> f.getAttribute("snowflake.error.message")).collect(Collectors.toSet());
        assertEquals(Set.of(
                "Table evaluated to an empty value against the FlowFile's attributes; not sent",
                "Table evaluated to a name with a control character against the FlowFile's attributes; not sent"), messages);
        assertEquals(0, runner.getQueueSize().getObjectCount());
    }

    /**
     * Issue 15, defect 4: {@code []} used to reach the channel writer as a FlowFile without rows and kill it (with a
     * reachable Snowflake); a zero-byte FlowFile went to invalid. Before the fix this test failed: no relationship
     * named empty, and the FlowFiles stayed queued or went to invalid.
     */
    @Test
    void flowFilesWithoutRowsGoToEmptyWithoutBeingSent(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.enqueue("[]", Map.of("aws.kinesis.stream.name", "orders", "aws.kinesis.shard.id", "shardId-000000000000",
                "aws.kinesis.last.sequence.number", "4959", "record.count", "1"));
        runner.enqueue("");
        runner.enqueue(" \n\r\n");
        runner.run(3);
        runner.assertTransferCount("empty", 3);
        runner.assertTransferCount(PutSnowflake.REL_INVALID, 0);
        runner.getFlowFilesForRelationship("empty").forEach(f -> f.assertAttributeEquals("snowflake.rows.sent", "0"));
        assertEquals(0, runner.getQueueSize().getObjectCount());
    }

    @Test
    void theEmptyRelationshipIsAutoTerminatedByDefault() {
        assertTrue(PutSnowflake.REL_EMPTY.isAutoTerminated());
        assertTrue(runner.getProcessor().getRelationships().contains(PutSnowflake.REL_EMPTY));
    }

    /**
     * Issue 15, defect 5: standalone NiFis sharing a Channel Name Prefix shared channels (only cluster nodes got
     * their own). Every PutSnowflake now keeps its own id in its local state, made on the first start and reused on
     * every later one. Before the fix this test failed: nothing was kept in the local state.
     */
    @Test
    void eachInstanceKeepsItsOwnIdInLocalStateAcrossRestarts(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.run(1);
        final String first = runner.getStateManager().getState(Scope.LOCAL).get("instance.id");
        assertNotNull(first, "an instance id is kept");
        assertTrue(first.matches("[0-9a-f]{12}"), first);
        runner.run(1);
        assertEquals(first, runner.getStateManager().getState(Scope.LOCAL).get("instance.id"), "a restart reuses it");

        final TestRunner other = TestRunners.newTestRunner(PutSnowflake.class);
        other.setValidateExpressionUsage(false);
        runner.getProcessContext().getProperties().forEach((descriptor, value) -> {
            if (value != null) {
                other.setProperty(descriptor, value);
            }
        });
        other.run(1);
        assertNotEquals(first, other.getStateManager().getState(Scope.LOCAL).get("instance.id"), "another NiFi, another id");
    }

    @Test
    void anIdAlreadyKeptIsUsed(@TempDir final Path dir) throws IOException {
        unreachableSnowflake(dir);
        runner.getStateManager().setState(Map.of("instance.id", "kept0000abcd"), Scope.LOCAL);
        runner.run(1);
        assertEquals("kept0000abcd", runner.getStateManager().getState(Scope.LOCAL).get("instance.id"));
    }

    /**
     * "Verify Properties" crosses JNI as name/outcome/explanation triples: a key that is only PEM-shaped cannot sign,
     * so authentication fails (before any request) and every later step is skipped, saying why.
     */
    @Test
    void verificationStepsCrossTheBridgeInOrder() {
        final List<ConfigVerificationResult> steps = ((VerifiableProcessor) runner.getProcessor())
                .verify(runner.getProcessContext(), runner.getLogger(), Map.of());
        assertEquals(List.of("Snowflake Authentication", "Scoped Token", "Destination Pipe", "Table Columns", "Table Settings"),
                steps.stream().map(ConfigVerificationResult::getVerificationStepName).toList());
        assertEquals(ConfigVerificationResult.Outcome.FAILED, steps.get(0).getOutcome());
        assertTrue(steps.get(0).getExplanation().contains("not a usable RSA PKCS#8 key"), steps.get(0).getExplanation());
        assertTrue(steps.subList(1, steps.size()).stream().allMatch(s -> s.getOutcome() == ConfigVerificationResult.Outcome.SKIPPED));
    }
}
