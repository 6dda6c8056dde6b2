package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.CredentialsCallback;
import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.controller.ControllerServiceLookup;
import org.apache.nifi.processor.ProcessContext;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * ConsumeKinesis' optional "AWS Credentials Provider Service": NiFi's {@code AwsCredentialsProviderService}, whose
 * interface comes from the nifi-aws-service-api-nar. This class never names that interface: the property is offered
 * only when {@link Class#forName} finds it (kinesnow-aws-nar, whose parent is that NAR), and the one class that uses
 * it ({@code aws.ServiceCredentials}) is loaded by reflection only then, so the processors load in kinesnow-nar,
 * which has no such parent. The native rules refuse the service together with the processor's own credential
 * properties.
 */
final class CredentialsService {
    static final String SERVICE_INTERFACE = "org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService";
    private static final String ADAPTER = "io.kinesnow.nifi.processors.aws.ServiceCredentials";

    /** Facts passed next to the properties (rust-core config::consume_kinesis). */
    static final String HANDLE_FACT = "AWS Credentials Provider Service Handle";
    static final String NAME_FACT = "AWS Credentials Provider Service Name";

    /** The property, when the service API is visible to this class loader. */
    static final Optional<PropertyDescriptor> DESCRIPTOR = descriptor();

    private CredentialsService() {
    }

    private static Optional<PropertyDescriptor> descriptor() {
        final Class<? extends ControllerService> api;
        try {
            api = Class.forName(SERVICE_INTERFACE, false, CredentialsService.class.getClassLoader()).asSubclass(ControllerService.class);
        } catch (final ClassNotFoundException | LinkageError | ClassCastException e) {
            return Optional.empty();
        }
        return Optional.of(new PropertyDescriptor.Builder()
                .name("AWS Credentials Provider Service")
                .description("NiFi's AWS credentials controller service (AWSCredentialsProviderControllerService or "
                        + "another AwsCredentialsProviderService) whose credentials every Kinesis, DynamoDB and Enhanced "
                        + "Fan-Out call uses; asked again shortly before they expire. When set, leave the access key pair, "
                        + "Profile Name, Credentials File, Web Identity Token File and Assume Role ARN empty: configure the "
                        + "role, profile or keys in the service. Offered by kinesnow-aws-nar only.")
                .required(false)
                .identifiesControllerService(api)
                .build());
    }

    /** {@code properties} with the service's property after {@code after}, when the service API is visible. */
    static List<PropertyDescriptor> offeredWith(final List<PropertyDescriptor> properties, final PropertyDescriptor after) {
        if (DESCRIPTOR.isEmpty()) {
            return properties;
        }
        final List<PropertyDescriptor> all = new ArrayList<>(properties);
        all.add(all.indexOf(after) + 1, DESCRIPTOR.get());
        return List.copyOf(all);
    }

    /**
     * The callback of the service set on the processor, registered with the engine for one open or verification;
     * {@link Registration#facts} are its facts. Nothing is registered when the property is not set.
     */
    static Registration register(final PropertyContext context) {
        if (DESCRIPTOR.isEmpty() || !context.getProperty(DESCRIPTOR.get()).isSet() || NativeLibrary.load().isPresent()) {
            return new Registration(0, null); // (without the library, the native call that follows says why)
        }
        final String id = context.getProperty(DESCRIPTOR.get()).getValue();
        final String name = nameOf(context, id);
        final CredentialsCallback callback;
        try {
            callback = (CredentialsCallback) Class.forName(ADAPTER, true, CredentialsService.class.getClassLoader())
                    .getMethod("of", PropertyContext.class, PropertyDescriptor.class, String.class)
                    .invoke(null, context, DESCRIPTOR.get(), name == null ? id : name);
        } catch (final ReflectiveOperationException | LinkageError e) {
            final Throwable cause = e instanceof java.lang.reflect.InvocationTargetException ite && ite.getCause() != null ? ite.getCause() : e;
            throw new IllegalStateException("The AWS credentials service " + (name == null ? id : "'" + name + "'")
                    + " is not usable: " + cause.getClass().getSimpleName() + ": " + cause.getMessage(), cause);
        }
        return new Registration(NativeBridge.registerCredentials(callback), name);
    }

    private static String nameOf(final PropertyContext context, final String id) {
        if (context instanceof ProcessContext process) {
            final ControllerServiceLookup lookup = process.getControllerServiceLookup();
            if (lookup != null) {
                try {
                    return lookup.getControllerServiceName(id);
                } catch (final RuntimeException e) {
                    return null;
                }
            }
        }
        return null;
    }

    /** A registered callback, released on close (the engine keeps its own reference while it needs it). */
    static final class Registration implements AutoCloseable {
        private final long handle;
        private final String name;

        private Registration(final long handle, final String name) {
            this.handle = handle;
            this.name = name;
        }

        /** {@code facts} plus this registration's own. */
        String[] facts(final String... facts) {
            if (handle == 0) {
                return facts;
            }
            final List<String> all = new ArrayList<>(Arrays.asList(facts));
            all.add(HANDLE_FACT);
            all.add(Long.toString(handle));
            if (name != null) {
                all.add(NAME_FACT);
                all.add(name);
            }
            return all.toArray(new String[0]);
        }

        @Override
        public void close() {
            if (handle != 0) {
                NativeBridge.releaseCredentials(handle);
            }
        }
    }
}
