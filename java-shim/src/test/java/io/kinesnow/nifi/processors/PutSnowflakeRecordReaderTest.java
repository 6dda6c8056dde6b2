package io.kinesnow.nifi.processors;

import org.apache.avro.Conversions;
import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.nifi.avro.AvroReader;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.csv.CSVReader;
import org.apache.nifi.csv.CSVUtils;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.json.JsonTreeReader;
import org.apache.nifi.reporting.InitializationException;
import org.apache.nifi.schema.access.SchemaAccessUtils;
import org.apache.nifi.serialization.RecordReaderFactory;
import org.apache.nifi.util.MockFlowFile;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * PutSnowflake's Record Reader with NiFi's real CSVReader, AvroReader and JsonTreeReader: what each FlowFile becomes
 * (the rows handed to the engine, {@link RecordContent}) and where the records that cannot become rows go.
 */
class PutSnowflakeRecordReaderTest {
    private static final String PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";
    private static final String ORDER_SCHEMA = "{\"type\":\"record\",\"name\":\"order\",\"fields\":["
            + "{\"name\":\"id\",\"type\":\"int\"},{\"name\":\"item\",\"type\":\"string\"}]}";
    private static final RecordRows HEX = new RecordRows(BinaryEncoding.HEX);

    private TestRunner runner;

    @BeforeEach
    void setUp(@TempDir final Path dir) throws IOException {
        runner = TestRunners.newTestRunner(PutSnowflake.class);
        runner.setValidateExpressionUsage(false);
        final Path token = Files.writeString(dir.resolve("token"), "not-a-real-token");
        runner.setProperty(PutSnowflake.AUTHENTICATION_STRATEGY, "SNOWFLAKE_MANAGED");
        runner.setProperty(PutSnowflake.TOKEN_FILE, token.toString());
        runner.setProperty(PutSnowflake.URL_OVERRIDE, "http://127.0.0.1:9"); // nothing listens: rows are never committed
        runner.setProperty(PutSnowflake.DATABASE, "RAW");
        runner.setProperty(PutSnowflake.SCHEMA, "KINESIS");
        // An empty table name sends a FlowFile with rows to failure at once, before it would wait on Snowflake, so that
        // the session commits and its invalid copy can be seen; FlowFiles without rows never get that far.
        runner.setProperty(PutSnowflake.TABLE, "${table}");
    }

    private RecordReaderFactory use(final ControllerService reader, final Map<String, String> properties) throws InitializationException {
        runner.addControllerService("reader", reader);
        properties.forEach((k, v) -> runner.setProperty(reader, k, v));
        runner.enableControllerService(reader);
        runner.setProperty(PutSnowflake.RECORD_READER, "reader");
        return (RecordReaderFactory) reader;
    }

    private RecordReaderFactory csvWithSchema() throws InitializationException {
        return use(new CSVReader(), Map.of(SchemaAccessUtils.SCHEMA_ACCESS_STRATEGY.getName(), SchemaAccessUtils.SCHEMA_TEXT_PROPERTY.getValue(),
                SchemaAccessUtils.SCHEMA_TEXT.getName(), ORDER_SCHEMA, CSVUtils.FIRST_LINE_IS_HEADER.getName(), "true"));
    }

    private RecordContent.Read read(final RecordReaderFactory reader, final byte[] content) {
        final MockFlowFile flowFile = new MockFlowFile(1);
        flowFile.setData(content);
        return RecordContent.read(reader, HEX, flowFile, new ByteArrayInputStream(content), runner.getLogger());
    }

    private static String text(final byte[] rows) {
        return new String(rows, StandardCharsets.UTF_8);
    }

    @Test
    void theRecordReaderIsOptionalAndBinaryEncodingDependsOnIt() {
        assertFalse(PutSnowflake.RECORD_READER.isRequired());
        assertEquals("Record Reader", PutSnowflake.RECORD_READER.getName());
        assertEquals("Binary Encoding", PutSnowflake.BINARY_ENCODING.getName());
        assertEquals("HEX", PutSnowflake.BINARY_ENCODING.getDefaultValue());
        assertTrue(PutSnowflake.DESCRIPTORS.containsAll(List.of(PutSnowflake.RECORD_READER, PutSnowflake.BINARY_ENCODING)));
        assertFalse(PutSnowflake.PROPERTIES.contains(PutSnowflake.RECORD_READER), "the engine never reads it");
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
        runner.assertValid();
    }

