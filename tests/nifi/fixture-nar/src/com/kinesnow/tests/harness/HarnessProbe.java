package com.kinesnow.tests.harness;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;

import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.components.Validator;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.AbstractProcessor;
import org.apache.nifi.processor.ProcessContext;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.Relationship;

/**
 * Test-harness-only processor (not part of the product). The trimmed test NiFi has no standard
 * processors, so tests/nifi/test_harness.py hot-loads this NAR to exercise the REST client's
 * processor calls: add, validate, connect, start, stop, bulletins, log ERROR lines, delete.
 *
 * Each run emits one FlowFile whose content is "Message" to "success"; incoming FlowFiles are
 * passed through. With "Fail On Trigger" = true it logs an ERROR (which becomes a bulletin) instead.
 */
@Tags({"kinesnow", "test"})
@CapabilityDescription("Kinesnow test-harness probe: emits Message as a FlowFile, or logs an error when Fail On Trigger is true.")
public class HarnessProbe extends AbstractProcessor {

    private static final Validator NOT_BLANK = (subject, input, context) -> new ValidationResult.Builder()
            .subject(subject).input(input)
            .valid(input != null && !input.isBlank())
            .explanation("must not be blank")
            .build();

    private static final Validator BOOLEAN = (subject, input, context) -> new ValidationResult.Builder()
            .subject(subject).input(input)
            .valid("true".equals(input) || "false".equals(input))
            .explanation("must be true or false")
            .build();

    public static final PropertyDescriptor MESSAGE = new PropertyDescriptor.Builder()
            .name("Message")
            .description("Content of the emitted FlowFiles; may reference a parameter, e.g. #{stream}.")
            .required(true)
            .addValidator(NOT_BLANK)
            .build();

    public static final PropertyDescriptor FAIL_ON_TRIGGER = new PropertyDescriptor.Builder()
            .name("Fail On Trigger")
            .description("When true, each run logs an ERROR instead of emitting a FlowFile.")
            .required(true)
            .allowableValues("true", "false")
            .defaultValue("false")
            .addValidator(BOOLEAN)
            .build();

    public static final Relationship SUCCESS = new Relationship.Builder()
            .name("success")
            .description("Emitted and passed-through FlowFiles")
            .build();

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return List.of(MESSAGE, FAIL_ON_TRIGGER);
    }

    @Override
    public Set<Relationship> getRelationships() {
        return Set.of(SUCCESS);
    }

    @Override
    public void onTrigger(final ProcessContext context, final ProcessSession session) {
        final String message = context.getProperty(MESSAGE).getValue();
        if (Boolean.parseBoolean(context.getProperty(FAIL_ON_TRIGGER).getValue())) {
            getLogger().error("HarnessProbe failure requested, message [{}]", message);
            context.yield();
            return;
        }
        FlowFile flowFile = session.get();
        if (flowFile == null) {
            flowFile = session.create();
            flowFile = session.write(flowFile, out -> out.write(message.getBytes(StandardCharsets.UTF_8)));
        }
        session.transfer(flowFile, SUCCESS);
    }
}
