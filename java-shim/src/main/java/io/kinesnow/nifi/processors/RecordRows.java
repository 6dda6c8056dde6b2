package io.kinesnow.nifi.processors;

import org.apache.nifi.serialization.record.DataType;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordField;
import org.apache.nifi.serialization.record.RecordFieldType;
import org.apache.nifi.serialization.record.type.ArrayDataType;
import org.apache.nifi.serialization.record.type.MapDataType;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.temporal.Temporal;
import java.util.Base64;
import java.util.Collection;
import java.util.HexFormat;
import java.util.Map;
import java.util.UUID;

/**
 * Turns one NiFi record into one Snowflake row: a JSON object on one line whose first-level keys are the record's
 * fields (Snowflake matches them to columns case-insensitively; schema evolution adds new ones). Pure: no NiFi session.
 *
 * <p>Nested records and maps become JSON objects, arrays JSON arrays (OBJECT, ARRAY or VARIANT columns). Decimals, and
 * integers beyond 64 bits, become JSON <em>strings</em> holding the exact digits: the engine parses rows without
 * arbitrary precision, and Snowflake converts such a string to NUMBER exactly. Timestamps (instants) are ISO-8601 in UTC
 * with {@code Z}, values with an offset keep it; dates are {@code YYYY-MM-DD}, times {@code HH:MM:SS[.fff]}; UUIDs and
 * enums are strings; bytes are hex (what a BINARY column takes by default) or Base64; null is JSON null. A choice
 * value is written as the type it actually has. A double that is NaN or infinite cannot be JSON: such a record is
 * {@link NotARow}. Inside a first-level {@code kinesisMetadata} record, timestamps are epoch milliseconds, as
 * ConsumeKinesis' JSON output writes {@code approximateArrival}.
 */
final class RecordRows {
    /** Why a record cannot become a row. */
    static final class NotARow extends Exception {
        private static final long serialVersionUID = 1L;

        NotARow(final String message) {
            super(message);
        }
    }

    static final String METADATA_FIELD = "kinesisMetadata";

    private final BinaryEncoding binary;

    RecordRows(final BinaryEncoding binary) {
        this.binary = binary;
    }

    /** Reused from row to row (an instance serves one thread): holds at most the largest row made so far. */
    private final StringBuilder scratch = new StringBuilder(2048);

    /** The record as one line of JSON, without a line end. */
    String row(final Record record) throws NotARow {
        scratch.setLength(0);
        object(scratch, record, "", false);
        return scratch.toString();
    }

    private void object(final StringBuilder out, final Record record, final String path, final boolean millis) throws NotARow {
        out.append('{');
        boolean first = true;
        for (final RecordField field : record.getSchema().getFields()) {
            first = key(out, field.getFieldName(), first);
            final boolean metadata = path.isEmpty() && METADATA_FIELD.equals(field.getFieldName());
            value(out, record.getValue(field), field.getDataType(), path + field.getFieldName(), millis || metadata);
        }
        out.append('}');
    }

    private void map(final StringBuilder out, final Map<?, ?> map, final DataType valueType, final String path,
                     final boolean millis) throws NotARow {
        out.append('{');
        boolean first = true;
        for (final Map.Entry<?, ?> e : map.entrySet()) {
            first = key(out, String.valueOf(e.getKey()), first);
            value(out, e.getValue(), valueType, path + e.getKey(), millis);
        }
        out.append('}');
    }

    private static boolean key(final StringBuilder out, final String name, final boolean first) {
        if (!first) {
            out.append(',');
        }
        string(out, name);
        out.append(':');
        return false;
    }

    private void array(final StringBuilder out, final Iterable<?> items, final DataType elementType, final String path,
                       final boolean millis) throws NotARow {
        out.append('[');
        int i = 0;
        for (final Object item : items) {
            if (i > 0) {
                out.append(',');
            }
            value(out, item, elementType, path + "[" + i + "]", millis);
            i++;
        }
        out.append(']');
    }

