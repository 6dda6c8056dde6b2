package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.ConsumeKinesisSpecs;
import io.kinesnow.nifi.contract.PropertySpec;
import io.kinesnow.nifi.contract.PutSnowflakeSpecs;
import org.apache.nifi.components.AllowableValue;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.util.MockPropertyConfiguration;
import org.apache.nifi.util.PropertyMigrationResult;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every property descriptor of both processors against the contract's specs (rust-core/src/contract/properties.rs,
 * generated into {@code io.kinesnow.nifi.contract}): the same properties, each with the spec's default and allowed values.
 * NiFi's own properties that the processors add (the Proxy Configuration Service, the AWS credentials service) are not
 * in the contract.
 */
class PropertySpecsTest {
    @Test
    void consumeKinesisDeclaresWhatTheContractSays() {
        check(TestRunners.newTestRunner(ConsumeKinesis.class).getProcessor(), ConsumeKinesisSpecs.ALL);
    }

    @Test
    void putSnowflakeDeclaresWhatTheContractSays() {
        check(TestRunners.newTestRunner(PutSnowflake.class).getProcessor(), PutSnowflakeSpecs.ALL);
    }

    @Test
    void aFlowWithTheCurrentNamesIsLeftAsItIsByMigrateProperties() {
        for (final Class<? extends Processor> type : List.of(ConsumeKinesis.class, PutSnowflake.class)) {
            final TestRunner runner = TestRunners.newTestRunner(type);
            final List<PropertySpec> specs = type == ConsumeKinesis.class ? ConsumeKinesisSpecs.ALL : PutSnowflakeSpecs.ALL;
            specs.stream().filter(spec -> spec.defaultValue() != null)
                    .forEach(spec -> runner.setProperty(spec.name(), spec.defaultValue()));
            final PropertyMigrationResult result = runner.migrateProperties();
            assertEquals(Map.of(), result.getPropertiesRenamed(), type.getSimpleName());
            assertEquals(java.util.Set.of(), result.getPropertiesRemoved(), type.getSimpleName());
        }
    }

    @Test
    void aRenameMovesTheFormerPropertysValueToItsCurrentName() {
        final Map<String, String> flow = new HashMap<>();
        flow.put("Kinesis Stream", "orders");
        flow.put("Region", "eu-west-1");
        final MockPropertyConfiguration config = new MockPropertyConfiguration(flow);

        PropertyRenames.apply(config, Map.of("Kinesis Stream", ConsumeKinesisSpecs.STREAM_NAME.name(), "Never Set", "Table"));

        assertEquals(Map.of("Stream Name", "orders", "Region", "eu-west-1"), config.getRawProperties());
        assertEquals(Map.of("Kinesis Stream", "Stream Name"), config.toPropertyMigrationResult().getPropertiesRenamed());
        assertFalse(config.hasProperty("Kinesis Stream"));
        assertTrue(config.hasProperty("Stream Name"));
    }

    private static void check(final Processor processor, final List<PropertySpec> specs) {
        final Map<String, PropertyDescriptor> declared = processor.getPropertyDescriptors().stream()
                .filter(d -> !isNiFisOwn(d))
                .collect(Collectors.toMap(PropertyDescriptor::getName, Function.identity()));
        assertEquals(specs.stream().map(PropertySpec::name).sorted().toList(), declared.keySet().stream().sorted().toList(),
                "the properties declared");
        for (final PropertySpec spec : specs) {
            final PropertyDescriptor d = declared.get(spec.name());
            assertEquals(spec.defaultValue(), d.getDefaultValue(), spec.name() + ": default");
            final List<String> allowed = d.getAllowableValues() == null ? List.of()
                    : d.getAllowableValues().stream().map(AllowableValue::getValue).toList();
            assertEquals(spec.allowed(), allowed, spec.name() + ": allowed values");
        }
    }

    private static boolean isNiFisOwn(final PropertyDescriptor d) {
        return d.getName().equals(ProxyService.PROXY_CONFIGURATION_SERVICE.getName())
                || d.getName().equals("AWS Credentials Provider Service");
    }
}
