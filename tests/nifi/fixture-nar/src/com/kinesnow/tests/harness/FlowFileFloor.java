package com.kinesnow.tests.harness;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.AbstractProcessor;
import org.apache.nifi.processor.ProcessContext;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.processor.util.StandardValidators;

/**
 * Benchmark-only processor (not part of the product): what NiFi itself costs to create and commit FlowFiles, the
 * floor under ConsumeKinesis' FLOW_FILE strategy (bench/consume_source.py --floor). Each trigger creates
 * "Batch Size" FlowFiles in one session, each with "Content Size" bytes of content (0: none written) and
 * "Attribute Count" attributes, optionally a RECEIVE provenance event each (as ConsumeKinesis reports), transfers
 * them to success and commits; the counter "FlowFiles Created" counts them.
 */
@Tags({"kinesnow", "test", "benchmark"})
@CapabilityDescription("Kinesnow benchmark floor: creates and commits batches of FlowFiles, doing nothing else.")
public class FlowFileFloor extends AbstractProcessor {

    public static final PropertyDescriptor BATCH_SIZE = new PropertyDescriptor.Builder()
            .name("Batch Size").description("FlowFiles per session.").required(true).defaultValue("1000")
            .addValidator(StandardValidators.POSITIVE_INTEGER_VALIDATOR).build();

    public static final PropertyDescriptor CONTENT_SIZE = new PropertyDescriptor.Builder()
            .name("Content Size").description("Bytes of content per FlowFile; 0 writes none.").required(true).defaultValue("0")
            .addValidator(StandardValidators.NON_NEGATIVE_INTEGER_VALIDATOR).build();

    public static final PropertyDescriptor ATTRIBUTE_COUNT = new PropertyDescriptor.Builder()
            .name("Attribute Count").description("Attributes set on each FlowFile.").required(true).defaultValue("0")
            .addValidator(StandardValidators.NON_NEGATIVE_INTEGER_VALIDATOR).build();

    public static final PropertyDescriptor PROVENANCE = new PropertyDescriptor.Builder()
            .name("Provenance").description("Report a RECEIVE event per FlowFile.").required(true)
            .allowableValues("true", "false").defaultValue("true").build();

    public static final Relationship SUCCESS = new Relationship.Builder().name("success").description("Every FlowFile").build();

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return List.of(BATCH_SIZE, CONTENT_SIZE, ATTRIBUTE_COUNT, PROVENANCE);
    }

    @Override
    public Set<Relationship> getRelationships() {
        return Set.of(SUCCESS);
    }

    @Override
    public void onTrigger(final ProcessContext context, final ProcessSession session) {
        final int batch = context.getProperty(BATCH_SIZE).asInteger();
        final byte[] content = new byte[context.getProperty(CONTENT_SIZE).asInteger()];
        java.util.Arrays.fill(content, (byte) 'x');
        final int attributes = context.getProperty(ATTRIBUTE_COUNT).asInteger();
        final boolean provenance = context.getProperty(PROVENANCE).asBoolean();
        for (int i = 0; i < batch; i++) {
            FlowFile flowFile = session.create();
            if (content.length > 0) {
                flowFile = session.write(flowFile, out -> out.write(content));
            }
            if (attributes > 0) {
                final Map<String, String> values = new HashMap<>();
                for (int a = 0; a < attributes; a++) {
                    values.put("bench.attribute." + a, "value-" + i + "-" + a);
                }
                flowFile = session.putAllAttributes(flowFile, values);
            }
            if (provenance) {
                session.getProvenanceReporter().receive(flowFile, "bench://floor");
            }
            session.transfer(flowFile, SUCCESS);
        }
        session.adjustCounter("FlowFiles Created", batch, false);
        session.commitAsync();
    }
}
