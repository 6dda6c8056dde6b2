package io.kinesnow.nifi.processors;

import java.util.Map;
import org.apache.nifi.migration.PropertyConfiguration;

/**
 * Renames a processor's former property names in a user's flow ({@code migrateProperties}), so a flow saved by an
 * earlier release stays valid after a rename. The renames come from the contract ({@code ...Specs.RENAMED}).
 */
final class PropertyRenames {
    private PropertyRenames() {
    }

    /** Renames each former name the flow still holds to its current name, keeping its value. */
    static void apply(final PropertyConfiguration config, final Map<String, String> renamed) {
        renamed.forEach((former, current) -> {
            if (config.hasProperty(former)) {
                config.renameProperty(former, current);
            }
        });
    }
}
