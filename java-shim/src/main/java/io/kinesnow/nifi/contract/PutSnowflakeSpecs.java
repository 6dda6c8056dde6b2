// Generated from rust-core/src/contract/properties.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

import java.util.List;
import java.util.Map;

/** PutSnowflake's properties as the engine reads them: names, defaults and allowed values. */
public final class PutSnowflakeSpecs {
    private PutSnowflakeSpecs() {
    }

    public static final PropertySpec ACCOUNT_IDENTIFIER = new PropertySpec("Account Identifier", null, List.of());

    public static final PropertySpec URL_OVERRIDE = new PropertySpec("Snowflake URL Override", null, List.of());

    public static final PropertySpec AUTHENTICATION_STRATEGY = new PropertySpec("Authentication Strategy", "KEY_PAIR", List.of("KEY_PAIR", "SNOWFLAKE_MANAGED", "SNOWFLAKE_MANAGED_TOKEN", "SNOWFLAKE_SESSION_TOKEN"));

    public static final PropertySpec USER = new PropertySpec("User", null, List.of());

    public static final PropertySpec ROLE = new PropertySpec("Role", null, List.of());

    public static final PropertySpec PRIVATE_KEY = new PropertySpec("Private Key", null, List.of());

    public static final PropertySpec PRIVATE_KEY_FILE = new PropertySpec("Private Key File", null, List.of());

    public static final PropertySpec PRIVATE_KEY_PASSWORD = new PropertySpec("Private Key Password", null, List.of());

    public static final PropertySpec TOKEN_FILE = new PropertySpec("Session Token File", "/snowflake/session/token", List.of());

    public static final PropertySpec SERVICE_ACCOUNT_TOKEN_FILE = new PropertySpec("Service Account Token File", "/snowflake/serviceaccount/token", List.of());

    public static final PropertySpec DATABASE = new PropertySpec("Database", null, List.of());

    public static final PropertySpec SCHEMA = new PropertySpec("Schema", null, List.of());

    public static final PropertySpec TABLE = new PropertySpec("Table", null, List.of());

    public static final PropertySpec DESTINATION_TYPE = new PropertySpec("Destination Type", "TABLE", List.of("TABLE", "PIPE"));

    public static final PropertySpec PIPE = new PropertySpec("Pipe", null, List.of());

    public static final PropertySpec ICEBERG_ENABLED = new PropertySpec("Iceberg Enabled", "false", List.of("true", "false"));

    public static final PropertySpec SCHEMA_EVOLUTION_ENABLED = new PropertySpec("Schema Evolution Enabled", "false", List.of("true", "false"));

    public static final PropertySpec CHANNEL_PREFIX = new PropertySpec("Channel Name Prefix", "kinesnow", List.of());

    public static final PropertySpec MAX_BATCH_SIZE = new PropertySpec("Max Batch Size", "8 MB", List.of());

    public static final PropertySpec MAX_LATENCY = new PropertySpec("Max Latency", "250 ms", List.of());

    public static final PropertySpec COMMIT_TIMEOUT = new PropertySpec("Commit Timeout", "90 sec", List.of());

    public static final PropertySpec ORDER_WAIT = new PropertySpec("Order Wait", "60 sec", List.of());

    public static final PropertySpec MAX_IN_FLIGHT_SIZE = new PropertySpec("Max In-Flight Size", "64 MB", List.of());

    public static final PropertySpec FRESHNESS_WARNING = new PropertySpec("Freshness Warning", "0 sec", List.of());

    public static final PropertySpec RECORD_READER = new PropertySpec("Record Reader", null, List.of());

    public static final PropertySpec BINARY_ENCODING = new PropertySpec("Binary Encoding", "HEX", List.of("HEX", "BASE64"));

    /** Every property, in the order of the descriptors. */
    public static final List<PropertySpec> ALL = List.of(ACCOUNT_IDENTIFIER, URL_OVERRIDE, AUTHENTICATION_STRATEGY, USER, ROLE, PRIVATE_KEY, PRIVATE_KEY_FILE, PRIVATE_KEY_PASSWORD, TOKEN_FILE, SERVICE_ACCOUNT_TOKEN_FILE, DATABASE, SCHEMA, TABLE, DESTINATION_TYPE, PIPE, ICEBERG_ENABLED, SCHEMA_EVOLUTION_ENABLED, CHANNEL_PREFIX, MAX_BATCH_SIZE, MAX_LATENCY, COMMIT_TIMEOUT, ORDER_WAIT, MAX_IN_FLIGHT_SIZE, FRESHNESS_WARNING, RECORD_READER, BINARY_ENCODING);

    /** Properties renamed since a release: former name to current name (migrateProperties). */
    public static final Map<String, String> RENAMED = Map.of();
}
