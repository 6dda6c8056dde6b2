package io.kinesnow.nifi.processors;

import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.schema.access.SchemaNotFoundException;
import org.apache.nifi.serialization.MalformedRecordException;
import org.apache.nifi.serialization.RecordReader;
import org.apache.nifi.serialization.RecordReaderFactory;
import org.apache.nifi.serialization.record.Record;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Reads a FlowFile with PutSnowflake's Record Reader into the content the engine takes: one JSON object per record,
 * newline-delimited (see {@link RecordRows}), handed over in the same single submit call as JSON content.
 *
 * <p>Each record is numbered from 1 in the order the reader gives them. A record the reader rejects with a
 * {@link MalformedRecordException} (a CSV line whose value does not fit the schema, say) is noted and reading goes on:
 * the reader has consumed it. When the next record is rejected too, the reader is taken not to get past the bad
 * place (NiFi's AvroReader reports corruption inside an Avro data file this way, again and again): reading stops, and
 * the rest of the content is not read, never guessed at. Any other failure ({@link IOException}, a runtime exception)
 * stops reading at once. A record read but without a row (a NaN double) is noted and skipped.
 */
final class RecordContent {
    /** After this many rejected records in a row the reader is taken not to get past them, and reading stops. */
    static final int MAX_REJECTED_IN_A_ROW = 2;
    /** At most this many problems are spelled out in a message. */
    private static final int MESSAGE_PROBLEMS = 10;

    /** A record that did not become a row: its number (from 1) and why. */
    record Problem(long index, String reason) {
        @Override
        public String toString() {
            return "record " + index + ": " + reason;
        }
    }

    /**
     * What was made of a FlowFile. {@code unreadable} is set when the reader could not start: nothing was read.
     * {@code stoppedAt} is the number of the record at which reading stopped (0 when the content was read to its end).
     */
    record Read(byte[] rows, long rowCount, List<Problem> problems, long stoppedAt, String unreadable) {
        /** Whether nothing can be loaded and the FlowFile is invalid as a whole, with {@link #reason()}. */
        boolean wholeInvalid() {
            return unreadable != null || (rowCount == 0 && !problems.isEmpty());
        }

        /** Why the FlowFile, or some of its records, went to invalid. */
        String reason() {
            if (unreadable != null) {
                return unreadable;
            }
            final String listed = problems.stream().limit(MESSAGE_PROBLEMS).map(Problem::toString).collect(Collectors.joining("; "));
            final String more = problems.size() > MESSAGE_PROBLEMS ? "; and " + (problems.size() - MESSAGE_PROBLEMS) + " more" : "";
            final String stop = stoppedAt > 0 ? ". Reading stopped at record " + stoppedAt + ": the content after it was not read "
                    + "and none of it was loaded" : "";
            return problems.size() + " record(s) could not become rows and were not loaded: " + listed + more + stop;
        }

        /** The numbers of the records that went to invalid, comma-separated (at most 100, then "..."). */
        String indexes() {
            final String listed = problems.stream().limit(100).map(p -> Long.toString(p.index())).collect(Collectors.joining(","));
            return problems.size() > 100 ? listed + ",..." : listed;
        }
    }

    private RecordContent() {
    }

    static Read read(final RecordReaderFactory factory, final RecordRows rows, final FlowFile flowFile, final InputStream in,
                     final ComponentLog log) {
        final RecordReader reader;
        try {
            reader = factory.createRecordReader(flowFile, in, log);
        } catch (final MalformedRecordException | IOException | SchemaNotFoundException | RuntimeException e) {
            return new Read(new byte[0], 0, List.of(), 0, "the Record Reader cannot read the FlowFile: " + reason(e));
        }
        try {
            return read(reader, rows);
        } finally {
            close(reader, log);
        }
    }

    /** Everything was read already: a reader that fails to close loses nothing, so it is only logged. */
    private static void close(final RecordReader reader, final ComponentLog log) {
        try {
            reader.close();
        } catch (final IOException | RuntimeException e) {
            log.warn("The Record Reader failed to close: {}", reason(e));
        }
    }

    private static Read read(final RecordReader reader, final RecordRows rows) {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final List<Problem> problems = new ArrayList<>();
        long index = 0;
        long count = 0;
        int rejectedInARow = 0;
        while (true) {
            index++;
            final Record record;
            try {
                record = reader.nextRecord();
            } catch (final MalformedRecordException e) {
                problems.add(new Problem(index, "the Record Reader rejected it: " + reason(e)));
                if (++rejectedInARow >= MAX_REJECTED_IN_A_ROW) {
                    return new Read(out.toByteArray(), count, problems, index, null);
                }
                continue;
            } catch (final IOException | RuntimeException e) {
                problems.add(new Problem(index, "the Record Reader failed: " + reason(e)));
                return new Read(out.toByteArray(), count, problems, index, null);
            }
            if (record == null) {
                return new Read(out.toByteArray(), count, problems, 0, null);
            }
            rejectedInARow = 0;
            try {
                out.writeBytes(rows.row(record).getBytes(StandardCharsets.UTF_8));
                out.write('\n');
                count++;
            } catch (final RecordRows.NotARow e) {
                problems.add(new Problem(index, e.getMessage()));
            }
        }
    }

    /** An exception's message with its causes', so that the reason names what the reader met. */
    static String reason(final Throwable e) {
        final StringBuilder text = new StringBuilder();
        for (Throwable t = e; t != null && text.length() < 500; t = t.getCause()) {
            final String message = t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage();
            if (text.indexOf(message) < 0) {
                text.append(text.length() == 0 ? "" : " (").append(message).append(text.length() == 0 ? "" : ")");
            }
        }
        return text.toString();
    }
}