    /** One value, by the Java type it has (so a choice is written as what it actually is). */
    private void value(final StringBuilder out, final Object value, final DataType type, final String path,
                       final boolean millis) throws NotARow {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String || value instanceof Character || value instanceof UUID || value instanceof Enum<?>) {
            string(out, value instanceof Enum<?> e ? e.name() : value.toString());
        } else if (value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Number n) {
            number(out, n, path);
        } else if (value instanceof Record r) {
            object(out, r, path + ".", millis);
        } else if (value instanceof Map<?, ?> m) {
            map(out, m, type instanceof MapDataType t ? t.getValueType() : null, path + ".", millis);
        } else if (isBytes(value, type)) {
            string(out, encode(bytes(value)));
        } else if (value instanceof Object[] items) {
            array(out, java.util.Arrays.asList(items), elementType(type), path, millis);
        } else if (value instanceof Collection<?> items) {
            array(out, items, elementType(type), path, millis);
        } else if (value instanceof java.util.Date || value instanceof Temporal) {
            temporal(out, value, millis, path);
        } else {
            throw new NotARow("field '" + path + "' holds a " + value.getClass().getName() + ", which has no JSON form");
        }
    }

    private static DataType elementType(final DataType type) {
        return type instanceof ArrayDataType t ? t.getElementType() : null;
    }

    private static void number(final StringBuilder out, final Number n, final String path) throws NotARow {
        if (n instanceof BigDecimal d) {
            string(out, d.toPlainString());
        } else if (n instanceof BigInteger i) {
            if (i.bitLength() < 64) {
                out.append(i);
            } else {
                string(out, i.toString());
            }
        } else if (n instanceof Double || n instanceof Float) {
            final double d = n.doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new NotARow("field '" + path + "' is " + n + ", which JSON cannot hold");
            }
            out.append(n);
        } else if (n instanceof Long || n instanceof Integer || n instanceof Short || n instanceof Byte) {
            out.append(n.longValue());
        } else {
            string(out, new BigDecimal(n.toString()).toPlainString());
        }
    }

    /**
     * Dates and times. NiFi's readers give java.sql.Timestamp (an instant), java.sql.Date and java.sql.Time (made in
     * the JVM's time zone, read back in it), or java.time values.
     */
    private static void temporal(final StringBuilder out, final Object value, final boolean millis, final String path) throws NotARow {
        if (value instanceof java.sql.Date d) {
            string(out, d.toLocalDate().toString());
        } else if (value instanceof java.sql.Time t) {
            string(out, LocalTime.ofInstant(Instant.ofEpochMilli(t.getTime()), ZoneId.systemDefault()).toString());
        } else if (value instanceof java.util.Date d) {
            instant(out, d.toInstant(), millis); // a java.sql.Timestamp keeps its nanoseconds
        } else if (value instanceof Instant i) {
            instant(out, i, millis);
        } else if (millis && value instanceof OffsetDateTime o) {
            out.append(o.toInstant().toEpochMilli());
        } else if (millis && value instanceof ZonedDateTime z) {
            out.append(z.toInstant().toEpochMilli());
        } else if (value instanceof ZonedDateTime z) {
            string(out, z.toOffsetDateTime().toString());
        } else {
            string(out, value.toString());
        }
    }

    private static void instant(final StringBuilder out, final Instant instant, final boolean millis) {
        if (millis) {
            out.append(instant.toEpochMilli());
        } else {
            string(out, instant.toString());
        }
    }

    /** byte[], a ByteBuffer, or what NiFi's readers make of Avro bytes: an array of Byte (declared ARRAY of BYTE). */
    private static boolean isBytes(final Object value, final DataType type) {
        if (value instanceof byte[] || value instanceof ByteBuffer) {
            return true;
        }
        if (!(value instanceof Object[] items)) {
            return false;
        }
        final DataType element = elementType(type);
        final boolean declared = element != null && element.getFieldType() == RecordFieldType.BYTE;
        return (declared || items.length > 0) && java.util.Arrays.stream(items).allMatch(Byte.class::isInstance);
    }

    private static byte[] bytes(final Object value) {
        if (value instanceof byte[] b) {
            return b;
        }
        if (value instanceof ByteBuffer buffer) {
            final ByteBuffer copy = buffer.duplicate();
            final byte[] b = new byte[copy.remaining()];
            copy.get(b);
            return b;
        }
        final Object[] items = (Object[]) value;
        final byte[] b = new byte[items.length];
        for (int i = 0; i < items.length; i++) {
            b[i] = (Byte) items[i];
        }
        return b;
    }

    private String encode(final byte[] bytes) {
        return binary == BinaryEncoding.BASE64 ? Base64.getEncoder().encodeToString(bytes) : HexFormat.of().formatHex(bytes);
    }

    /** The string as a JSON string: characters that need no escape are appended in runs, not one by one. */
    private static void string(final StringBuilder out, final String s) {
        out.append('"');
        final int length = s.length();
        int run = 0;
        for (int i = 0; i < length; i++) {
            final char c = s.charAt(i);
            if (c >= 0x20 && c != '"' && c != '\\') {
                continue;
            }
            out.append(s, run, i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> out.append("\\u00").append(HEX_DIGITS[c >> 4]).append(HEX_DIGITS[c & 0xf]);
            }
            run = i + 1;
        }
        out.append(s, run, length);
        out.append('"');
    }

    private static final char[] HEX_DIGITS = "0123456789abcdef".toCharArray();
}
