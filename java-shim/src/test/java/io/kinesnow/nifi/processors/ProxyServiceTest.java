package io.kinesnow.nifi.processors;

import org.apache.nifi.controller.AbstractControllerService;
import org.apache.nifi.proxy.ProxyConfiguration;
import org.apache.nifi.proxy.ProxyConfigurationService;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.Test;

import java.net.Proxy;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Proxy Configuration Service property of both processors: what it accepts and the facts it hands over. */
class ProxyServiceTest {
    /** A proxy service with fixed settings. */
    static final class FixedProxy extends AbstractControllerService implements ProxyConfigurationService {
        private final ProxyConfiguration configuration = new ProxyConfiguration();

        FixedProxy(final Proxy.Type type, final String host, final Integer port, final String user, final String password) {
            configuration.setProxyType(type);
            configuration.setProxyServerHost(host);
            configuration.setProxyServerPort(port);
            configuration.setProxyUserName(user);
            configuration.setProxyUserPassword(password);
        }

        @Override
        public ProxyConfiguration getConfiguration() {
            return configuration;
        }
    }

    private static TestRunner consumer() {
        final TestRunner runner = TestRunners.newTestRunner(ConsumeKinesis.class);
        runner.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        runner.setProperty(ConsumeKinesis.REGION, "us-east-1");
        return runner;
    }

    private static void use(final TestRunner runner, final FixedProxy proxy) throws Exception {
        runner.addControllerService("proxy", proxy);
        runner.enableControllerService(proxy);
        runner.setProperty(ProxyService.PROXY_CONFIGURATION_SERVICE, "proxy");
    }

    @Test
    void bothProcessorsOfferNiFisProxyServiceBesideTheEngineProperties() {
        assertTrue(ConsumeKinesis.DESCRIPTORS.contains(ProxyService.PROXY_CONFIGURATION_SERVICE));
        assertTrue(PutSnowflake.DESCRIPTORS.contains(ProxyService.PROXY_CONFIGURATION_SERVICE));
        assertEquals("Proxy Configuration Service", ProxyService.PROXY_CONFIGURATION_SERVICE.getDisplayName());
    }

    @Test
    void withoutAServiceNoFactIsPassedAndTheEnvironmentDecides() {
        final TestRunner runner = consumer();
        runner.assertValid();
        assertEquals(0, ProxyService.facts(runner.getProcessContext()).length);
    }

    @Test
    void anAuthenticatingHttpProxyIsHandedOverWithItsCredentials() throws Exception {
        final TestRunner runner = consumer();
        use(runner, new FixedProxy(Proxy.Type.HTTP, "127.0.0.1", 3128, "nifi", "proxy-pw"));
        runner.assertValid();
        assertArrayEquals(new String[]{"Proxy Type", "HTTP", "Proxy Server Host", "127.0.0.1", "Proxy Server Port", "3128",
                "Proxy User Name", "nifi", "Proxy User Password", "proxy-pw"}, ProxyService.facts(runner.getProcessContext()));
    }

    @Test
    void directIsHandedOverSoTheEnvironmentIsIgnored() throws Exception {
        final TestRunner runner = consumer();
        use(runner, new FixedProxy(Proxy.Type.DIRECT, null, null, null, null));
        assertArrayEquals(new String[]{"Proxy Type", "DIRECT"}, ProxyService.facts(runner.getProcessContext()));
    }

    @Test
    void aSocksProxyIsInvalid() throws Exception {
        final TestRunner runner = consumer();
        use(runner, new FixedProxy(Proxy.Type.SOCKS, "127.0.0.1", 1080, null, null));
        runner.assertNotValid();
    }

    @Test
    void factsFollowTheEngineProperties() {
        assertArrayEquals(new String[]{"a", "b", "c"}, NativeComponent.withFacts(new String[]{"a"}, "b", "c"));
        assertEquals(List.of(), Arrays.asList(NativeComponent.withFacts(new String[0])));
    }
}
