// Generated from rust-core/src/contract/properties.rs by its unit test; do not edit.
// Regenerate: KINESNOW_WRITE_CONTRACT=1 cargo test -p kinesnow-core --lib contract
package io.kinesnow.nifi.contract;

import java.util.List;
import java.util.Map;

/** ConsumeKinesis's properties as the engine reads them: names, defaults and allowed values. */
public final class ConsumeKinesisSpecs {
    private ConsumeKinesisSpecs() {
    }

    public static final PropertySpec STREAM_NAME = new PropertySpec("Stream Name", null, List.of());

    public static final PropertySpec APPLICATION_NAME = new PropertySpec("Application Name", null, List.of());

    public static final PropertySpec REGION = new PropertySpec("Region", "us-west-2", List.of());

    public static final PropertySpec ACCESS_KEY_ID = new PropertySpec("AWS Access Key ID", null, List.of());

    public static final PropertySpec SECRET_ACCESS_KEY = new PropertySpec("AWS Secret Access Key", null, List.of());

    public static final PropertySpec PROFILE_NAME = new PropertySpec("Profile Name", null, List.of());

    public static final PropertySpec CREDENTIALS_FILE = new PropertySpec("Credentials File", null, List.of());

    public static final PropertySpec WEB_IDENTITY_TOKEN_FILE = new PropertySpec("Web Identity Token File", null, List.of());

    public static final PropertySpec ASSUME_ROLE_ARN = new PropertySpec("Assume Role ARN", null, List.of());

    public static final PropertySpec ASSUME_ROLE_SESSION_NAME = new PropertySpec("Assume Role Session Name", "nifi-kinesnow", List.of());

    public static final PropertySpec ASSUME_ROLE_EXTERNAL_ID = new PropertySpec("Assume Role External ID", null, List.of());

    public static final PropertySpec ASSUME_ROLE_SESSION_TIME = new PropertySpec("Assume Role Session Time", "3600", List.of());

    public static final PropertySpec ASSUME_ROLE_STS_REGION = new PropertySpec("Assume Role STS Region", null, List.of());

    public static final PropertySpec ASSUME_ROLE_STS_ENDPOINT = new PropertySpec("Assume Role STS Endpoint Override", null, List.of());

    public static final PropertySpec ENDPOINT_OVERRIDE = new PropertySpec("Endpoint Override URL", null, List.of());

    public static final PropertySpec DYNAMODB_ENDPOINT_OVERRIDE = new PropertySpec("DynamoDB Endpoint Override URL", null, List.of());

    public static final PropertySpec CONSUMER_TYPE = new PropertySpec("Consumer Type", "SHARED_THROUGHPUT", List.of("SHARED_THROUGHPUT", "ENHANCED_FAN_OUT"));

    public static final PropertySpec INITIAL_POSITION = new PropertySpec("Initial Stream Position", "TRIM_HORIZON", List.of("TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"));

    public static final PropertySpec POSITION_TIMESTAMP = new PropertySpec("Stream Position Timestamp", null, List.of());

    public static final PropertySpec MAX_RECORDS_PER_REQUEST = new PropertySpec("Max Records Per Request", "1000", List.of());

    public static final PropertySpec MAX_BATCH_DURATION = new PropertySpec("Max Batch Duration", "1 sec", List.of());

    public static final PropertySpec MAX_BATCH_SIZE = new PropertySpec("Max Batch Size", "10 MB", List.of());

    public static final PropertySpec MAX_BUFFER_SIZE = new PropertySpec("Max Buffer Size", "64 MB", List.of());

    public static final PropertySpec PROCESSING_STRATEGY = new PropertySpec("Processing Strategy", "FLOW_FILE", List.of("FLOW_FILE", "LINE_DELIMITED", "DEMARCATOR", "RECORD"));

    public static final PropertySpec MESSAGE_DEMARCATOR = new PropertySpec("Message Demarcator", null, List.of());

    public static final PropertySpec RECORD_READER = new PropertySpec("Record Reader", null, List.of());

    public static final PropertySpec RECORD_WRITER = new PropertySpec("Record Writer", null, List.of());

    public static final PropertySpec OUTPUT_STRATEGY = new PropertySpec("Output Strategy", "USE_VALUE", List.of("USE_VALUE", "USE_WRAPPER", "INJECT_METADATA"));

    public static final PropertySpec LAG_WARNING_THRESHOLD = new PropertySpec("Lag Warning Threshold", "50", List.of());

    public static final PropertySpec FAILOVER_TIMEOUT = new PropertySpec("Failover Timeout", "7 sec", List.of());

    public static final PropertySpec STUCK_SHARD_WARNING = new PropertySpec("Stuck Shard Warning", "5 min", List.of());

    public static final PropertySpec FAILOVER_POSITION = new PropertySpec("Failover Position", "NIFI_COMMIT", List.of("NIFI_COMMIT", "SNOWFLAKE_COMMIT"));

    /** Every property, in the order of the descriptors. */
    public static final List<PropertySpec> ALL = List.of(STREAM_NAME, APPLICATION_NAME, REGION, ACCESS_KEY_ID, SECRET_ACCESS_KEY, PROFILE_NAME, CREDENTIALS_FILE, WEB_IDENTITY_TOKEN_FILE, ASSUME_ROLE_ARN, ASSUME_ROLE_SESSION_NAME, ASSUME_ROLE_EXTERNAL_ID, ASSUME_ROLE_SESSION_TIME, ASSUME_ROLE_STS_REGION, ASSUME_ROLE_STS_ENDPOINT, ENDPOINT_OVERRIDE, DYNAMODB_ENDPOINT_OVERRIDE, CONSUMER_TYPE, INITIAL_POSITION, POSITION_TIMESTAMP, MAX_RECORDS_PER_REQUEST, MAX_BATCH_DURATION, MAX_BATCH_SIZE, MAX_BUFFER_SIZE, PROCESSING_STRATEGY, MESSAGE_DEMARCATOR, RECORD_READER, RECORD_WRITER, OUTPUT_STRATEGY, LAG_WARNING_THRESHOLD, FAILOVER_TIMEOUT, STUCK_SHARD_WARNING, FAILOVER_POSITION);

    /** Properties renamed since a release: former name to current name (migrateProperties). */
    public static final Map<String, String> RENAMED = Map.of();
}
