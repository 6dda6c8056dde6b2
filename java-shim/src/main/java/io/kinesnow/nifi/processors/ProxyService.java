package io.kinesnow.nifi.processors;

import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationContext;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.proxy.ProxyConfiguration;
import org.apache.nifi.proxy.ProxySpec;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * NiFi's Proxy Configuration Service, shared by both processors: the property, its validation (HTTP, with or
 * without a user name; SOCKS is refused, as NiFi's AWS processors refuse it), and the facts that hand the resolved
 * settings to the native engine (rust-core {@code config::proxy}). With the property unset no fact is passed, and the
 * engine follows the proxy environment variables of NiFi's process.
 */
final class ProxyService {
    private static final ProxySpec[] SPECS = {ProxySpec.HTTP, ProxySpec.HTTP_AUTH};

    static final PropertyDescriptor PROXY_CONFIGURATION_SERVICE = ProxyConfiguration.createProxyConfigPropertyDescriptor(SPECS);

    /** The facts' names, as rust-core's {@code config::proxy} reads them. */
    static final String TYPE = "Proxy Type";
    static final String HOST = "Proxy Server Host";
    static final String PORT = "Proxy Server Port";
    static final String USER = "Proxy User Name";
    static final String PASSWORD = "Proxy User Password";

    private ProxyService() {
    }

    /** The processor's declared properties: those the engine reads, then the proxy service. */
    static List<PropertyDescriptor> withProxy(final List<PropertyDescriptor> engineProperties) {
        final List<PropertyDescriptor> all = new ArrayList<>(engineProperties);
        all.add(PROXY_CONFIGURATION_SERVICE);
        return List.copyOf(all);
    }

    /** {@code engineResults} plus what is wrong with the chosen proxy service's type. */
    static Collection<ValidationResult> validate(final ValidationContext context, final Collection<ValidationResult> engineResults) {
        final List<ValidationResult> results = new ArrayList<>(engineResults);
        ProxyConfiguration.validateProxySpec(context, results, SPECS);
        return results;
    }

    /** Name/value pairs of the service's settings; none when the property is unset. The password is one of them. */
    static String[] facts(final PropertyContext context) {
        if (!context.getProperty(PROXY_CONFIGURATION_SERVICE).isSet()) {
            return new String[0];
        }
        final ProxyConfiguration config = ProxyConfiguration.getConfiguration(context);
        final List<String> facts = new ArrayList<>(List.of(TYPE, config.getProxyType().name()));
        if (config.getProxyServerHost() != null) {
            facts.addAll(List.of(HOST, config.getProxyServerHost()));
        }
        if (config.getProxyServerPort() != null) {
            facts.addAll(List.of(PORT, config.getProxyServerPort().toString()));
        }
        if (config.hasCredential()) {
            facts.addAll(List.of(USER, config.getProxyUserName(), PASSWORD, nonNull(config.getProxyUserPassword())));
        }
        return facts.toArray(String[]::new);
    }

    private static String nonNull(final String value) {
        return value == null ? "" : value;
    }
}
