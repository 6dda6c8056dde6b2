package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.Attributes;
import io.kinesnow.nifi.nativebridge.RecordBatch;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.flowfile.attributes.CoreAttributes;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.exception.ProcessException;
import org.apache.nifi.schema.access.SchemaNotFoundException;
import org.apache.nifi.serialization.MalformedRecordException;
import org.apache.nifi.serialization.RecordReader;
import org.apache.nifi.serialization.RecordReaderFactory;
import org.apache.nifi.serialization.RecordSetWriter;
import org.apache.nifi.serialization.RecordSetWriterFactory;
import org.apache.nifi.serialization.WriteResult;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordSchema;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Processing Strategy RECORD, the shim's part. Rust decided which bytes are one Kinesis record, their metadata, their
 * order and the batch (one entry per Kinesis record, its bytes as they are, in one JNI call); here NiFi's Record Reader
 * reads each Kinesis record and the Record Writer writes a shard's records into FlowFiles. A FlowFile holds an unbroken
 * run of the shard's Kinesis records whose records have one write schema: a new schema, or a Kinesis record that goes to
 * parse.failure, starts the next FlowFile. A Kinesis record is read whole before any of its records is written, so one
 * the reader fails on (or that yields no record) goes to parse.failure whole, its bytes as they came. A failure of the
 * writer throws: the session rolls back and the batch is read again.
 */
final class RecordFlowFiles {
    /** Sets a FlowFile's attributes and routes it; {@code span} describes the Kinesis records it holds. */
    interface Emitter {
        void emit(FlowFile flowFile, RecordBatch.FlowFileData span, Map<String, String> extra);
    }

    private final RecordReaderFactory readerFactory;
    private final RecordSetWriterFactory writerFactory;
    private final RecordOutput output;
    private final String stream;
    private final ComponentLog log;

    RecordFlowFiles(final RecordReaderFactory readerFactory, final RecordSetWriterFactory writerFactory,
                    final RecordOutput output, final String stream, final ComponentLog log) {
        this.readerFactory = readerFactory;
        this.writerFactory = writerFactory;
        this.output = output;
        this.stream = stream;
        this.log = log;
    }

    /**
     * Writes one shard's Kinesis records. {@code attributesOf} gives the attributes of a Kinesis record (the variables
     * the reader and writer see, for schema names and the like). Returns the Kinesis records the reader sent to
     * parse.failure (the engine knows of those it routed there itself).
     */
    List<RecordBatch.FlowFileData> writeShard(final ProcessSession session, final RecordBatch.Shard shard,
                                              final Function<RecordBatch.FlowFileData, Map<String, String>> attributesOf,
                                              final Emitter emitter) {
        final List<RecordBatch.FlowFileData> unread = new ArrayList<>();
        Run run = null;
        for (final RecordBatch.FlowFileData kinesisRecord : shard.flowFiles()) {
            final Map<String, String> variables = attributesOf.apply(kinesisRecord);
            final Parsed parsed = kinesisRecord.route() == RecordBatch.ROUTE_SUCCESS
                    ? read(kinesisRecord, variables) : Parsed.failed(kinesisRecord, kinesisRecord.error());
            if (parsed.error != null) {
                flush(session, run, emitter);
                run = null;
                emitRaw(session, kinesisRecord.failed(parsed.error), emitter);
                if (kinesisRecord.route() == RecordBatch.ROUTE_SUCCESS) {
                    unread.add(kinesisRecord);
                }
                continue;
            }
            final RecordSchema schema = writerSchema(output.writeSchema(parsed.schema), variables);
            if (run != null && !run.schema.equals(schema)) {
                flush(session, run, emitter);
                run = null;
            }
            if (run == null) {
                run = new Run(schema, variables);
            }
            run.add(parsed, KinesisMetadata.of(stream, shard.shardId(), kinesisRecord));
        }
        flush(session, run, emitter);
        return unread;
    }