    @Test
    void csvRecordsBecomeNdjsonRows() throws Exception {
        final RecordContent.Read read = read(csvWithSchema(), "id,item\n1,apple\n2,\"pear, green\"\n".getBytes(StandardCharsets.UTF_8));
        assertEquals("{\"id\":1,\"item\":\"apple\"}\n{\"id\":2,\"item\":\"pear, green\"}\n", text(read.rows()));
        assertEquals(2, read.rowCount());
        assertTrue(read.problems().isEmpty());
        assertFalse(read.wholeInvalid());
    }

    /** A CSV value that does not fit the schema: the reader rejects that line and goes on with the next. */
    @Test
    void aCsvLineTheReaderRejectsIsNotedAndReadingGoesOn() throws Exception {
        final RecordContent.Read read = read(csvWithSchema(), "id,item\n1,apple\nnot-a-number,pear\n3,plum\n".getBytes(StandardCharsets.UTF_8));
        assertEquals("{\"id\":1,\"item\":\"apple\"}\n{\"id\":3,\"item\":\"plum\"}\n", text(read.rows()));
        assertEquals(1, read.problems().size(), read.problems().toString());
        assertEquals(2, read.problems().get(0).index());
        assertEquals(0, read.stoppedAt());
        assertEquals("2", read.indexes());
    }

    @Test
    void aCsvFlowFileWithABadRecordSendsACopyToInvalidAndCarriesTheOthersOn() throws Exception {
        csvWithSchema();
        final String content = "id,item\n1,apple\nnot-a-number,pear\n3,plum\n";
        runner.enqueue(content);
        runner.run(1);
        final MockFlowFile invalid = runner.getFlowFilesForRelationship(PutSnowflake.REL_INVALID).get(0);
        final MockFlowFile parent = runner.getFlowFilesForRelationship(PutSnowflake.REL_FAILURE).get(0);
        invalid.assertContentEquals(content);
        invalid.assertAttributeEquals("snowflake.records.invalid", "2");
        invalid.assertAttributeEquals("snowflake.records.sent", "2");
        invalid.assertAttributeNotExists("snowflake.records.unread");
        final String message = invalid.getAttribute("snowflake.error.message");
        assertTrue(message.startsWith("1 record(s) could not become rows and were not loaded: record 2: the Record Reader rejected it: "), message);
        assertTrue(message.endsWith("The other 2 record(s) were sent with FlowFile " + parent.getAttribute("uuid")), message);
        parent.assertAttributeEquals("snowflake.records.invalid", "2");
        assertEquals("Table evaluated to an empty value against the FlowFile's attributes; not sent",
                parent.getAttribute("snowflake.error.message"), "the parent went on to the engine with its rows");
    }

    @Test
    void aFlowFileNoRecordOfWhichCanBeReadGoesToInvalidWhole() throws Exception {
        csvWithSchema();
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
        runner.enqueue("id,item\nx,apple\ny,pear\n");
        runner.run(1);
        runner.assertAllFlowFilesTransferred(PutSnowflake.REL_INVALID, 1);
        final MockFlowFile whole = runner.getFlowFilesForRelationship(PutSnowflake.REL_INVALID).get(0);
        whole.assertContentEquals("id,item\nx,apple\ny,pear\n");
        whole.assertAttributeEquals("snowflake.records.invalid", "1,2");
        assertTrue(whole.getAttribute("snowflake.error.message").startsWith(
                "not sent: 2 record(s) could not become rows and were not loaded: record 1: "), whole.getAttribute("snowflake.error.message"));
    }

    @Test
    void aFlowFileTheReaderCannotStartOnGoesToInvalidWhole() throws Exception {
        use(new AvroReader(), Map.of());
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
        runner.enqueue("this is not an Avro data file");
        runner.run(1);
        runner.assertAllFlowFilesTransferred(PutSnowflake.REL_INVALID, 1);
        final MockFlowFile whole = runner.getFlowFilesForRelationship(PutSnowflake.REL_INVALID).get(0);
        whole.assertContentEquals("this is not an Avro data file");
        assertTrue(whole.getAttribute("snowflake.error.message").startsWith("not sent: the Record Reader cannot read the FlowFile: "),
                whole.getAttribute("snowflake.error.message"));
    }

