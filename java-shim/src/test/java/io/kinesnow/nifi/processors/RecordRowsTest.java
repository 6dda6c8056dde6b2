package io.kinesnow.nifi.processors;

import org.apache.nifi.serialization.SimpleRecordSchema;
import org.apache.nifi.serialization.record.DataType;
import org.apache.nifi.serialization.record.MapRecord;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordField;
import org.apache.nifi.serialization.record.RecordFieldType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.sql.Date;
import java.sql.Time;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import java.util.UUID;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RecordRowsTest {
    private static final RecordRows HEX = new RecordRows(BinaryEncoding.HEX);
    private static final TimeZone JVM_ZONE = TimeZone.getDefault();

    @AfterEach
    void restoreZone() {
        TimeZone.setDefault(JVM_ZONE);
    }

    /** A record of the given fields, in order: name, type, value triples. */
    private static Record record(final Object... triples) {
        final List<RecordField> fields = new ArrayList<>();
        final Map<String, Object> values = new LinkedHashMap<>();
        for (int i = 0; i < triples.length; i += 3) {
            fields.add(new RecordField((String) triples[i], (DataType) triples[i + 1]));
            values.put((String) triples[i], triples[i + 2]);
        }
        return new MapRecord(new SimpleRecordSchema(fields), values);
    }

    private static String row(final Record record) throws RecordRows.NotARow {
        return HEX.row(record);
    }

    @Test
    void scalarsNullsAndEscapes() throws Exception {
        assertEquals("{\"s\":\"a\\\"b\\\\c\\nd\\u0001é\",\"b\":true,\"i\":-7,\"l\":9007199254740993,\"f\":0.1,\"d\":2.5E-10,"
                        + "\"n\":null,\"c\":\"x\",\"sh\":3,\"by\":4}",
                row(record("s", RecordFieldType.STRING.getDataType(), "a\"b\\c\nd\u0001é",
                        "b", RecordFieldType.BOOLEAN.getDataType(), true,
                        "i", RecordFieldType.INT.getDataType(), -7,
                        "l", RecordFieldType.LONG.getDataType(), 9007199254740993L,
                        "f", RecordFieldType.FLOAT.getDataType(), 0.1f,
                        "d", RecordFieldType.DOUBLE.getDataType(), 2.5e-10,
                        "n", RecordFieldType.STRING.getDataType(), null,
                        "c", RecordFieldType.CHAR.getDataType(), 'x',
                        "sh", RecordFieldType.SHORT.getDataType(), (short) 3,
                        "by", RecordFieldType.BYTE.getDataType(), (byte) 4)));
    }

    /**
     * Any string, field name or value, reads back exactly from its row with a real JSON parser: random strings drawn
     * mostly from the characters that need escaping (controls, quote, backslash), around plain ASCII, non-ASCII and
     * surrogate pairs, so that every way an escape can start, end or follow another run of characters is met.
     */
    @Test
    void everyStringReadsBackExactlyFromItsRow() throws Exception {
        final com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        final java.util.Random random = new java.util.Random(18);
        final String alphabet = "\u0000\u0001\u001f\b\f\n\r\t\"\\ /aZ~\u007f\u0080é€\uffff";
        for (int n = 0; n < 5_000; n++) {
            final StringBuilder sb = new StringBuilder();
            final int length = random.nextInt(12);
            for (int i = 0; i < length; i++) {
                if (random.nextInt(8) == 0) {
                    sb.append("\ud83d\ude00"); // a surrogate pair
                } else {
                    sb.append(alphabet.charAt(random.nextInt(alphabet.length())));
                }
            }
            final String s = sb.toString();
            final String line = row(record(s.isEmpty() ? "k" : s, RecordFieldType.STRING.getDataType(), s));
            final com.fasterxml.jackson.databind.JsonNode parsed = json.readTree(line);
            assertEquals(1, parsed.size(), line);
            assertEquals(s, parsed.get(s.isEmpty() ? "k" : s).textValue(), line);
            assertTrue(line.chars().noneMatch(c -> c < 0x20), line);
        }
    }

    @Test
    void decimalsAndBigIntegersAreExactStrings() throws Exception {
        final String digits38 = "12345678901234567890123456789012345678";
        assertEquals("{\"d38\":\"" + digits38 + "\",\"scaled\":\"-1234567890123456789012345678.9012345678\","
                        + "\"tiny\":\"0.00000000000000000000000000000000000001\",\"exp\":\"1000\",\"big\":\"" + digits38 + "\",\"small\":42}",
                row(record("d38", RecordFieldType.DECIMAL.getDecimalDataType(38, 0), new BigDecimal(digits38),
                        "scaled", RecordFieldType.DECIMAL.getDecimalDataType(38, 10), new BigDecimal("-1234567890123456789012345678.9012345678"),
                        "tiny", RecordFieldType.DECIMAL.getDecimalDataType(38, 38), new BigDecimal("1E-38"),
                        "exp", RecordFieldType.DECIMAL.getDecimalDataType(4, 0), new BigDecimal("1E+3"),
                        "big", RecordFieldType.BIGINT.getDataType(), new BigInteger(digits38),
                        "small", RecordFieldType.BIGINT.getDataType(), BigInteger.valueOf(42))));
    }

    /** NiFi's TIMESTAMP is an instant: UTC with Z whatever the JVM's zone; values with an offset keep it. */
    @Test
    void timestampsCarryTheirZone() throws Exception {
        TimeZone.setDefault(TimeZone.getTimeZone("America/New_York"));
        final Timestamp ts = Timestamp.from(Instant.parse("2024-03-10T07:30:00.123456789Z"));
        assertEquals("{\"ts\":\"2024-03-10T07:30:00.123456789Z\",\"odt\":\"2024-03-10T09:30:00.500+02:00\","
                        + "\"zdt\":\"2024-07-01T02:30-05:00\",\"instant\":\"1970-01-01T00:00:00Z\",\"local\":\"2024-03-10T02:30\"}",
                row(record("ts", RecordFieldType.TIMESTAMP.getDataType(), ts,
                        "odt", RecordFieldType.TIMESTAMP.getDataType(), OffsetDateTime.of(2024, 3, 10, 9, 30, 0, 500_000_000, ZoneOffset.ofHours(2)),
                        "zdt", RecordFieldType.TIMESTAMP.getDataType(), ZonedDateTime.of(2024, 7, 1, 2, 30, 0, 0, ZoneId.of("America/Chicago")),
                        "instant", RecordFieldType.TIMESTAMP.getDataType(), Instant.EPOCH,
                        "local", RecordFieldType.TIMESTAMP.getDataType(), LocalDateTime.of(2024, 3, 10, 2, 30))));
    }

    /** java.sql.Date and Time are made in the JVM's zone by NiFi's readers and read back in it. */
    @Test
    void datesAndTimesAreIsoInAnyJvmZone() throws Exception {
        for (final String zone : List.of("UTC", "Pacific/Kiritimati", "America/Los_Angeles")) {
            TimeZone.setDefault(TimeZone.getTimeZone(zone));
            final LocalTime time = LocalTime.of(1, 2, 3, 4_000_000);
            final Time sqlTime = new Time(java.sql.Timestamp.valueOf(LocalDate.of(1970, 1, 1).atTime(time)).getTime());
            assertEquals("{\"d\":\"1969-12-31\",\"t\":\"01:02:03.004\",\"ld\":\"2024-02-29\",\"lt\":\"23:59:59\"}",
                    row(record("d", RecordFieldType.DATE.getDataType(), Date.valueOf(LocalDate.of(1969, 12, 31)),
                            "t", RecordFieldType.TIME.getDataType(), sqlTime,
                            "ld", RecordFieldType.DATE.getDataType(), LocalDate.of(2024, 2, 29),
                            "lt", RecordFieldType.TIME.getDataType(), LocalTime.of(23, 59, 59))), zone);
        }
    }

    private enum Colour { RED }

    @Test
    void uuidsAndEnumsAreStrings() throws Exception {
        final UUID id = UUID.fromString("123e4567-e89b-12d3-a456-426614174000");
        assertEquals("{\"id\":\"123e4567-e89b-12d3-a456-426614174000\",\"e\":\"RED\",\"s\":\"GREEN\"}",
                row(record("id", RecordFieldType.UUID.getDataType(), id,
                        "e", RecordFieldType.ENUM.getEnumDataType(List.of("RED")), Colour.RED,
                        "s", RecordFieldType.ENUM.getEnumDataType(List.of("GREEN")), "GREEN")));
    }

    @Test
    void bytesAreHexByDefaultOrBase64() throws Exception {
        final DataType bytes = RecordFieldType.ARRAY.getArrayDataType(RecordFieldType.BYTE.getDataType());
        final Record r = record("raw", RecordFieldType.STRING.getDataType(), new byte[] {0x00, (byte) 0xff, 0x10},
                "avro", bytes, new Object[] {(byte) 0xca, (byte) 0xfe},
                "buf", bytes, ByteBuffer.wrap(new byte[] {1, 2}),
                "none", bytes, new Object[0]);
        assertEquals("{\"raw\":\"00ff10\",\"avro\":\"cafe\",\"buf\":\"0102\",\"none\":\"\"}", HEX.row(r));
        assertEquals("{\"raw\":\"AP8Q\",\"avro\":\"yv4=\",\"buf\":\"AQI=\",\"none\":\"\"}",
                new RecordRows(BinaryEncoding.BASE64).row(r));
    }

    @Test
    void nestedRecordsArraysAndMapsAreJsonObjectsAndArrays() throws Exception {
        final Record inner = record("x", RecordFieldType.INT.getDataType(), 1, "y", RecordFieldType.STRING.getDataType(), null);
        final DataType innerType = RecordFieldType.RECORD.getRecordDataType(inner.getSchema());
        final Map<String, Object> map = new LinkedHashMap<>();
        map.put("a", new Object[] {1, 2});
        map.put("b", null);
        map.put("c", inner);
        assertEquals("{\"rec\":{\"x\":1,\"y\":null},\"arr\":[{\"x\":1,\"y\":null},null],\"ints\":[],\"strs\":[\"p\",\"q\"],"
                        + "\"map\":{\"a\":[1,2],\"b\":null,\"c\":{\"x\":1,\"y\":null}}}",
                row(record("rec", innerType, inner,
                        "arr", RecordFieldType.ARRAY.getArrayDataType(innerType), new Object[] {inner, null},
                        "ints", RecordFieldType.ARRAY.getArrayDataType(RecordFieldType.INT.getDataType()), new Object[0],
                        "strs", RecordFieldType.ARRAY.getArrayDataType(RecordFieldType.STRING.getDataType()), List.of("p", "q"),
                        "map", RecordFieldType.MAP.getMapDataType(RecordFieldType.CHOICE.getChoiceDataType(
                                RecordFieldType.ARRAY.getArrayDataType(RecordFieldType.INT.getDataType()), innerType)), map)));
    }

    @Test
    void aChoiceIsWrittenAsTheTypeItsValueHas() throws Exception {
        final DataType choice = RecordFieldType.CHOICE.getChoiceDataType(RecordFieldType.INT.getDataType(),
                RecordFieldType.STRING.getDataType(), RecordFieldType.DECIMAL.getDecimalDataType(38, 2));
        assertEquals("{\"a\":5,\"b\":\"five\",\"c\":\"5.00\"}",
                row(record("a", choice, 5, "b", choice, "five", "c", choice, new BigDecimal("5.00"))));
    }

    @Test
    void notANumberOrInfinityCannotBeARowAndTheFieldIsNamed() {
        final DataType doubles = RecordFieldType.DOUBLE.getDataType();
        final Record inner = record("score", doubles, Double.NaN);
        final RecordRows.NotARow nan = assertThrows(RecordRows.NotARow.class, () -> row(record("id", RecordFieldType.INT.getDataType(), 1,
                "stats", RecordFieldType.RECORD.getRecordDataType(inner.getSchema()), inner)));
        assertEquals("field 'stats.score' is NaN, which JSON cannot hold", nan.getMessage());
        final RecordRows.NotARow inf = assertThrows(RecordRows.NotARow.class,
                () -> row(record("f", RecordFieldType.FLOAT.getDataType(), Float.NEGATIVE_INFINITY)));
        assertTrue(inf.getMessage().contains("-Infinity"), inf.getMessage());
    }

    /** NiFi's KinesisRecordMetadata: approximateArrival becomes epoch millis, as on the JSON path; elsewhere ISO. */
    @Test
    void kinesisMetadataIsWrittenAsTheJsonPathWritesIt() throws Exception {
        final Timestamp arrival = Timestamp.from(Instant.ofEpochMilli(1_700_000_000_123L));
        final Record metadata = record("stream", RecordFieldType.STRING.getDataType(), "orders",
                "shardId", RecordFieldType.STRING.getDataType(), "shardId-000000000001",
                "sequenceNumber", RecordFieldType.STRING.getDataType(), "4959",
                "subSequenceNumber", RecordFieldType.LONG.getDataType(), 0L,
                "shardedSequenceNumber", RecordFieldType.STRING.getDataType(), "495900000000000000000000",
                "partitionKey", RecordFieldType.STRING.getDataType(), "k",
                "approximateArrival", RecordFieldType.TIMESTAMP.getDataType(), arrival);
        assertEquals("{\"at\":\"2023-11-14T22:13:20.123Z\",\"kinesisMetadata\":{\"stream\":\"orders\",\"shardId\":\"shardId-000000000001\","
                        + "\"sequenceNumber\":\"4959\",\"subSequenceNumber\":0,\"shardedSequenceNumber\":\"495900000000000000000000\","
                        + "\"partitionKey\":\"k\",\"approximateArrival\":1700000000123}}",
                row(record("at", RecordFieldType.TIMESTAMP.getDataType(), arrival,
                        "kinesisMetadata", RecordFieldType.RECORD.getRecordDataType(metadata.getSchema()), metadata)));
    }

    @Test
    void aValueWithoutAJsonFormIsNotARow() {
        final RecordRows.NotARow e = assertThrows(RecordRows.NotARow.class,
                () -> row(record("o", RecordFieldType.STRING.getDataType(), new Object())));
        assertTrue(e.getMessage().startsWith("field 'o' holds a java.lang.Object"), e.getMessage());
    }
}
