package com.kinesnow.tests.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.annotation.lifecycle.OnScheduled;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.AbstractProcessor;
import org.apache.nifi.processor.ProcessContext;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.processor.util.StandardValidators;

/**
 * Benchmark-only processor (not part of the product): the input of PutSnowflake's benchmark in NiFi
 * (bench/put_records.py). From each start it emits exactly "FlowFile Count" FlowFiles, "Batch Size" per session,
 * each holding the bytes of "Content File" (read once at start: NDJSON, an Avro container file, anything) and the
 * attributes ConsumeKinesis writes: stream, region, a shard (round robin over "Shards"), partition key, first and
 * last sequence numbers (Kinesis-shaped, increasing along each shard, "Records Per FlowFile" apart), sub-sequence
 * numbers 0, arrival time and record.count. The counter "FlowFiles Created" counts them.
 */
@Tags({"kinesnow", "test", "benchmark"})
@CapabilityDescription("Kinesnow benchmark input: emits a fixed number of FlowFiles of one content, with ConsumeKinesis' attributes.")
public class KinesisBatchSource extends AbstractProcessor {

    public static final PropertyDescriptor CONTENT_FILE = new PropertyDescriptor.Builder()
            .name("Content File").description("The file whose bytes every FlowFile holds.").required(true)
            .addValidator(StandardValidators.FILE_EXISTS_VALIDATOR).build();
    public static final PropertyDescriptor COUNT = new PropertyDescriptor.Builder()
            .name("FlowFile Count").description("FlowFiles emitted from each start.").required(true)
            .addValidator(StandardValidators.POSITIVE_LONG_VALIDATOR).build();
    public static final PropertyDescriptor BATCH_SIZE = new PropertyDescriptor.Builder()
            .name("Batch Size").description("FlowFiles per session.").required(true).defaultValue("100")
            .addValidator(StandardValidators.POSITIVE_INTEGER_VALIDATOR).build();
    public static final PropertyDescriptor RECORDS = new PropertyDescriptor.Builder()
            .name("Records Per FlowFile").description("The record.count attribute, and the sequence-number step.").required(true)
            .addValidator(StandardValidators.POSITIVE_INTEGER_VALIDATOR).build();
    public static final PropertyDescriptor SHARDS = new PropertyDescriptor.Builder()
            .name("Shards").description("Shards the FlowFiles are spread over, round robin.").required(true).defaultValue("4")
            .addValidator(StandardValidators.POSITIVE_INTEGER_VALIDATOR).build();
    public static final PropertyDescriptor STREAM = new PropertyDescriptor.Builder()
            .name("Stream Name").description("The aws.kinesis.stream.name attribute.").required(true).defaultValue("bench-stream")
            .addValidator(StandardValidators.NON_BLANK_VALIDATOR).build();

    public static final Relationship SUCCESS = new Relationship.Builder().name("success").description("Every FlowFile").build();

    private volatile byte[] content;
    private final AtomicLong emitted = new AtomicLong();

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return List.of(CONTENT_FILE, COUNT, BATCH_SIZE, RECORDS, SHARDS, STREAM);
    }

    @Override
    public Set<Relationship> getRelationships() {
        return Set.of(SUCCESS);
    }

    @OnScheduled
    public void load(final ProcessContext context) throws IOException {
        content = Files.readAllBytes(Path.of(context.getProperty(CONTENT_FILE).getValue()));
        emitted.set(0);
    }

    @Override
    public void onTrigger(final ProcessContext context, final ProcessSession session) {
        final long total = context.getProperty(COUNT).asLong();
        final int records = context.getProperty(RECORDS).asInteger();
        final int shards = context.getProperty(SHARDS).asInteger();
        final String stream = context.getProperty(STREAM).getValue();
        final long first = emitted.get();
        final int batch = (int) Math.min(context.getProperty(BATCH_SIZE).asInteger(), total - first);
        if (batch <= 0) {
            context.yield();
            return;
        }
        final byte[] bytes = content;
        for (long n = first; n < first + batch; n++) {
            final int shard = (int) (n % shards);
            final long firstRecord = (n / shards) * records;
            final Map<String, String> attributes = new HashMap<>();
            attributes.put("aws.kinesis.stream.name", stream);
            attributes.put("aws.kinesis.region", "us-east-1");
            attributes.put("aws.kinesis.shard.id", String.format("shardId-%012d", shard));
            attributes.put("aws.kinesis.partition.key", "pk-" + shard);
            attributes.put("aws.kinesis.first.sequence.number", String.format("49%054d", firstRecord));
            attributes.put("aws.kinesis.last.sequence.number", String.format("49%054d", firstRecord + records - 1));
            attributes.put("aws.kinesis.first.subsequence.number", "0");
            attributes.put("aws.kinesis.last.subsequence.number", "0");
            attributes.put("aws.kinesis.approximate.arrival.timestamp.ms", "1767225600000");
            attributes.put("record.count", Integer.toString(records));
            FlowFile flowFile = session.create();
            flowFile = session.write(flowFile, out -> out.write(bytes));
            flowFile = session.putAllAttributes(flowFile, attributes);
            session.getProvenanceReporter().receive(flowFile, "bench://kinesis-batch-source");
            session.transfer(flowFile, SUCCESS);
        }
        emitted.addAndGet(batch);
        session.adjustCounter("FlowFiles Created", batch, false);
        session.commitAsync();
    }
}
