package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.ComponentLogSink;
import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.controller.NodeTypeProvider;
import org.apache.nifi.expression.ExpressionLanguageScope;
import org.apache.nifi.logging.ComponentLog;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What both processors share: hands the evaluated properties to the native rules, and owns the native handle of
 * a scheduled processor between {@code @OnScheduled} and {@code @OnStopped}.
 */
final class NativeComponent {
    private final String componentType;
    private volatile long handle;

    NativeComponent(final String componentType) {
        this.componentType = componentType;
    }

    /** The native library's verdict on the settings, or why the library cannot run on this platform. */
    Collection<ValidationResult> validate(final PropertyContext context, final List<PropertyDescriptor> descriptors) {
        final Optional<String> unavailable = NativeLibrary.load();
        if (unavailable.isPresent()) {
            return List.of(invalid("Native library", unavailable.get()));
        }
        final String[] problems = NativeBridge.validate(componentType, evaluated(context, descriptors));
        final List<ValidationResult> results = new ArrayList<>(problems.length / 2);
        for (int i = 0; i + 1 < problems.length; i += 2) {
            results.add(invalid(problems[i], problems[i + 1]));
        }
        return results;
    }

    /**
     * The native verification's steps, in order ("Verify Properties" on the canvas). Properties that support
     * Expression Language are evaluated against the verification's FlowFile attributes.
     */
    List<ConfigVerificationResult> verify(final PropertyContext context, final List<PropertyDescriptor> descriptors,
                                          final Map<String, String> attributes, final String... facts) {
        final Optional<String> unavailable = NativeLibrary.load();
        if (unavailable.isPresent()) {
            return List.of(step("Native library", ConfigVerificationResult.Outcome.FAILED, unavailable.get()));
        }
        final String[] steps;
        try {
            steps = NativeBridge.verify(componentType, withFacts(evaluated(context, descriptors, attributes), facts));
        } catch (final RuntimeException e) {
            return List.of(step("Perform Verification", ConfigVerificationResult.Outcome.FAILED, e.getMessage()));
        }
        final List<ConfigVerificationResult> results = new ArrayList<>(steps.length / 3);
        for (int i = 0; i + 2 < steps.length; i += 3) {
            results.add(step(steps[i], ConfigVerificationResult.Outcome.valueOf(steps[i + 1]), steps[i + 2]));
        }
        return results;
    }

    private static ConfigVerificationResult step(final String name, final ConfigVerificationResult.Outcome outcome,
                                                 final String explanation) {
        return new ConfigVerificationResult.Builder().verificationStepName(name).outcome(outcome).explanation(explanation).build();
    }

    /** Like {@link #evaluated(PropertyContext, List)}, with Expression Language evaluated against {@code attributes}. */
    static String[] evaluated(final PropertyContext context, final List<PropertyDescriptor> descriptors,
                              final Map<String, String> attributes) {
        final String[] pairs = new String[descriptors.size() * 2];
        int i = 0;
        for (final PropertyDescriptor descriptor : descriptors) {
            pairs[i++] = descriptor.getName();
            pairs[i++] = descriptor.isExpressionLanguageSupported()
                    ? context.getProperty(descriptor).evaluateAttributeExpressions(attributes).getValue()
                    : context.getProperty(descriptor).getValue();
        }
        return pairs;
    }

    /**
     * Opens and starts the native component; on failure nothing stays open. {@code facts} are extra name/value
     * pairs about the runtime (not properties), such as the cluster node.
     */
    void open(final PropertyContext context, final List<PropertyDescriptor> descriptors, final ComponentLog log,
              final String... facts) {
        NativeLibrary.require();
        final long opened = NativeBridge.open(componentType, withFacts(evaluated(context, descriptors), facts), new ComponentLogSink(log));
        try {
            NativeBridge.start(opened);
        } catch (final RuntimeException e) {
            NativeBridge.close(opened);
            throw e;
        }
        handle = opened;
    }

    /** The property pairs followed by the fact pairs (names and values about the runtime, not properties). */
    static String[] withFacts(final String[] properties, final String... facts) {
        final String[] pairs = java.util.Arrays.copyOf(properties, properties.length + facts.length);
        System.arraycopy(facts, 0, pairs, properties.length, facts.length);
        return pairs;
    }

    long handle() {
        return handle;
    }

    /**
     * Stops and frees the native component. The handle stays usable while the component stops, so the
     * acknowledgements of batches NiFi is still committing reach it; a second close does nothing.
     */
    synchronized void close() {
        final long open = handle;
        if (open != 0) {
            try {
                NativeBridge.close(open);
            } finally {
                handle = 0;
            }
        }
    }

    /** The fact naming the NiFi node (see rust-core's {@code config::consume_kinesis::NODE_IDENTITY}). */
    static final String NODE_IDENTITY = "Node Identity";

    /**
     * The NiFi node this processor runs on, the same for both processors of the node and across its restarts: the
     * cluster node's address when clustered, else the host name and this NiFi's nifi.properties path (two standalone
     * NiFis on one host have their own).
     */
    static String nodeIdentity(final NodeTypeProvider nodes) {
        final java.util.Optional<String> clustered = nodes == null ? java.util.Optional.empty() : nodes.getCurrentNode();
        if (clustered.isPresent() && !clustered.get().isBlank()) {
            return clustered.get();
        }
        String host;
        try {
            host = java.net.InetAddress.getLocalHost().getHostName();
        } catch (final java.io.IOException e) {
            host = "localhost";
        }
        return host + ":" + System.getProperty("nifi.properties.file.path", "");
    }

    /**
     * Alternating names and evaluated values (parameters resolved) of the given properties. Expression Language of
     * environment scope (ConsumeKinesis' Message Demarcator) is evaluated here, exactly: whitespace and multi-byte text
     * stay as they are; expressions that read FlowFile attributes are left to the component.
     */
    static String[] evaluated(final PropertyContext context, final List<PropertyDescriptor> descriptors) {
        final String[] pairs = new String[descriptors.size() * 2];
        int i = 0;
        for (final PropertyDescriptor descriptor : descriptors) {
            pairs[i++] = descriptor.getName();
            pairs[i++] = descriptor.getExpressionLanguageScope() == ExpressionLanguageScope.ENVIRONMENT
                    ? context.getProperty(descriptor).evaluateAttributeExpressions().getValue()
                    : context.getProperty(descriptor).getValue();
        }
        return pairs;
    }

    private static ValidationResult invalid(final String subject, final String explanation) {
        return new ValidationResult.Builder().subject(subject).valid(false).explanation(explanation).build();
    }
}