    /** Reads one Kinesis record whole; any failure of the reader is the record's parse failure. */
    private Parsed read(final RecordBatch.FlowFileData kinesisRecord, final Map<String, String> variables) {
        try (InputStream in = kinesisRecord.open();
             RecordReader reader = readerFactory.createRecordReader(variables, in, kinesisRecord.length(), log)) {
            final List<Record> records = new ArrayList<>();
            for (Record record = reader.nextRecord(); record != null; record = reader.nextRecord()) {
                records.add(record);
            }
            if (records.isEmpty()) {
                return Parsed.failed(kinesisRecord, "The Record Reader read no record from the Kinesis record");
            }
            return new Parsed(kinesisRecord, reader.getSchema(), records, null);
        } catch (final MalformedRecordException | SchemaNotFoundException | IOException | RuntimeException e) {
            return Parsed.failed(kinesisRecord, "The Record Reader could not read the Kinesis record: " + e);
        }
    }

    /** The schema the writer writes records of {@code schema} with (its own, when it has one). */
    private RecordSchema writerSchema(final RecordSchema schema, final Map<String, String> variables) {
        try {
            return writerFactory.getSchema(variables, schema);
        } catch (final SchemaNotFoundException | IOException e) {
            throw new ProcessException("The Record Writer has no schema for the records: " + e, e);
        }
    }

    /** The Kinesis record's bytes as they came, to parse.failure. */
    private static void emitRaw(final ProcessSession session, final RecordBatch.FlowFileData kinesisRecord, final Emitter emitter) {
        FlowFile flowFile = session.create();
        flowFile = session.write(flowFile, kinesisRecord::writeTo);
        emitter.emit(flowFile, kinesisRecord, Map.of());
    }

    /** Writes a run's records into one FlowFile; a writer failure throws (the batch is then read again). */
    private void flush(final ProcessSession session, final Run run, final Emitter emitter) {
        if (run == null) {
            return;
        }
        final Map<String, String> extra = new HashMap<>();
        FlowFile flowFile = session.create();
        flowFile = session.write(flowFile, out -> run.writeTo(out, extra));
        emitter.emit(flowFile, run.span(Integer.parseInt(extra.get(Attributes.RECORD_COUNT))), extra);
    }

    /** Consecutive Kinesis records of one shard whose records share a write schema: one FlowFile. */
    private final class Run {
        private final RecordSchema schema;
        private final Map<String, String> variables;
        private final List<Parsed> kinesisRecords = new ArrayList<>();
        private final List<Record> metadata = new ArrayList<>();

        Run(final RecordSchema schema, final Map<String, String> variables) {
            this.schema = schema;
            this.variables = variables;
        }

        void add(final Parsed parsed, final Record kinesisMetadata) {
            kinesisRecords.add(parsed);
            metadata.add(kinesisMetadata);
        }

        /** The first to the last Kinesis record of the run, holding {@code recordCount} records. */
        RecordBatch.FlowFileData span(final int recordCount) {
            return RecordBatch.FlowFileData.spanning(kinesisRecords.get(0).kinesisRecord,
                    kinesisRecords.get(kinesisRecords.size() - 1).kinesisRecord, recordCount);
        }

        /** Writes the records; {@code extra} gets the writer's attributes, record.count and mime.type. */
        void writeTo(final OutputStream out, final Map<String, String> extra) throws IOException {
            try (RecordSetWriter writer = writerFactory.createWriter(log, schema, out, variables)) {
                writer.beginRecordSet();
                for (int i = 0; i < kinesisRecords.size(); i++) {
                    for (final Record record : kinesisRecords.get(i).records) {
                        writer.write(output.convert(record, metadata.get(i), schema));
                    }
                }
                final WriteResult result = writer.finishRecordSet();
                extra.putAll(result.getAttributes());
                extra.put(Attributes.RECORD_COUNT, Integer.toString(result.getRecordCount()));
                extra.put(CoreAttributes.MIME_TYPE.key(), writer.getMimeType());
            } catch (final SchemaNotFoundException e) {
                throw new IOException("The Record Writer could not be created: " + e, e);
            }
        }
    }

    /** One Kinesis record read whole: its records and their schema, or why it could not be read. */
    private record Parsed(RecordBatch.FlowFileData kinesisRecord, RecordSchema schema, List<Record> records, String error) {
        static Parsed failed(final RecordBatch.FlowFileData kinesisRecord, final String error) {
            return new Parsed(kinesisRecord, null, List.of(), error);
        }
    }
}
