package io.kinesnow.nifi.processors;

import org.apache.nifi.components.DescribedValue;

/**
 * One allowed value of a processor property, as an enum constant: its name is the value the engine reads, its
 * {@link Words} what the canvas shows. The enums implementing it hold only their constants and words.
 */
interface Choice extends DescribedValue {
    /** What the canvas shows for a value. */
    record Words(String displayName, String description) {
    }

    Words words();

    @Override
    default String getValue() {
        return ((Enum<?>) this).name();
    }

    @Override
    default String getDisplayName() {
        return words().displayName();
    }

    @Override
    default String getDescription() {
        return words().description();
    }
}