    @Test
    void aFlowFileOfNoRecordsIsEmpty() throws Exception {
        csvWithSchema();
        runner.setProperty(PutSnowflake.TABLE, "EVENTS");
        runner.enqueue("id,item\n");
        runner.run(1);
        runner.assertAllFlowFilesTransferred(PutSnowflake.REL_EMPTY, 1);
    }

    private static final String AVRO_SCHEMA = "{\"type\":\"record\",\"name\":\"event\",\"fields\":["
            + "{\"name\":\"id\",\"type\":\"long\"},"
            + "{\"name\":\"amount\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":38,\"scale\":0}},"
            + "{\"name\":\"at\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
            + "{\"name\":\"day\",\"type\":{\"type\":\"int\",\"logicalType\":\"date\"}},"
            + "{\"name\":\"clock\",\"type\":{\"type\":\"int\",\"logicalType\":\"time-millis\"}},"
            + "{\"name\":\"raw\",\"type\":\"bytes\"},"
            + "{\"name\":\"score\",\"type\":\"double\"},"
            + "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
            + "{\"name\":\"attrs\",\"type\":{\"type\":\"map\",\"values\":\"int\"}},"
            + "{\"name\":\"kind\",\"type\":{\"type\":\"enum\",\"name\":\"kind\",\"symbols\":[\"A\",\"B\"]}},"
            + "{\"name\":\"inner\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"inner\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}]},"
            + "{\"name\":\"either\",\"type\":[\"int\",\"string\"]}]}";
    private static final String DIGITS_38 = "12345678901234567890123456789012345678";

    /** An Avro data file of {@code count} events in blocks of about {@code syncInterval} bytes; event 2's score is {@code score2}. */
    private static byte[] avro(final int count, final int syncInterval, final double score2) throws IOException {
        final Schema schema = new Schema.Parser().parse(AVRO_SCHEMA);
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DataFileWriter<GenericRecord> writer = new DataFileWriter<>(new GenericDatumWriter<>(schema))) {
            writer.setSyncInterval(syncInterval);
            writer.create(schema, out);
            for (int i = 1; i <= count; i++) {
                writer.append(event(schema, i, i == 2 ? score2 : 0.5));
            }
        }
        return out.toByteArray();
    }

    private static GenericRecord event(final Schema schema, final int id, final double score) {
        final GenericRecord r = new GenericData.Record(schema);
        final Schema amount = schema.getField("amount").schema();
        r.put("id", (long) id);
        r.put("amount", new Conversions.DecimalConversion().toBytes(new BigDecimal(DIGITS_38), amount, LogicalTypes.decimal(38, 0)));
        r.put("at", 1_700_000_000_123L);
        r.put("day", 19_000);
        r.put("clock", 3_723_004);
        r.put("raw", ByteBuffer.wrap(new byte[] {(byte) 0xca, (byte) 0xfe}));
        r.put("score", score);
        r.put("tags", List.of("a", "b"));
        r.put("attrs", Map.of("k", 1));
        r.put("kind", new GenericData.EnumSymbol(schema.getField("kind").schema(), "B"));
        final Schema inner = schema.getField("inner").schema().getTypes().get(1);
        final GenericRecord in = new GenericData.Record(inner);
        in.put("x", id);
        r.put("inner", id % 2 == 0 ? null : in);
        r.put("either", id % 2 == 0 ? (Object) "two" : (Object) id);
        return r;
    }

    @Test
    void avroRecordsBecomeRowsWithExactDecimalsAndIsoTimes() throws Exception {
        final RecordContent.Read read = read(use(new AvroReader(), Map.of()), avro(2, 1 << 16, 0.25));
        final String[] lines = text(read.rows()).split("\n");
        assertEquals(2, lines.length);
        assertEquals("{\"id\":1,\"amount\":\"" + DIGITS_38 + "\",\"at\":\"2023-11-14T22:13:20.123Z\",\"day\":\"2022-01-08\","
                + "\"clock\":\"01:02:03.004\",\"raw\":\"cafe\",\"score\":0.5,\"tags\":[\"a\",\"b\"],\"attrs\":{\"k\":1},\"kind\":\"B\","
                + "\"inner\":{\"x\":1},\"either\":1}", lines[0]);
        assertTrue(lines[1].endsWith("\"score\":0.25,\"tags\":[\"a\",\"b\"],\"attrs\":{\"k\":1},\"kind\":\"B\",\"inner\":null,\"either\":\"two\"}"), lines[1]);
        assertTrue(read.problems().isEmpty());
    }

    @Test
    void anAvroRecordThatCannotBecomeARowIsNotedAndTheOthersAreRows() throws Exception {
        final RecordContent.Read read = read(use(new AvroReader(), Map.of()), avro(3, 1 << 16, Double.NaN));
        assertEquals(2, read.rowCount());
        assertEquals(List.of(new RecordContent.Problem(2, "field 'score' is NaN, which JSON cannot hold")), read.problems());
        assertTrue(text(read.rows()).startsWith("{\"id\":1,"));
        assertTrue(text(read.rows()).contains("\n{\"id\":3,"));
    }

    /** Corruption inside an Avro data file: reading cannot go past it, so what follows is not loaded, and said so. */
    @Test
    void corruptAvroStopsReadingAndTheCopyToInvalidSaysTheRestWasNotRead() throws Exception {
        final byte[] content = avro(40, 64, 0.5);
        final byte[] corrupt = Arrays.copyOf(content, content.length);
        for (int i = corrupt.length / 2; i < corrupt.length / 2 + 40; i++) {
            corrupt[i] = (byte) 0xff;
        }
        final RecordReaderFactory reader = use(new AvroReader(), Map.of());
        final RecordContent.Read read = read(reader, corrupt);
        assertTrue(read.rowCount() > 0 && read.rowCount() < 40, "rows before the corruption: " + read.rowCount());
        assertEquals(2, read.problems().size(), "the failing record and the next, which fails too: " + read.problems());
        assertEquals(read.rowCount() + 2, read.stoppedAt());
        assertTrue(read.reason().contains("Reading stopped at record " + read.stoppedAt() + ": the content after it was not read"), read.reason());

        runner.enqueue(corrupt);
        runner.run(1);
        final MockFlowFile invalid = runner.getFlowFilesForRelationship(PutSnowflake.REL_INVALID).get(0);
        assertArrayEquals(corrupt, invalid.toByteArray(), "the original bytes, whole");
        invalid.assertAttributeEquals("snowflake.records.unread", "true");
        invalid.assertAttributeEquals("snowflake.records.sent", Long.toString(read.rowCount()));
        runner.assertTransferCount(PutSnowflake.REL_FAILURE, 1);
    }

    @Test
    void jsonTreeReaderRecordsAreRowsAndTheirKinesisMetadataIsKept() throws Exception {
        final String line = "{\"id\":1,\"kinesisMetadata\":{\"stream\":\"orders\",\"shardId\":\"shardId-000000000001\","
                + "\"shardedSequenceNumber\":\"495900000000000000000000\",\"subSequenceNumber\":0}}";
        final RecordContent.Read read = read(use(new JsonTreeReader(), Map.of()), (line + "\n" + line.replace("\"id\":1", "\"id\":2")).getBytes(StandardCharsets.UTF_8));
        assertEquals(line + "\n" + line.replace("\"id\":1", "\"id\":2") + "\n", text(read.rows()));
        assertNull(read.unreadable());
    }

    /** JsonTreeReader inferring its schema reads the whole content first: a syntax error anywhere makes it all invalid. */
    @Test
    void jsonTreeReaderWithASyntaxErrorMakesTheFlowFileInvalidWhole() throws Exception {
        final RecordContent.Read read = read(use(new JsonTreeReader(), Map.of()),
                "{\"id\":1}\n{\"id\":oops}\n{\"id\":3}\n".getBytes(StandardCharsets.UTF_8));
        assertEquals(0, read.rowCount());
        assertTrue(read.wholeInvalid(), read.reason());
    }

    /** Two CSV lines in a row that the reader rejects: it is taken not to get past them, so reading stops. */
    @Test
    void twoRejectedRecordsInARowStopReading() throws Exception {
        final RecordContent.Read read = read(csvWithSchema(), "id,item\n1,a\nx,b\ny,c\n4,d\n".getBytes(StandardCharsets.UTF_8));
        assertEquals("{\"id\":1,\"item\":\"a\"}\n", text(read.rows()));
        assertEquals(3, read.stoppedAt());
        assertEquals("2,3", read.indexes());
    }

    /**
     * The in-flight budget counts the rows that cross to the engine, not the FlowFiles' size: Avro FlowFiles whose JSON rows
     * are several times their size are taken only until their rows fill Max In-Flight Size (the first always).
     */
    @Test
    void theInFlightBudgetCountsTheRowsMadeFromRecordsNotTheFlowFileSize() throws Exception {
        final RecordReaderFactory reader = use(new AvroReader(), Map.of());
        runner.setProperty(PutSnowflake.MAX_BATCH_SIZE, "1 MB");
        runner.setProperty(PutSnowflake.MAX_IN_FLIGHT_SIZE, "1 MB");
        final byte[] content = avro(5_000, 1 << 16, 0.5);
        final int rows = read(reader, content).rows().length;
        assertTrue(3L * content.length < 1 << 20, "three FlowFiles fit the budget by their size: " + content.length);
        assertTrue(rows > 1 << 20, "one FlowFile's rows fill it: " + rows);
        for (int i = 0; i < 3; i++) {
            runner.enqueue(content);
        }
        runner.run(1);
        assertEquals(2, runner.getQueueSize().getObjectCount(), "one FlowFile taken, whose rows filled the budget");
    }

    /**
     * The queue holds more than Max In-Flight Size and hands newer FlowFiles out first: each shard's earliest FlowFiles are
     * read, until their rows fill the budget (rows are larger than CSV), and the FlowFiles chosen but not read go back to
     * the queue at once, not when Snowflake commits.
     */
    @Test
    void withMoreQueuedThanTheBudgetEachShardsEarliestAreReadAndTheRestGoBackAtOnce() throws InitializationException {
        csvWithSchema();
        runner.setProperty(PutSnowflake.MAX_BATCH_SIZE, "1 MB");
        runner.setProperty(PutSnowflake.MAX_IN_FLIGHT_SIZE, "1 MB");
        final StringBuilder csv = new StringBuilder("id,item\n");
        for (int row = 0; row < 2500; row++) {
            csv.append(row).append(",item-").append(row).append('\n');
        }
        for (int n = 14; n >= 0; n--) { // newest first, two shards interleaved: 30 FlowFiles of ~40 KB
            for (final String shard : List.of("shardId-000000000000", "shardId-000000000001")) {
                runner.enqueue(csv.toString(), Map.of("table", "ORDERS", "aws.kinesis.stream.name", "orders",
                        "aws.kinesis.shard.id", shard, "aws.kinesis.first.sequence.number", String.format("4959%020d", n)));
            }
        }
        final long each = runner.getQueueSize().getByteCount() / 30;
        runner.run(1, false, true); // Snowflake cannot be reached: what was read stays taken
        final ProcessSession look = runner.getProcessSessionFactory().createSession();
        final List<FlowFile> left = look.get(100);
        look.rollback();
        runner.run(0, true, false);
        final int read = 30 - left.size();
        final long chosen = (1024 * 1024) / each;
        assertTrue(read > 0 && read < chosen, "read " + read + " of the " + chosen + " chosen; the rest came back");
        for (final String shard : List.of("shardId-000000000000", "shardId-000000000001")) {
            final int leftOfShard = (int) left.stream().filter(f -> shard.equals(f.getAttribute("aws.kinesis.shard.id"))).count();
            final int lowestLeft = left.stream().filter(f -> shard.equals(f.getAttribute("aws.kinesis.shard.id")))
                    .mapToInt(f -> Integer.parseInt(f.getAttribute("aws.kinesis.first.sequence.number").substring(4))).min().orElse(15);
            assertEquals(15 - leftOfShard, lowestLeft, shard + ": the ones read are its earliest");
        }
    }
}
