package io.kinesnow.nifi.processors;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kinesnow.nifi.processors.KinesisBatchBytes.Entry;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.nifi.avro.AvroReader;
import org.apache.nifi.avro.AvroRecordSetWriter;
import org.apache.nifi.controller.AbstractControllerService;
import org.apache.nifi.json.JsonRecordSetWriter;
import org.apache.nifi.json.JsonTreeReader;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.reporting.InitializationException;
import org.apache.nifi.schema.access.SchemaAccessUtils;
import org.apache.nifi.serialization.RecordSetWriter;
import org.apache.nifi.serialization.RecordSetWriterFactory;
import org.apache.nifi.serialization.record.RecordSchema;
import org.apache.nifi.util.MockFlowFile;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static io.kinesnow.nifi.processors.ProcessorTestSupport.assertProblem;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Processing Strategy RECORD in the shim: NiFi's real JSON and Avro readers and writers over batches laid out as the
 * engine lays them out (one entry per Kinesis record), with a stand-in engine that checks every batch is settled.
 */
class ConsumeKinesisRecordTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String LINK = "arn:aws:kinesis:us-east-1:123456789012:stream/orders";

    @BeforeAll
    static void load() {
        NativeLibrary.require();
    }

    @Test
    void aShardsJsonRecordsGoIntoOneFlowFileWithTheWritersMimeTypeAndTheBatchIsAckedAfterCommit() throws Exception {
        final Stand stand = json(LINK, List.of(Entry.of(1, "{\"id\":1,\"name\":\"a\"}"), Entry.of(2, "{\"id\":2,\"name\":\"b\"}"),
                Entry.of(3, "[{\"id\":3,\"name\":\"c\"},{\"id\":4,\"name\":\"d\"}]")), "USE_VALUE");
        stand.runner.run(1);
        stand.runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 1);
        stand.runner.assertTransferCount(ConsumeKinesis.REL_PARSE_FAILURE, 0);
        final MockFlowFile out = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS).get(0);
        final JsonNode rows = JSON.readTree(out.toByteArray());
        assertEquals(4, rows.size());
        assertEquals("d", rows.get(3).get("name").asText());
        out.assertAttributeEquals("record.count", "4");
        out.assertAttributeEquals("mime.type", "application/json");
        out.assertAttributeEquals("aws.kinesis.shard.id", KinesisBatchBytes.SHARD);
        out.assertAttributeEquals("aws.kinesis.first.sequence.number", KinesisBatchBytes.sequence(1));
        out.assertAttributeEquals("aws.kinesis.last.sequence.number", KinesisBatchBytes.sequence(3));
        out.assertAttributeEquals("aws.kinesis.partition.key", "key-1");
        out.assertAttributeEquals("aws.kinesis.approximate.arrival.timestamp.ms", "1764000000001");
        out.assertAttributeEquals("kinesnow.lease.counter", "7");
        out.assertAttributeEquals("kinesnow.previous.sequence.number", ""); // none before: read from the shard's start
        assertEquals(List.of("poll 1", "ack 1"), stand.engine.calls);
    }

    @Test
    void aSchemaChangeStartsANewFlowFileWhoseFirstRecordNamesTheOneBefore() throws Exception {
        final Stand stand = json(LINK, List.of(Entry.of(1, "{\"id\":1}"), Entry.of(2, "{\"id\":2}"),
                Entry.of(3, "{\"id\":3,\"extra\":\"x\"}"), Entry.of(4, "{\"id\":4,\"extra\":\"y\"}")), "USE_VALUE");
        stand.runner.run(1);
        final List<MockFlowFile> out = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        assertEquals(2, out.size());
        out.get(0).assertAttributeEquals("record.count", "2");
        out.get(0).assertAttributeEquals("aws.kinesis.last.sequence.number", KinesisBatchBytes.sequence(2));
        out.get(1).assertAttributeEquals("record.count", "2");
        out.get(1).assertAttributeEquals("aws.kinesis.first.sequence.number", KinesisBatchBytes.sequence(3));
        out.get(1).assertAttributeEquals("kinesnow.previous.sequence.number", KinesisBatchBytes.sequence(2));
        out.get(1).assertAttributeEquals("aws.kinesis.partition.key", "key-3");
        assertEquals("x", JSON.readTree(out.get(1).toByteArray()).get(0).get("extra").asText());
    }

    @Test
    void aMalformedKinesisRecordGoesToParseFailureWholeAndTheOthersGoOn() throws Exception {
        final String malformed = "[{\"id\":2},{\"id\":";
        final Stand stand = json("", List.of(Entry.of(1, "{\"id\":1}"), Entry.of(2, malformed), Entry.of(3, "{\"id\":3}"),
                Entry.of(4, "[]")), "INJECT_METADATA");
        stand.runner.run(1);
        final List<MockFlowFile> failures = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_PARSE_FAILURE);
        assertEquals(2, failures.size(), "the malformed record, and the one that holds no record");
        failures.get(0).assertContentEquals(malformed);
        failures.get(0).assertAttributeEquals("aws.kinesis.first.sequence.number", KinesisBatchBytes.sequence(2));
        failures.get(0).assertAttributeEquals("record.count", "1");
        assertTrue(failures.get(0).getAttribute("record.error.message").contains("Record Reader could not read"),
                failures.get(0).getAttribute("record.error.message"));
        failures.get(0).assertAttributeNotExists("mime.type");
        failures.get(1).assertContentEquals("[]");
        assertTrue(failures.get(1).getAttribute("record.error.message").contains("no record"));
        final List<MockFlowFile> out = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        assertEquals(2, out.size(), "a FlowFile holds an unbroken run of Kinesis records");
        final List<Integer> ids = new ArrayList<>();
        for (final MockFlowFile flowFile : out) {
            JSON.readTree(flowFile.toByteArray()).forEach(row -> ids.add(row.get("id").asInt()));
        }
        assertEquals(List.of(1, 3), ids, "nothing of the malformed record is written, not even its first object");
        assertEquals(2, stand.runner.getCounterValue("Records Consumed"));
        assertEquals(2, stand.runner.getCounterValue("Records Parse Failure"));
        assertEquals(List.of("poll 1", "skipped 1", "ack 1"), stand.engine.calls,
                "no link, yet PutSnowflake's order must pass over the malformed record, before the commit");
        assertEquals(1, stand.engine.skipped.size());
    }

    @Test
    void withALinkTheKinesisRecordsTheReaderCannotReadAreReportedOncePerBatchBeforeTheCommit() throws Exception {
        final Entry aggregated = new Entry(KinesisBatchBytes.sequence(5), 2, KinesisBatchBytes.sequence(5), 1, "key-5",
                1_764_000_000_005L, "{\"id\":".getBytes(StandardCharsets.UTF_8));
        final Entry afterAggregated = new Entry(KinesisBatchBytes.sequence(6), -1, KinesisBatchBytes.sequence(5), 2, "key-6",
                1_764_000_000_006L, "{\"id\":6}".getBytes(StandardCharsets.UTF_8));
        final Stand stand = json(LINK, List.of(Entry.of(1, "{\"id\":1}"), Entry.of(2, "{\"id\":"), Entry.of(3, "{\"id\":3}"),
                Entry.of(4, "[]"), aggregated, afterAggregated), "INJECT_METADATA");
        stand.runner.run(1);
        stand.runner.assertTransferCount(ConsumeKinesis.REL_PARSE_FAILURE, 3);
        assertEquals(List.of("poll 1", "skipped 1", "ack 1"), stand.engine.calls, "one call for the batch, before the commit");
        final String shard = KinesisBatchBytes.SHARD;
        assertEquals(List.of(
                new Skip(shard, 7, KinesisBatchBytes.sequence(1), -1, KinesisBatchBytes.sequence(2), -1),
                new Skip(shard, 7, KinesisBatchBytes.sequence(3), -1, KinesisBatchBytes.sequence(4), -1),
                new Skip(shard, 7, KinesisBatchBytes.sequence(5), 1, KinesisBatchBytes.sequence(5), 2)),
                Skip.decode(stand.engine.skipped.get(0)));
        final List<MockFlowFile> out = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        out.get(1).assertAttributeEquals("kinesnow.previous.sequence.number", KinesisBatchBytes.sequence(2));
        out.get(2).assertAttributeEquals("kinesnow.previous.sequence.number", KinesisBatchBytes.sequence(5));
        out.get(2).assertAttributeEquals("kinesnow.previous.subsequence.number", "2");
    }

    @Test
    void withALinkABatchWhoseRecordsAllReadReportsNothing() throws Exception {
        final Stand stand = json(LINK, List.of(Entry.of(1, "{\"id\":1}"), Entry.of(2, "{\"id\":2}")), "USE_WRAPPER");
        stand.runner.run(1);
        assertEquals(List.of("poll 1", "ack 1"), stand.engine.calls);
    }

    /** One entry of {@code SkippedRecords}' layout (rust-core/src/ffi/skips.rs), read back. */
    private record Skip(String shard, long tenure, String previous, long previousSub, String last, long lastSub) {
        static List<Skip> decode(final byte[] bytes) {
            final ByteBuffer in = ByteBuffer.wrap(bytes);
            assertEquals(0x4B4E5331, in.getInt(), "KNS1");
            final int count = in.getInt();
            final List<Skip> skips = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                skips.add(new Skip(str16(in), in.getLong(), str16(in), in.getLong(), str16(in), in.getLong()));
            }
            assertFalse(in.hasRemaining());
            return skips;
        }

        private static String str16(final ByteBuffer in) {
            final byte[] utf8 = new byte[Short.toUnsignedInt(in.getShort())];
            in.get(utf8);
            return new String(utf8, StandardCharsets.UTF_8);
        }
    }

    @Test
    void aStreamNamedByItsArnGivesItsNameToKinesisMetadataAndTheAttribute() throws Exception {
        final Stand stand = json("", List.of(Entry.of(1, "{\"id\":1}")), "INJECT_METADATA");
        stand.runner.setProperty(ConsumeKinesis.STREAM_NAME, "arn:aws:kinesis:us-east-1:210987654321:stream/orders");
        stand.runner.assertValid();
        stand.runner.run(1);
        final MockFlowFile out = stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS).get(0);
        assertEquals("orders", JSON.readTree(out.toByteArray()).get(0).get("kinesisMetadata").get("stream").asText());
        out.assertAttributeEquals("aws.kinesis.stream.name", "orders");
    }

    @Test
    void aStreamArnOfAnotherRegionIsInvalid() throws Exception {
        final Stand stand = json("", List.of(Entry.of(1, "{\"id\":1}")), "INJECT_METADATA");
        stand.runner.setProperty(ConsumeKinesis.STREAM_NAME, "arn:aws:kinesis:eu-west-1:210987654321:stream/orders");
        assertProblem(stand.runner, "Stream Name", "region 'eu-west-1' is not the Region 'us-east-1'");
    }

    @Test
    void injectMetadataAddsNiFisKinesisMetadataFields() throws Exception {
        final Entry aggregated = new Entry(KinesisBatchBytes.sequence(9), 3, KinesisBatchBytes.sequence(8), 2, "pk-é",
                1_764_000_000_123L, "{\"id\":9}".getBytes(StandardCharsets.UTF_8));
        final Stand stand = json("", List.of(Entry.of(1, "{\"id\":1}"), aggregated), "INJECT_METADATA");
        stand.runner.run(1);
        final JsonNode rows = JSON.readTree(stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS).get(0).toByteArray());
        final JsonNode plain = rows.get(0).get("kinesisMetadata");
        assertEquals(List.of("stream", "shardId", "sequenceNumber", "subSequenceNumber", "shardedSequenceNumber",
                "partitionKey", "approximateArrival"), fieldNames(plain));
        assertEquals("orders", plain.get("stream").asText());
        assertEquals(KinesisBatchBytes.SHARD, plain.get("shardId").asText());
        assertEquals(0, plain.get("subSequenceNumber").asLong(), "not aggregated: 0, as NiFi's (the KCL's)");
        assertEquals(KinesisBatchBytes.sequence(1) + "00000000000000000000", plain.get("shardedSequenceNumber").asText());
        final JsonNode kpl = rows.get(1).get("kinesisMetadata");
        assertEquals(9, rows.get(1).get("id").asInt());
        assertEquals(3, kpl.get("subSequenceNumber").asLong());
        assertTrue(kpl.get("subSequenceNumber").isIntegralNumber());
        assertEquals(KinesisBatchBytes.sequence(9) + "00000000000000000003", kpl.get("shardedSequenceNumber").asText());
        assertEquals("pk-é", kpl.get("partitionKey").asText());
        assertTrue(kpl.get("approximateArrival").isIntegralNumber(), kpl.toString());
        assertEquals(1_764_000_000_123L, kpl.get("approximateArrival").asLong(), "epoch milliseconds, as the JSON strategies write");
        assertTrue(plain.get("sequenceNumber").isTextual() && kpl.get("shardedSequenceNumber").isTextual());
    }

    @Test
    void useWrapperWritesTheMetadataAndTheRecordAsValue() throws Exception {
        final Stand stand = json("", List.of(Entry.of(1, "{\"id\":1,\"tags\":[\"a\"]}")), "USE_WRAPPER");
        stand.runner.run(1);
        final JsonNode row = JSON.readTree(stand.runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS).get(0).toByteArray()).get(0);
        assertEquals(List.of("kinesisMetadata", "value"), fieldNames(row), "NiFi's wrapper: metadata first");
        assertEquals("a", row.get("value").get("tags").get(0).asText());
        assertEquals(KinesisBatchBytes.sequence(1), row.get("kinesisMetadata").get("sequenceNumber").asText());
    }

    @Test
    void avroRecordsReadWithASchemaTextCarryTheMetadataSchemaExactly() throws Exception {
        final Schema schema = new Schema.Parser().parse("{\"type\":\"record\",\"name\":\"Order\",\"fields\":["
                + "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"item\",\"type\":\"string\"}]}");
        final byte[] good1 = avro(schema, 1, "tea");
        final byte[] good2 = avro(schema, 2, "cake");
        final byte[] cut = Arrays.copyOf(good2, 2);
        final OneShardEngine engine = new OneShardEngine(KinesisBatchBytes.oneShard("", 0,
                List.of(Entry.of(1, good1), Entry.of(2, cut), Entry.of(3, good2))));
        final TestRunner runner = runner(engine, "INJECT_METADATA");
        final AvroReader reader = new AvroReader();
        runner.addControllerService("reader", reader);
        runner.setProperty(reader, SchemaAccessUtils.SCHEMA_ACCESS_STRATEGY, SchemaAccessUtils.SCHEMA_TEXT_PROPERTY);
        runner.setProperty(reader, SchemaAccessUtils.SCHEMA_TEXT, schema.toString());
        runner.enableControllerService(reader);
        final AvroRecordSetWriter writer = new AvroRecordSetWriter();
        runner.addControllerService("writer", writer);
        runner.enableControllerService(writer);
        useServices(runner);
        runner.run(1);

        final List<MockFlowFile> failures = runner.getFlowFilesForRelationship(ConsumeKinesis.REL_PARSE_FAILURE);
        assertEquals(1, failures.size());
        assertArrayEquals(cut, failures.get(0).toByteArray());
        final List<MockFlowFile> out = runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS);
        assertEquals(2, out.size());
        out.get(0).assertAttributeEquals("mime.type", "application/avro-binary");
        final List<GenericRecord> rows = new ArrayList<>();
        Schema written = null;
        for (final MockFlowFile flowFile : out) {
            try (DataFileStream<GenericRecord> in = new DataFileStream<>(new ByteArrayInputStream(flowFile.toByteArray()),
                    new GenericDatumReader<>())) {
                written = in.getSchema();
                in.forEach(rows::add);
            }
        }
        assertEquals(List.of("tea", "cake"), rows.stream().map(r -> r.get("item").toString()).toList());
        final Schema metadata = nonNull(written.getField("kinesisMetadata").schema());
        assertEquals(List.of("stream:string", "shardId:string", "sequenceNumber:string", "subSequenceNumber:long",
                "shardedSequenceNumber:string", "partitionKey:string", "approximateArrival:long/timestamp-millis"),
                metadata.getFields().stream().map(f -> f.name() + ":" + typeName(nonNull(f.schema()))).toList());
        final GenericRecord meta = (GenericRecord) rows.get(1).get("kinesisMetadata");
        assertEquals(KinesisBatchBytes.sequence(3), meta.get("sequenceNumber").toString());
        assertEquals(1_764_000_000_003L, ((Number) meta.get("approximateArrival")).longValue());
        assertEquals(List.of("poll 1", "skipped 1", "ack 1"), engine.calls);
    }

    @Test
    void aWriterThatFailsRollsBackAndTheBatchIsReadAgain() throws Exception {
        final OneShardEngine engine = new OneShardEngine(KinesisBatchBytes.oneShard("", 0,
                List.of(Entry.of(1, "{\"id\":1}"), Entry.of(2, "{\"id\":2}"))));
        final TestRunner runner = runner(engine, "USE_VALUE");
        addJsonReader(runner);
        final FailingWriter failing = new FailingWriter();
        runner.addControllerService("writer", failing);
        runner.enableControllerService(failing);
        useServices(runner);
        assertThrows(AssertionError.class, () -> runner.run(1));
        assertEquals(List.of("poll 1", "nack 1"), engine.calls);
        runner.assertTransferCount(ConsumeKinesis.REL_SUCCESS, 0);
        runner.assertTransferCount(ConsumeKinesis.REL_PARSE_FAILURE, 0);

        final JsonRecordSetWriter writer = new JsonRecordSetWriter();
        runner.addControllerService("json-writer", writer);
        runner.enableControllerService(writer);
        runner.setProperty(ConsumeKinesis.RECORD_WRITER, "json-writer");
        runner.run(1);
        assertEquals(List.of("poll 1", "nack 1", "poll 2", "ack 2"), engine.calls);
        runner.getFlowFilesForRelationship(ConsumeKinesis.REL_SUCCESS).get(0).assertAttributeEquals("record.count", "2");
    }

    /** The processor with a stand-in engine, NiFi's JSON reader (schema inference) and writer. */
    private static Stand json(final String link, final List<Entry> entries, final String output) throws InitializationException {
        final OneShardEngine engine = new OneShardEngine(KinesisBatchBytes.oneShard(link, 7, entries));
        final TestRunner runner = runner(engine, output);
        addJsonReader(runner);
        final JsonRecordSetWriter writer = new JsonRecordSetWriter();
        runner.addControllerService("writer", writer);
        runner.enableControllerService(writer);
        useServices(runner);
        return new Stand(engine, runner);
    }

    private record Stand(OneShardEngine engine, TestRunner runner) {
    }

    private static TestRunner runner(final OneShardEngine engine, final String output) {
        final TestRunner runner = TestRunners.newTestRunner(new ConsumeKinesis(engine));
        runner.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        runner.setProperty(ConsumeKinesis.REGION, "us-east-1");
        runner.setProperty(ConsumeKinesis.PROCESSING_STRATEGY, "RECORD");
        runner.setProperty(ConsumeKinesis.OUTPUT_STRATEGY, output);
        return runner;
    }

    private static void addJsonReader(final TestRunner runner) throws InitializationException {
        final JsonTreeReader reader = new JsonTreeReader();
        runner.addControllerService("reader", reader);
        runner.enableControllerService(reader);
    }

    private static void useServices(final TestRunner runner) {
        runner.setProperty(ConsumeKinesis.RECORD_READER, "reader");
        runner.setProperty(ConsumeKinesis.RECORD_WRITER, "writer");
        runner.assertValid();
    }

    private static List<String> fieldNames(final JsonNode node) {
        final List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names;
    }

    private static byte[] avro(final Schema schema, final long id, final String item) throws IOException {
        final GenericRecord record = new GenericData.Record(schema);
        record.put("id", id);
        record.put("item", item);
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(schema).write(record, encoder);
        encoder.flush();
        return out.toByteArray();
    }

    private static Schema nonNull(final Schema schema) {
        if (schema.getType() != Schema.Type.UNION) {
            return schema;
        }
        return schema.getTypes().stream().filter(s -> s.getType() != Schema.Type.NULL).findFirst().orElseThrow();
    }

    private static String typeName(final Schema schema) {
        final String type = schema.getType().getName();
        return schema.getLogicalType() == null ? type : type + "/" + schema.getLogicalType().getName();
    }

    /** A Record Writer whose every write fails, as one does when its disk is full. */
    private static final class FailingWriter extends AbstractControllerService implements RecordSetWriterFactory {
        @Override
        public RecordSchema getSchema(final Map<String, String> variables, final RecordSchema readSchema) {
            return readSchema;
        }

        @Override
        public RecordSetWriter createWriter(final ComponentLog logger, final RecordSchema schema, final OutputStream out,
                                            final Map<String, String> variables) throws IOException {
            throw new IOException("No space left on device");
        }
    }
}
