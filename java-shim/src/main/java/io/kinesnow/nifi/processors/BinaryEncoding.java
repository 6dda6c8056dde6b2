package io.kinesnow.nifi.processors;

/** PutSnowflake's Binary Encoding: how a record's bytes fields are written into the row. The names are the property's values, as the engine reads them. */
public enum BinaryEncoding implements Choice {
    HEX("Hex",
            "Bytes become hexadecimal text, what Snowflake's BINARY columns take by default (BINARY_INPUT_FORMAT "
            + "HEX)."),
    BASE64("Base64",
            "Bytes become Base64 text, for BINARY columns of a pipe or table set to BINARY_INPUT_FORMAT BASE64, "
            + "or for text columns.");

    private final Words words;

    BinaryEncoding(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
