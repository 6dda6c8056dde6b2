package io.kinesnow.nifi.processors;

import org.apache.nifi.annotation.behavior.ReadsAttribute;
import org.apache.nifi.annotation.behavior.ReadsAttributes;
import org.apache.nifi.annotation.behavior.WritesAttribute;
import org.apache.nifi.annotation.behavior.WritesAttributes;
import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.components.AllowableValue;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * docs/configuration.md is generated from the processors' own descriptors, relationships and attribute annotations
 * (whose names and defaults come from rust-core's contract): this test fails when it is not current, and writes it
 * with {@code KINESNOW_WRITE_DOCS=1 ./mvnw -B -q -pl java-shim test -Dtest=ConfigurationDocTest}.
 */
class ConfigurationDocTest {
    private static final Path DOC = Path.of("..", "docs", "configuration.md");

    @Test
    void theConfigurationReferenceIsCurrent() throws IOException {
        final String generated = document();
        if ("1".equals(System.getenv("KINESNOW_WRITE_DOCS"))) {
            Files.writeString(DOC, generated, StandardCharsets.UTF_8);
            return;
        }
        final String current = Files.exists(DOC) ? Files.readString(DOC, StandardCharsets.UTF_8) : "";
        assertEquals(generated, current, DOC + " is not current: run KINESNOW_WRITE_DOCS=1 ./mvnw -B -q -pl java-shim test "
                + "-Dtest=ConfigurationDocTest");
    }

    static String document() {
        final StringBuilder out = new StringBuilder("""
                # Configuration reference

                Every property, relationship and attribute of both processors, generated from the processors themselves by
                `java-shim/src/test/java/io/kinesnow/nifi/processors/ConfigurationDocTest.java` (property names, defaults
                and allowed values come from `rust-core/src/contract/properties.rs`). Do not edit by hand. How the
                properties work together: each processor's page in NiFi (its `additionalDetails.md`).
                """);
        section(out, TestRunners.newTestRunner(ConsumeKinesis.class).getProcessor());
        section(out, TestRunners.newTestRunner(PutSnowflake.class).getProcessor());
        return out.toString();
    }

    private static void section(final StringBuilder out, final Processor processor) {
        final Class<?> type = processor.getClass();
        out.append("\n## ").append(type.getSimpleName()).append("\n\n")
                .append(oneLine(type.getAnnotation(CapabilityDescription.class).value())).append("\n\n### Properties\n\n")
                .append("| property | default | allowed values | Expression Language | sensitive | required | description |\n")
                .append("|---|---|---|---|---|---|---|\n");
        for (final PropertyDescriptor d : processor.getPropertyDescriptors()) {
            out.append("| ").append(cell(d.getDisplayName()))
                    .append(" | ").append(d.getDefaultValue() == null ? "" : "`" + cell(d.getDefaultValue()) + "`")
                    .append(" | ").append(allowed(d))
                    .append(" | ").append(d.isExpressionLanguageSupported() ? cell(d.getExpressionLanguageScope().getDescription()) : "no")
                    .append(" | ").append(d.isSensitive() ? "yes" : "no")
                    .append(" | ").append(d.isRequired() ? "yes" : "no")
                    .append(" | ").append(cell(d.getDescription())).append(" |\n");
        }
        out.append("\n### Relationships\n\n| relationship | description |\n|---|---|\n");
        processor.getRelationships().stream().sorted(Comparator.comparing(Relationship::getName)).forEach(r ->
                out.append("| `").append(r.getName()).append("` | ").append(cell(r.getDescription())).append(" |\n"));
        final WritesAttributes writes = type.getAnnotation(WritesAttributes.class);
        if (writes != null) {
            out.append("\n### Attributes written\n\n| attribute | description |\n|---|---|\n");
            for (final WritesAttribute a : writes.value()) {
                out.append("| `").append(a.attribute()).append("` | ").append(cell(a.description())).append(" |\n");
            }
        }
        final ReadsAttributes reads = type.getAnnotation(ReadsAttributes.class);
        if (reads != null) {
            out.append("\n### Attributes read\n\n| attribute | description |\n|---|---|\n");
            for (final ReadsAttribute a : reads.value()) {
                out.append("| `").append(a.attribute()).append("` | ").append(cell(a.description())).append(" |\n");
            }
        }
    }

    private static String allowed(final PropertyDescriptor d) {
        final List<AllowableValue> values = d.getAllowableValues();
        if (values == null) {
            return "";
        }
        return values.stream().map(v -> "`" + cell(v.getValue()) + "`" + (v.getDisplayName().equals(v.getValue()) ? ""
                : " (" + cell(v.getDisplayName()) + ")")).collect(Collectors.joining(", "));
    }

    private static String oneLine(final String text) {
        return text.replaceAll("\\s+", " ").trim();
    }

    private static String cell(final String text) {
        return text == null ? "" : oneLine(text).replace("|", "\\|");
    }
}
