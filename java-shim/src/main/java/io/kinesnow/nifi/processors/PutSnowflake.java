package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.Attributes;
import io.kinesnow.nifi.contract.PutSnowflakeCounters;
import io.kinesnow.nifi.contract.PutSnowflakeSpecs;
import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.SinkBatch;
import org.apache.nifi.annotation.behavior.InputRequirement;
import org.apache.nifi.annotation.behavior.SystemResource;
import org.apache.nifi.annotation.behavior.SystemResourceConsideration;
import org.apache.nifi.annotation.behavior.ReadsAttribute;
import org.apache.nifi.annotation.behavior.ReadsAttributes;
import org.apache.nifi.annotation.behavior.Stateful;
import org.apache.nifi.annotation.behavior.TriggerSerially;
import org.apache.nifi.annotation.behavior.TriggerWhenEmpty;
import org.apache.nifi.annotation.behavior.WritesAttribute;
import org.apache.nifi.annotation.behavior.WritesAttributes;
import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.annotation.lifecycle.OnScheduled;
import org.apache.nifi.migration.PropertyConfiguration;
import org.apache.nifi.annotation.lifecycle.OnStopped;
import org.apache.nifi.components.AllowableValue;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationContext;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.components.Validator;
import org.apache.nifi.components.state.Scope;
import org.apache.nifi.components.state.StateManager;
import org.apache.nifi.components.state.StateMap;
import org.apache.nifi.controller.queue.QueueSize;
import org.apache.nifi.expression.ExpressionLanguageScope;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.processor.AbstractSessionFactoryProcessor;
import org.apache.nifi.processor.FlowFileFilter;
import org.apache.nifi.processor.ProcessContext;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.ProcessSessionFactory;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.processor.VerifiableProcessor;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.serialization.RecordReaderFactory;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

@Tags({"snowflake", "snowpipe", "streaming", "ingest", "kinesis", "kinesnow"})
@InputRequirement(InputRequirement.Requirement.INPUT_REQUIRED)
@TriggerSerially
@TriggerWhenEmpty
@SystemResourceConsideration(resource = SystemResource.MEMORY, description = "Holds up to Max In-Flight Size of row data "
        + "outside the Java heap until Snowflake accepts it in an append (a single FlowFile larger than the room left can go "
        + "over by its own size); the FlowFiles it takes are read into the heap once, to be handed over, and once more if "
        + "their channel reopens before Snowflake commits them. Their FlowFiles stay held in NiFi's sessions until committed.")
@SystemResourceConsideration(resource = SystemResource.NETWORK, description = "Appends compressed rows to Snowflake, at most "
        + "ten requests and 20 MB of rows before compression a second per channel, and polls the channels' status.")
@CapabilityDescription("Streams records into a Snowflake table (standard or Iceberg) through the Snowpipe Streaming "
        + "high-performance REST API, with its client written in Rust. Each source shard gets its own channel and its records' "
        + "shardedSequenceNumber is the offset token, so every record lands exactly once across restarts and replays. A "
        + "FlowFile goes to success only after Snowflake reports its rows committed. Content is JSON (an object, an array of "
        + "objects, or one object per line), or, with a Record Reader, any record format NiFi reads (Avro, CSV, JSON, ...): "
        + "each record becomes a row, and a record that cannot be read or become a row goes to invalid while the others load.")
@Stateful(scopes = Scope.LOCAL, description = "This processor's own id (instance.id), part of every channel name, so "
        + "that no two NiFi instances (clustered or standalone) share a channel. Kept so that a restart reuses the "
        + "channels and their committed offset tokens; clearing it starts new channels, and FlowFiles replayed after "
        + "that load again. Besides it, for View State only: each open channel (channel.<name>) with when the last commit "
        + "was learned, its pipe and the last offset token Snowflake reported committed, and each Kinesis shard loaded "
        + "since the start (shard.<stream>/<shard>) with how old its newest FlowFile in Snowflake is, how many of its "
        + "FlowFiles wait here and when that FlowFile's first record arrived in Kinesis; written at most every 5 seconds when they change and removed when the "
        + "processor stops; nothing reads those back.")
@ReadsAttributes({
    @ReadsAttribute(attribute = Attributes.STREAM, description = "With aws.kinesis.shard.id: the shard whose channel the rows go to"),
    @ReadsAttribute(attribute = Attributes.SHARD, description = "With aws.kinesis.stream.name: the shard whose channel the rows go to"),
    @ReadsAttribute(attribute = Attributes.REGION, description = "Part of the channel name, when set"),
    @ReadsAttribute(attribute = Attributes.FIRST_SEQUENCE, description = "The first record's sequence number: which queued "
            + "FlowFiles of a shard are taken first, and (with the sub-sequence number) a single record's offset token"),
    @ReadsAttribute(attribute = Attributes.FIRST_SUB, description = "The first record's sub-sequence number"),
    @ReadsAttribute(attribute = Attributes.LAST_SEQUENCE, description = "A single record's offset token, with its sub-sequence number"),
    @ReadsAttribute(attribute = Attributes.LAST_SUB, description = "The last record's sub-sequence number"),
    @ReadsAttribute(attribute = Attributes.RECORD_COUNT, description = "1: the FlowFile is one whole record, exactly once"),
    @ReadsAttribute(attribute = Attributes.PARTITION_KEY, description = "kinesisMetadata.partitionKey of a single record"),
    @ReadsAttribute(attribute = Attributes.ARRIVAL_MS, description = "kinesisMetadata.approximateArrival of a single record"),
    @ReadsAttribute(attribute = Attributes.PARENT_SHARDS, description = "A child shard's rows wait until its parents' channels "
            + "have committed what they were given"),
    @ReadsAttribute(attribute = Attributes.PREVIOUS_SEQUENCE, description = "The shard's record read before the FlowFile's first: "
            + "the FlowFile waits until its channel holds it (empty: none before it)"),
    @ReadsAttribute(attribute = Attributes.PREVIOUS_SUB, description = "That record's sub-sequence number"),
    @ReadsAttribute(attribute = Attributes.DELIVERY, description = "at-least-once: load through the shard's at-least-once "
            + "channel (set by this processor on FlowFiles it sends back)"),
    @ReadsAttribute(attribute = Attributes.APPLICATION, description = "The consumer whose records these are: a FlowFile "
            + "after records of this consumer that never load (parse.failure, invalid, empty) does not wait for them; with "
            + "Failover Position SNOWFLAKE_COMMIT, the consumer whose lease the records were read under"),
    @ReadsAttribute(attribute = Attributes.STREAM_ARN, description = "With SNOWFLAKE_COMMIT: the stream, as the lease table names it"),
    @ReadsAttribute(attribute = Attributes.NODE, description = "With SNOWFLAKE_COMMIT: the node that read the records"),
    @ReadsAttribute(attribute = Attributes.LEASE_COUNTER, description = "With SNOWFLAKE_COMMIT: the lease's counter when read"),
    @ReadsAttribute(attribute = "fragment.*", description = "Set by split processors: the rows load at least once")
})
@WritesAttributes({
    @WritesAttribute(attribute = Attributes.CHANNEL, description = "The Snowpipe Streaming channel the rows went through"),
    @WritesAttribute(attribute = Attributes.DELIVERY, description = "at-least-once on a FlowFile sent back to the incoming "
            + "queue because its records came after its channel had waited for them and gone on without them: it then "
            + "loads through the shard's at-least-once channel"),
    @WritesAttribute(attribute = Attributes.OFFSET_TOKEN, description = "The offset token of the FlowFile's last row"),
    @WritesAttribute(attribute = Attributes.ROWS_SENT, description = "Rows of the FlowFile sent by this processor"),
    @WritesAttribute(attribute = Attributes.ROWS_SKIPPED,
            description = "Rows of the FlowFile skipped because Snowflake had already committed them (a replay)"),
    @WritesAttribute(attribute = Attributes.ERROR_MESSAGE, description = "Why the FlowFile went to failure or invalid"),
    @WritesAttribute(attribute = Attributes.RECORDS_INVALID, description = "With a Record Reader: the numbers (from 1, "
            + "comma-separated) of the records that could not be read or become rows, on the FlowFile and on its invalid child"),
    @WritesAttribute(attribute = Attributes.RECORDS_SENT, description = "With a Record Reader, on the invalid child: how "
            + "many records of the parent FlowFile were handed to Snowflake with it (they load when the parent goes to success)"),
    @WritesAttribute(attribute = Attributes.RECORDS_UNREAD, description = "With a Record Reader, on the invalid child: true "
            + "when reading stopped at a record the reader could not get past, so the content after it was not loaded")
})
public class PutSnowflake extends AbstractSessionFactoryProcessor implements VerifiableProcessor {
    static final PropertyDescriptor ACCOUNT_IDENTIFIER = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.ACCOUNT_IDENTIFIER.name()).description("The Snowflake account identifier, such as myorg-myaccount. Required "
                    + "with Key Pair. With Snowflake Managed it is used only when the SNOWFLAKE_HOST environment variable is "
                    + "not set (the account URL is then https://<account>.snowflakecomputing.com).")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor URL_OVERRIDE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.URL_OVERRIDE.name())
            .description("An https URL used instead of the account URL, for private link or a test server. It wins over "
                    + "everything: the account URL is this URL when set, else (Snowflake Managed) https://<SNOWFLAKE_HOST> "
                    + "when that environment variable is set, else https://<account>.snowflakecomputing.com.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor AUTHENTICATION_STRATEGY = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.AUTHENTICATION_STRATEGY.name()).description("How the processor authenticates to Snowflake: Key Pair, or "
                    + "Snowflake Managed on Openflow's Snowflake deployments (Openflow's SNOWFLAKE_MANAGED).")
            .required(true).allowableValues(AuthenticationStrategy.class)
            .defaultValue(PutSnowflakeSpecs.AUTHENTICATION_STRATEGY.defaultValue()).build();
    static final PropertyDescriptor USER = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.USER.name()).description("The Snowflake user (a SERVICE user is recommended).")
            .required(true).dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.KEY_PAIR).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ROLE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.ROLE.name()).description("The role to use; the user's default role when empty.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor PRIVATE_KEY = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.PRIVATE_KEY.name()).description("The user's RSA private key, PEM-encoded PKCS#8, encrypted or not.")
            .required(false).sensitive(true).dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.KEY_PAIR).addValidator(Validator.VALID).build();
    static final PropertyDescriptor PRIVATE_KEY_FILE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.PRIVATE_KEY_FILE.name()).description("A file holding the private key, instead of Private Key.")
            .required(false).dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.KEY_PAIR).addValidator(Validator.VALID).build();
    static final PropertyDescriptor PRIVATE_KEY_PASSWORD = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.PRIVATE_KEY_PASSWORD.name()).description("The password of an encrypted private key.")
            .required(false).sensitive(true).dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.KEY_PAIR).addValidator(Validator.VALID).build();
    static final PropertyDescriptor TOKEN_FILE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.TOKEN_FILE.name()).description("Where the platform mounts the Snowflake session token, used when the "
                    + "Service Account Token File cannot be read; sent as it is. Read again on every use.")
            .required(true).defaultValue(PutSnowflakeSpecs.TOKEN_FILE.defaultValue())
            .dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.SNOWFLAKE_MANAGED, AuthenticationStrategy.SNOWFLAKE_MANAGED_TOKEN,
                    AuthenticationStrategy.SNOWFLAKE_SESSION_TOKEN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor SERVICE_ACCOUNT_TOKEN_FILE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.SERVICE_ACCOUNT_TOKEN_FILE.name()).description("Where the platform mounts the service account's OIDC token. "
                    + "When this file can be read it wins over the session token and is sent as a workload identity token "
                    + "(Bearer WIF.OIDC.<token>), as Openflow does. Read again on every use.")
            .required(true).defaultValue(PutSnowflakeSpecs.SERVICE_ACCOUNT_TOKEN_FILE.defaultValue())
            .dependsOn(AUTHENTICATION_STRATEGY, AuthenticationStrategy.SNOWFLAKE_MANAGED, AuthenticationStrategy.SNOWFLAKE_MANAGED_TOKEN,
                    AuthenticationStrategy.SNOWFLAKE_SESSION_TOKEN).addValidator(Validator.VALID).build();
    /** Said of each destination property: they take Expression Language, evaluated per FlowFile. */
    private static final String PER_FLOW_FILE = " Supports Expression Language with FlowFile attributes, evaluated for each "
            + "FlowFile, so one processor can write to several tables (at most 64 destinations at once; a FlowFile whose "
            + "value evaluates to an empty name goes to failure).";
    static final PropertyDescriptor DATABASE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.DATABASE.name()).description("The destination database." + PER_FLOW_FILE).required(true)
            .expressionLanguageSupported(ExpressionLanguageScope.FLOWFILE_ATTRIBUTES).addValidator(Validator.VALID).build();
    static final PropertyDescriptor SCHEMA = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.SCHEMA.name()).description("The destination schema." + PER_FLOW_FILE).required(true)
            .expressionLanguageSupported(ExpressionLanguageScope.FLOWFILE_ATTRIBUTES).addValidator(Validator.VALID).build();
    static final PropertyDescriptor TABLE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.TABLE.name()).description("The destination table, written through its default pipe <TABLE>-STREAMING with "
                    + "Destination Type TABLE." + PER_FLOW_FILE).required(true)
            .expressionLanguageSupported(ExpressionLanguageScope.FLOWFILE_ATTRIBUTES).addValidator(Validator.VALID).build();
    static final PropertyDescriptor DESTINATION_TYPE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.DESTINATION_TYPE.name()).description("Which pipe the rows go through.")
            .required(true).allowableValues(DestinationType.class).defaultValue(PutSnowflakeSpecs.DESTINATION_TYPE.defaultValue()).build();
    static final PropertyDescriptor PIPE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.PIPE.name()).description("The named pipe, with Destination Type PIPE." + PER_FLOW_FILE)
            .required(true).dependsOn(DESTINATION_TYPE, DestinationType.PIPE)
            .expressionLanguageSupported(ExpressionLanguageScope.FLOWFILE_ATTRIBUTES).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ICEBERG_ENABLED = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.ICEBERG_ENABLED.name())
            .description("The table is a Snowflake-managed Iceberg table: the kinesisMetadata object always carries every field.")
            .required(true).allowableValues("true", "false").defaultValue(PutSnowflakeSpecs.ICEBERG_ENABLED.defaultValue()).build();
    static final PropertyDescriptor SCHEMA_EVOLUTION_ENABLED = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.SCHEMA_EVOLUTION_ENABLED.name())
            .description("Whether the table has ENABLE_SCHEMA_EVOLUTION (new top-level keys become new columns). Snowflake "
                    + "applies the table's own setting; this property records it for the flow and its parameter context and "
                    + "changes nothing the processor sends.")
            .required(true).allowableValues("true", "false").defaultValue(PutSnowflakeSpecs.SCHEMA_EVOLUTION_ENABLED.defaultValue()).build();
    static final PropertyDescriptor CHANNEL_PREFIX = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.CHANNEL_PREFIX.name())
            .description("Channels are named <prefix>_<instance>_<region>_<stream>_<shard>, one per source shard and "
                    + "processor instance (the instance id is kept in the processor's local state; the region comes from "
                    + "aws.kinesis.region when ConsumeKinesis wrote it), with _atleastonce appended for rows without exact "
                    + "offset tokens and <prefix>_<instance>_direct for FlowFiles not from Kinesis. Change the prefix only "
                    + "with care, since a new channel has no committed offset token.")
            .required(true).defaultValue(PutSnowflakeSpecs.CHANNEL_PREFIX.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_BATCH_SIZE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.MAX_BATCH_SIZE.name()).description("The most uncompressed row data sent in one append request, up to 16 MB.")
            .required(true).defaultValue(PutSnowflakeSpecs.MAX_BATCH_SIZE.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_LATENCY = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.MAX_LATENCY.name()).description("The longest rows wait in the processor before they are sent.")
            .required(true).defaultValue(PutSnowflakeSpecs.MAX_LATENCY.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor COMMIT_TIMEOUT = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.COMMIT_TIMEOUT.name())
            .description("How long to wait for Snowflake to report rows committed before the channel is reopened (Snowflake "
                    + "discards what it did not commit) and the rows are sent again.")
            .required(true).defaultValue(PutSnowflakeSpecs.COMMIT_TIMEOUT.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ORDER_WAIT = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.ORDER_WAIT.name())
            .description("How long a FlowFile waits for the FlowFiles with the records ConsumeKinesis read before it "
                    + "(NiFi's queues keep no order) before its channel goes on without them, with a warning; should they "
                    + "come later, they load at least once. Keep it above the Penalty Duration of the processors on the way. "
                    + "A flow that drops FlowFiles between ConsumeKinesis and this processor waits this long at each gap.")
            .required(true).defaultValue(PutSnowflakeSpecs.ORDER_WAIT.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_IN_FLIGHT_SIZE = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.MAX_IN_FLIGHT_SIZE.name())
            .description("The most row data held by the processor, over all channels, until Snowflake has accepted it in "
                    + "an append: the FlowFiles' content, or with a Record Reader the JSON rows made from their records. "
                    + "Rows Snowflake accepted are dropped while it commits them (their FlowFiles stay held in NiFi until "
                    + "it reports them committed); if a channel reopens before that, their content is read again from "
                    + "NiFi's content repository, within this budget. Bounds the processor's memory; at least Max Batch "
                    + "Size. One FlowFile is always taken, so a single FlowFile (or its rows) larger than the room left can "
                    + "go over it by its own size, and a channel reading its content again takes at least one FlowFile at "
                    + "a time.")
            .required(true).defaultValue(PutSnowflakeSpecs.MAX_IN_FLIGHT_SIZE.defaultValue()).addValidator(Validator.VALID).build();

            static final PropertyDescriptor FRESHNESS_WARNING = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.FRESHNESS_WARNING.name())
            .description("Warn, with a bulletin that names the shard, when FlowFiles of a Kinesis shard wait in this "
                    + "processor while the newest of the shard's rows Snowflake has committed arrived in Kinesis longer ago "
                    + "than this (before anything of the shard is committed, the oldest FlowFile waiting counts); and warn "
                    + "once more when the shard is fresh again. An idle stream never warns: nothing waits. The arrival is "
                    + "that of each FlowFile's first record. 0 sec (the default) turns the warning off. Up to 1 day.")
            .required(true).defaultValue(PutSnowflakeSpecs.FRESHNESS_WARNING.defaultValue())
            .addValidator(Validator.VALID).build();
    static final PropertyDescriptor RECORD_READER = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.RECORD_READER.name())
            .description("Reads the FlowFile's records in any format (Avro, CSV, JSON, ...): each record becomes one row, its "
                    + "first-level fields the columns. Without it the content must be JSON objects. A record that cannot be "
                    + "read or become a row goes to invalid (in a copy of the FlowFile) while the others load; see the "
                    + "processor's documentation for the type mapping.")
            .required(false).identifiesControllerService(RecordReaderFactory.class).build();
    static final PropertyDescriptor BINARY_ENCODING = new PropertyDescriptor.Builder()
            .name(PutSnowflakeSpecs.BINARY_ENCODING.name()).description("How the records' bytes fields are written into the row.")
            .required(true).allowableValues(BinaryEncoding.class).defaultValue(PutSnowflakeSpecs.BINARY_ENCODING.defaultValue())
            .dependsOn(RECORD_READER).build();

    static final List<PropertyDescriptor> PROPERTIES = List.of(ACCOUNT_IDENTIFIER, URL_OVERRIDE, AUTHENTICATION_STRATEGY,
            USER, ROLE, PRIVATE_KEY, PRIVATE_KEY_FILE, PRIVATE_KEY_PASSWORD, TOKEN_FILE, SERVICE_ACCOUNT_TOKEN_FILE, DATABASE, SCHEMA, TABLE,
            DESTINATION_TYPE, PIPE, ICEBERG_ENABLED, SCHEMA_EVOLUTION_ENABLED, CHANNEL_PREFIX, MAX_BATCH_SIZE,
            MAX_LATENCY, COMMIT_TIMEOUT, MAX_IN_FLIGHT_SIZE, ORDER_WAIT, FRESHNESS_WARNING);

    /**
     * What NiFi shows: the properties the engine reads, NiFi's Proxy Configuration Service (see {@link ProxyService}),
     * and the Record Reader with its Binary Encoding, which only the Java side uses (see {@link RecordContent}).
     */
    static final List<PropertyDescriptor> DESCRIPTORS = withRecordReader(ProxyService.withProxy(PROPERTIES));

    public static final Relationship REL_SUCCESS = new Relationship.Builder()
            .name("success").description("FlowFiles whose rows Snowflake has committed.").build();
    public static final Relationship REL_FAILURE = new Relationship.Builder()
            .name("failure").description("FlowFiles that could not be delivered: missing table or pipe, no privilege, and similar.").build();
    public static final Relationship REL_INVALID = new Relationship.Builder()
            .name("invalid").description("FlowFiles whose content is not JSON objects, or whose rows Snowflake rejected. With a "
                    + "Record Reader: FlowFiles it cannot read at all, and copies of FlowFiles some of whose records could not "
                    + "be read or become rows (the other records load with the original).").build();
    public static final Relationship REL_EMPTY = new Relationship.Builder()
            .name("empty").description("FlowFiles without any row (no content, blank lines, or an empty JSON array): nothing is "
                    + "sent. Auto-terminated unless connected.")
            .autoTerminateDefault(true).build();

    /** The attributes in which each FlowFile's evaluated destination crosses JNI (read by rust-core's destinations). */
    static final String ATTR_DATABASE = Attributes.DATABASE;
    static final String ATTR_SCHEMA = Attributes.SCHEMA;
    static final String ATTR_TABLE = Attributes.TABLE;
    static final String ATTR_PIPE = Attributes.PIPE;
    /** Why no record of the FlowFile could be read with the Record Reader (read by rust-core's rows, which routes it to invalid). */
    static final String ATTR_RECORDS_UNREADABLE = Attributes.RECORDS_UNREADABLE;

    /** Set on a FlowFile sent back to the queue for the at-least-once channels (rust-core's {@code rows::ATTR_DELIVERY}). */
    static final String ATTR_DELIVERY = Attributes.DELIVERY;
    static final String AT_LEAST_ONCE = Attributes.AT_LEAST_ONCE;

    /** The local-state key of this processor's own id. */
    static final String INSTANCE_STATE_KEY = "instance.id";

    /**
     * The gaps this processor's channels passed over (the engine's {@code snowflake::gap_memory::STATE_KEY}): kept in
     * the local state across stops and restarts, and handed back to the engine at the start.
     */
    static final String PASSED_GAPS_STATE_KEY = "passed.gaps";

    /** The engine's fact that takes {@link #PASSED_GAPS_STATE_KEY}'s value (its {@code put_snowflake::PASSED_GAPS}). */
    static final String PASSED_GAPS_FACT = "PutSnowflake Passed Gaps";

    /** A FlowFile batch waits this long for its outcomes when nothing else is to be done. */
    private static final long OUTCOME_WAIT_MILLIS = 100;
    private static final int MAX_FLOW_FILES_PER_SUBMIT = 10_000;
    /** The most queued FlowFiles looked at to choose from (NiFi's default swap threshold: a queue's part held in memory). */
    private static final int MAX_PEEK = 20_000;

    /** The rules (validation, verification) the native side applies to the settings. */
    private final NativeComponent rules = new NativeComponent(NativeBridge.PUT_SNOWFLAKE);
    private final RowSink engine;
    private final EngineCounters engineCounters = new EngineCounters(PutSnowflakeCounters.ENGINE, PutSnowflakeCounters.GAUGES);
    private final StatusState status =
            new StatusState(java.util.Set.of(INSTANCE_STATE_KEY), java.util.Set.of(PASSED_GAPS_STATE_KEY));
    /** Sessions whose FlowFiles wait for Snowflake. */
    private final HeldSessions held = new HeldSessions();
    /** {@code snowflake://<account>}, to which provenance adds each FlowFile's destination. */
    private volatile String transitBase;

    public PutSnowflake() {
        this(new NativeRowSink());
    }

    /** With another engine; for tests of the processor's own logic. */
    PutSnowflake(final RowSink engine) {
        this.engine = engine;
    }

    private static List<PropertyDescriptor> withRecordReader(final List<PropertyDescriptor> properties) {
        final List<PropertyDescriptor> all = new ArrayList<>(properties);
        all.add(RECORD_READER);
        all.add(BINARY_ENCODING);
        return List.copyOf(all);
    }

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return DESCRIPTORS;
    }

    @Override
    public Set<Relationship> getRelationships() {
        return Set.of(REL_SUCCESS, REL_FAILURE, REL_INVALID, REL_EMPTY);
    }

    /**
     * "Verify Properties": step by step, with read-only probes of the services (see the processor's documentation
     * for the steps).
     */
    @Override
    public List<ConfigVerificationResult> verify(final ProcessContext context, final ComponentLog verificationLogger,
                                                 final Map<String, String> attributes) {
        return rules.verify(context, PROPERTIES, attributes, ProxyService.facts(context));
    }

    @Override
    protected Collection<ValidationResult> customValidate(final ValidationContext context) {
        return ProxyService.validate(context, rules.validate(context, PROPERTIES));
    }

    /**
     * This processor's own id, from its local state (made on the first start and kept): every channel name carries
     * it, so NiFi instances, clustered or standalone, never share a channel.
     */
    static String instanceId(final StateManager state) {
        try {
            final StateMap current = state.getState(Scope.LOCAL);
            final String known = current.get(INSTANCE_STATE_KEY);
            if (known != null && !known.isBlank()) {
                return known;
            }
            final String made = UUID.randomUUID().toString().replace("-", "").substring(0, 12);
            final Map<String, String> next = new HashMap<>(current.toMap());
            next.put(INSTANCE_STATE_KEY, made);
            state.setState(next, Scope.LOCAL);
            return made;
        } catch (final IOException e) {
            throw new UncheckedIOException("PutSnowflake cannot read or keep its instance id in the local state", e);
        }
    }

    /** The gaps the local state kept ({@link #PASSED_GAPS_STATE_KEY}); empty when none or unreadable. */
    static String passedGaps(final StateManager state) {
        try {
            final String kept = state.getState(Scope.LOCAL).get(PASSED_GAPS_STATE_KEY);
            return kept == null ? "" : kept;
        } catch (final IOException e) {
            throw new UncheckedIOException("PutSnowflake cannot read the gaps its channels passed over from the local state", e);
        }
    }

    @Override
    public void migrateProperties(final PropertyConfiguration config) {
        PropertyRenames.apply(config, PutSnowflakeSpecs.RENAMED);
    }

    @OnScheduled
    public void onScheduled(final ProcessContext context) {
        final String instance = instanceId(context.getStateManager());
        engine.open(context, getLogger(), NativeComponent.withFacts(ProxyService.facts(context), "PutSnowflake Instance", instance,
                NativeComponent.NODE_IDENTITY, NativeComponent.nodeIdentity(getNodeTypeProvider()),
                PASSED_GAPS_FACT, passedGaps(context.getStateManager())));
        transitBase = "snowflake://" + accountForProvenance(context);
        status.start(context.getStateManager(), getLogger(), engine::status);
    }

    /** The account named in provenance: the identifier, else the host Openflow's managed deployments set. */
    private static String accountForProvenance(final ProcessContext context) {
        final String account = context.getProperty(ACCOUNT_IDENTIFIER).getValue();
        if (account != null && !account.isBlank()) {
            return account;
        }
        final String host = System.getenv("SNOWFLAKE_HOST");
        return host == null || host.isBlank() ? "snowflake" : host;
    }

    /**
     * Stops the engine, then rolls back every session still waiting: its FlowFiles return to the queue, and their
     * replay skips whatever Snowflake committed meanwhile.
     */
    @OnStopped
    public void onStopped(final ProcessContext context) {
        status.stop();
        // The gaps passed over until now are written before the engine closes (they survive the clear).
        try {
            status.update(context.getStateManager(), getLogger(), engine::status);
        } catch (final RuntimeException e) {
            getLogger().debug("View State not updated at stop: {}", e.getMessage()); // the engine never started
        }
        status.clear(context.getStateManager(), getLogger());
        engine.close();
        held.rollBackAll();
    }

    @Override
    public void onTrigger(final ProcessContext context, final ProcessSessionFactory sessionFactory) {
        final boolean resent = resend(context);
        final boolean submitted = submit(context, sessionFactory) || resent;
        engineCounters.drain(sessionFactory, engine::counters);
        final byte[] outcomes = engine.outcomes(submitted ? 0 : OUTCOME_WAIT_MILLIS);
        if (outcomes != null) {
            route(sessionFactory, SinkBatch.decodeOutcomes(outcomes));
        }
    }

    /**
     * Takes as many FlowFiles as the engine's in-flight budget allows and hands them over in one call. The budget counts
     * what crosses to the engine: the content itself, or with a Record Reader the rows made from it (JSON, often several
     * times the size of Avro or CSV), so FlowFiles are then read one at a time until their rows fill it.
     */
    private boolean submit(final ProcessContext context, final ProcessSessionFactory sessionFactory) {
        final long capacity = engine.capacity();
        if (capacity <= 0) {
            return false;
        }
        final ProcessSession session = sessionFactory.createSession();
        final RecordReaderFactory reader = context.getProperty(RECORD_READER).asControllerService(RecordReaderFactory.class);
        final HeldSessions.Held h = new HeldSessions.Held(session);
        final SinkBatch batch = new SinkBatch();
        try {
            final List<FlowFile> chosen = chosen(session, capacity);
            if (reader == null) {
                for (final FlowFile flowFile : chosen == null ? session.get(sizeLimit(capacity)) : chosen) {
                    add(context, h, batch, flowFile, sourceAttributes(flowFile), content(session, flowFile));
                }
            } else {
                addRecords(context, sessionFactory, session, reader, h, batch, capacity, chosen);
            }
            if (h.waiting.isEmpty()) {
                session.commitAsync();
                return false;
            }
            engine.submit(batch.encode());
        } catch (final RuntimeException e) {
            session.rollback();
            throw e;
        }
        held.hold(h);
        return true;
    }

    /**
     * Hands over again the content of the held FlowFiles the engine asked for (it drops rows once Snowflake accepted their
     * append; when a channel reopens before Snowflake committed them, it needs them again). Read from each FlowFile's own
     * session as when it was taken, so the rows are the same; the engine paces its requests by its in-flight budget, so
     * these are not counted against {@link RowSink#capacity()} here. Returns whether anything was handed over.
     */
    private boolean resend(final ProcessContext context) {
        if (!held.hasResends()) {
            return false;
        }
        final RecordReaderFactory reader = context.getProperty(RECORD_READER).asControllerService(RecordReaderFactory.class);
        final RecordRows rows = reader == null ? null
                : new RecordRows(context.getProperty(BINARY_ENCODING).asAllowableValue(BinaryEncoding.class));
        final SinkBatch batch = new SinkBatch();
        for (final Long id : held.takeResends()) {
            final HeldSessions.Held h = held.of(id);
            final FlowFile flowFile = h == null ? null : h.waiting.get(id);
            if (flowFile == null) {
                continue; // it has its outcome meanwhile
            }
            final Map<String, String> attributes = sourceAttributes(flowFile);
            attributes.putAll(destination(context, flowFile));
            final byte[] content = reader == null ? content(h.session, flowFile) : readRecords(h.session, reader, rows, flowFile).rows();
            batch.add(id, attributes, content);
        }
        if (batch.count() == 0) {
            return false;
        }
        engine.submit(batch.encode());
        return true;
    }

    /**
     * Reads FlowFiles with the Record Reader, one at a time, until their rows reach {@code capacity} bytes (at least one):
     * the {@code chosen} ones in their order (those not read go back to the queue at once), or else as the queue hands
     * them out.
     */
    private void addRecords(final ProcessContext context, final ProcessSessionFactory sessionFactory, final ProcessSession session,
                            final RecordReaderFactory reader, final HeldSessions.Held h, final SinkBatch batch, final long capacity,
                            final List<FlowFile> chosen) {
        final RecordRows rows = new RecordRows(context.getProperty(BINARY_ENCODING).asAllowableValue(BinaryEncoding.class));
        final Iterator<FlowFile> order = chosen == null ? null : chosen.iterator();
        long taken = 0;
        while (taken < capacity && h.waiting.size() < MAX_FLOW_FILES_PER_SUBMIT) {
            final FlowFile next = order == null ? first(session.get(oneWithin(capacity - taken, h.waiting.isEmpty())))
                    : order.hasNext() ? order.next() : null;
            if (next == null) {
                break;
            }
            final Map<String, String> attributes = sourceAttributes(next);
            final RecordContent.Read read = readRecords(session, reader, rows, next);
            add(context, h, batch, splitOffInvalid(session, next, read, attributes), attributes, read.rows());
            taken += read.rows().length;
        }
        final List<FlowFile> unread = new ArrayList<>();
        while (order != null && order.hasNext()) {
            unread.add(order.next());
        }
        if (!unread.isEmpty()) { // back to the queue as they were, now: the session that took them waits for Snowflake
            final ProcessSession back = sessionFactory.createSession();
            session.migrate(back, unread);
            back.transfer(unread);
            back.commitAsync();
        }
    }

    private static FlowFile first(final List<FlowFile> flowFiles) {
        return flowFiles.isEmpty() ? null : flowFiles.get(0);
    }

    /**
     * When the queue holds more than {@code capacity} bytes (or more FlowFiles than one submission takes), which FlowFiles
     * come matters: a FlowFile waits in its channel for the records before it, and waiting ones hold the budget. Then the
     * core chooses from what the queue would hand out (up to {@link #MAX_PEEK} FlowFiles, the queue's order unchanged):
     * the queue's order decides how many each shard gets, and within a shard the records read first come first (rust-core's
     * {@code snowflake::take_order}). Returns the chosen FlowFiles, taken into the session in that order; {@code null}
     * when the queue fits and everything may come as the queue hands it out.
     */
    private List<FlowFile> chosen(final ProcessSession session, final long capacity) {
        final QueueSize queued = session.getQueueSize();
        if (queued.getByteCount() <= capacity && queued.getObjectCount() <= MAX_FLOW_FILES_PER_SUBMIT) {
            return null;
        }
        final List<FlowFile> seen = peek(session);
        if (seen.isEmpty()) {
            return List.of();
        }
        final SinkBatch.Candidates candidates = new SinkBatch.Candidates();
        for (final FlowFile flowFile : seen) {
            candidates.add(flowFile.getSize(), sourceAttributes(flowFile));
        }
        final int[] picks = engine.choose(candidates.encode());
        final Map<Long, Integer> rank = new HashMap<>();
        for (int i = 0; i < picks.length && rank.size() < MAX_FLOW_FILES_PER_SUBMIT; i++) {
            rank.putIfAbsent(seen.get(picks[i]).getId(), rank.size());
        }
        final List<FlowFile> taken = new ArrayList<>(session.get(only(rank.keySet())));
        taken.sort(Comparator.comparing(flowFile -> rank.get(flowFile.getId())));
        return taken;
    }

    /** The FlowFiles the queue would hand out, in its order, up to {@link #MAX_PEEK}; none is taken. */
    private static List<FlowFile> peek(final ProcessSession session) {
        final List<FlowFile> seen = new ArrayList<>();
        session.get(flowFile -> {
            if (seen.size() >= MAX_PEEK) {
                return FlowFileFilter.FlowFileFilterResult.REJECT_AND_TERMINATE;
            }
            seen.add(flowFile);
            return FlowFileFilter.FlowFileFilterResult.REJECT_AND_CONTINUE;
        });
        return seen;
    }

    /** Exactly the FlowFiles with these ids (those still queued). */
    private static FlowFileFilter only(final Set<Long> ids) {
        final int[] left = {ids.size()};
        return flowFile -> {
            if (!ids.contains(flowFile.getId())) {
                return FlowFileFilter.FlowFileFilterResult.REJECT_AND_CONTINUE;
            }
            return --left[0] > 0 ? FlowFileFilter.FlowFileFilterResult.ACCEPT_AND_CONTINUE
                    : FlowFileFilter.FlowFileFilterResult.ACCEPT_AND_TERMINATE;
        };
    }

    /** Adds one FlowFile, with its evaluated destination, to the batch and to the FlowFiles its session waits on. */
    private static void add(final ProcessContext context, final HeldSessions.Held h, final SinkBatch batch, final FlowFile flowFile,
                            final Map<String, String> attributes, final byte[] content) {
        final Map<String, String> destination = destination(context, flowFile);
        attributes.putAll(destination);
        batch.add(flowFile.getId(), attributes, content);
        h.waiting.put(flowFile.getId(), flowFile);
        h.destinations.put(flowFile.getId(), String.join("/", destination.get(ATTR_DATABASE),
                destination.get(ATTR_SCHEMA), destination.get(ATTR_TABLE)));
    }

    /** FlowFiles up to {@code capacity} bytes of content (always at least one). */
    private static FlowFileFilter sizeLimit(final long capacity) {
        final long[] taken = {0, 0};
        return flowFile -> {
            if (taken[1] > 0 && (taken[0] + flowFile.getSize() > capacity || taken[1] >= MAX_FLOW_FILES_PER_SUBMIT)) {
                return FlowFileFilter.FlowFileFilterResult.REJECT_AND_TERMINATE;
            }
            taken[0] += flowFile.getSize();
            taken[1]++;
            return FlowFileFilter.FlowFileFilterResult.ACCEPT_AND_CONTINUE;
        };
    }

    /**
     * The next FlowFile, if its content fits in {@code room} bytes or it would be the first of the batch. Its size is only
     * a first guess at its rows' size; the caller counts the rows.
     */
    private static FlowFileFilter oneWithin(final long room, final boolean first) {
        return flowFile -> first || flowFile.getSize() <= room
                ? FlowFileFilter.FlowFileFilterResult.ACCEPT_AND_TERMINATE
                : FlowFileFilter.FlowFileFilterResult.REJECT_AND_TERMINATE;
    }

    /**
     * The attributes the core reads: where the records came from (ConsumeKinesis writes them) and whether a split
     * processor cut the FlowFile (fragment.*), which decides whether its rows have exact offset tokens.
     */
    private static Map<String, String> sourceAttributes(final FlowFile flowFile) {
        final Map<String, String> attributes = new HashMap<>();
        for (final Map.Entry<String, String> e : flowFile.getAttributes().entrySet()) {
            if (e.getKey().startsWith(Attributes.KINESIS_PREFIX) || e.getKey().startsWith(Attributes.FRAGMENT_PREFIX) || e.getKey().equals(Attributes.RECORD_COUNT)
                    || e.getKey().startsWith(Attributes.KINESNOW_PREFIX)) {
                attributes.put(e.getKey(), e.getValue());
            }
        }
        return attributes;
    }

    /**
     * The FlowFile's destination: Database, Schema, Table (and Pipe with Destination Type PIPE) evaluated against its
     * attributes. Whether a name can be used is decided by the core, which sends the FlowFile to failure if not.
     */
    static Map<String, String> destination(final ProcessContext context, final FlowFile flowFile) {
        final Map<String, String> names = new HashMap<>();
        names.put(ATTR_DATABASE, evaluated(context, DATABASE, flowFile));
        names.put(ATTR_SCHEMA, evaluated(context, SCHEMA, flowFile));
        names.put(ATTR_TABLE, evaluated(context, TABLE, flowFile));
        if (context.getProperty(DESTINATION_TYPE).asAllowableValue(DestinationType.class) == DestinationType.PIPE) {
            names.put(ATTR_PIPE, evaluated(context, PIPE, flowFile));
        }
        return names;
    }

    private static String evaluated(final ProcessContext context, final PropertyDescriptor property, final FlowFile flowFile) {
        final String value = context.getProperty(property).evaluateAttributeExpressions(flowFile).getValue();
        return value == null ? "" : value;
    }

    private RecordContent.Read readRecords(final ProcessSession session, final RecordReaderFactory reader, final RecordRows rows,
                                           final FlowFile flowFile) {
        try (InputStream in = session.read(flowFile)) {
            return RecordContent.read(reader, rows, flowFile, in, getLogger());
        } catch (final IOException e) {
            throw new UncheckedIOException("cannot read the content of " + flowFile, e);
        }
    }

    /**
     * Applies what reading found. No record loads: the engine is told why (it routes the FlowFile to invalid whole).
     * Some records could not become rows: a copy of the FlowFile (its content whole, since a record's exact bytes are not
     * known) goes to invalid at once in the same session, naming them, while the FlowFile itself carries the other
     * records' rows on. Returns the FlowFile as it now is.
     */
    private FlowFile splitOffInvalid(final ProcessSession session, final FlowFile flowFile, final RecordContent.Read read,
                                     final Map<String, String> attributes) {
        attributes.remove(ATTR_RECORDS_UNREADABLE);
        if (read.wholeInvalid()) {
            attributes.put(ATTR_RECORDS_UNREADABLE, read.reason());
            return read.problems().isEmpty() ? flowFile : session.putAttribute(flowFile, Attributes.RECORDS_INVALID, read.indexes());
        }
        if (read.problems().isEmpty()) {
            return flowFile;
        }
        FlowFile invalid = session.clone(flowFile);
        final Map<String, String> said = new HashMap<>();
        said.put(Attributes.ERROR_MESSAGE, read.reason() + ". The other " + read.rowCount() + " record(s) were sent with FlowFile "
                + flowFile.getAttribute("uuid"));
        said.put(Attributes.RECORDS_INVALID, read.indexes());
        said.put(Attributes.RECORDS_SENT, Long.toString(read.rowCount()));
        if (read.stoppedAt() > 0) {
            said.put(Attributes.RECORDS_UNREAD, "true");
        }
        invalid = session.putAllAttributes(invalid, said);
        getLogger().warn("{}: {}", flowFile, said.get(Attributes.ERROR_MESSAGE));
        session.transfer(invalid, REL_INVALID);
        return session.putAttribute(flowFile, Attributes.RECORDS_INVALID, read.indexes());
    }

    private static byte[] content(final ProcessSession session, final FlowFile flowFile) {
        try (InputStream in = session.read(flowFile)) {
            return in.readAllBytes();
        } catch (final IOException e) {
            throw new UncheckedIOException("cannot read the content of " + flowFile, e);
        }
    }

    /**
     * Routes each FlowFile with a known outcome; a session is committed once all of its FlowFiles are routed. A FlowFile
     * that goes back into the flow (failure, or the queue) while others of its session still wait is committed on its own
     * at once: one of those may be waiting in the engine for it to come back (an earlier FlowFile of its lease, refused by
     * Snowflake, on a looped {@code failure}), and holding it for them would keep both waiting until Order Wait.
     */
    private void route(final ProcessSessionFactory sessionFactory, final List<SinkBatch.Outcome> outcomes) {
        // FlowFiles going back into the flow from sessions that still wait, by session: sent on together below.
        final Map<HeldSessions.Held, List<FlowFile>> goingBack = new HashMap<>();
        for (final SinkBatch.Outcome outcome : outcomes) {
            if (outcome.route() == SinkBatch.ROUTE_RESEND) {
                held.askAgain(outcome.flowFileId());
                continue;
            }
            final HeldSessions.Held h = held.settle(outcome.flowFileId());
            if (h == null) {
                continue; // its session was rolled back
            }
            FlowFile flowFile = h.waiting.remove(outcome.flowFileId());
            final String destination = h.destinations.remove(outcome.flowFileId());
            final ProcessSession session = h.session;
            final Map<String, String> attributes = new HashMap<>();
            if (!outcome.channel().isEmpty()) {
                attributes.put(Attributes.CHANNEL, outcome.channel());
            }
            if (!outcome.offsetToken().isEmpty()) {
                attributes.put(Attributes.OFFSET_TOKEN, outcome.offsetToken());
            }
            attributes.put(Attributes.ROWS_SENT, Integer.toString(outcome.rowsSent()));
            attributes.put(Attributes.ROWS_SKIPPED, Integer.toString(outcome.rowsSkipped()));
            if (!outcome.message().isEmpty()) {
                attributes.put(Attributes.ERROR_MESSAGE, outcome.message());
            }
            flowFile = session.putAllAttributes(flowFile, attributes);
            h.rowsSent += outcome.rowsSent();
            h.rowsSkipped += outcome.rowsSkipped();
            switch (outcome.route()) {
                case SinkBatch.ROUTE_SUCCESS -> {
                    session.getProvenanceReporter().send(flowFile, transitBase + "/" + destination + "?channel=" + outcome.channel());
                    session.transfer(flowFile, REL_SUCCESS);
                }
                case SinkBatch.ROUTE_INVALID -> {
                    getLogger().warn("{} routed to invalid: {}", flowFile, outcome.message());
                    session.transfer(flowFile, REL_INVALID);
                }
                case SinkBatch.ROUTE_EMPTY -> session.transfer(flowFile, REL_EMPTY);
                case SinkBatch.ROUTE_RELOAD -> {
                    getLogger().warn("{} goes back to the queue to be loaded at least once: {}", flowFile, outcome.message());
                    session.transfer(session.putAttribute(flowFile, ATTR_DELIVERY, AT_LEAST_ONCE));
                    h.reloaded++;
                }
                case SinkBatch.ROUTE_RETRY -> {
                    getLogger().debug("{} goes back to the queue: {}", flowFile, outcome.message());
                    session.transfer(session.penalize(flowFile));
                    h.waitingBack++;
                }
                default -> session.transfer(flowFile, REL_FAILURE);
            }
            if (returnsToTheFlow(outcome.route())) {
                goingBack.computeIfAbsent(h, k -> new ArrayList<>()).add(flowFile);
            }
            if (h.waiting.isEmpty()) {
                adjustCounters(session, h);
                held.release(h);
                session.commitAsync();
                goingBack.remove(h); // committed with their session
            }
        }
        sendOn(sessionFactory, goingBack);
    }

    /** Moves the FlowFiles into one new session and commits it at once, while their own sessions wait on. */
    private static void sendOn(final ProcessSessionFactory sessionFactory, final Map<HeldSessions.Held, List<FlowFile>> goingBack) {
        if (goingBack.isEmpty()) {
            return;
        }
        final ProcessSession alone = sessionFactory.createSession();
        goingBack.forEach((h, flowFiles) -> h.session.migrate(alone, flowFiles));
        alone.commitAsync();
    }

    /** Whether a FlowFile so routed can come back to this processor: through {@code failure} (looped back), or the queue. */
    private static boolean returnsToTheFlow(final int route) {
        return route == SinkBatch.ROUTE_FAILURE || route == SinkBatch.ROUTE_RETRY || route == SinkBatch.ROUTE_RELOAD;
    }

    /** The processor's own counters for a held session's FlowFiles, applied when it commits. */
    private static void adjustCounters(final ProcessSession session, final HeldSessions.Held h) {
        session.adjustCounter(PutSnowflakeCounters.ROWS_SENT, h.rowsSent, false);
        if (h.rowsSkipped > 0) {
            session.adjustCounter(PutSnowflakeCounters.ROWS_SKIPPED, h.rowsSkipped, false);
        }
        if (h.waitingBack > 0) {
            session.adjustCounter(PutSnowflakeCounters.FLOW_FILES_WAITING, h.waitingBack, false);
        }
        if (h.reloaded > 0) {
            session.adjustCounter(PutSnowflakeCounters.GAP_FLOW_FILES_RELOADED, h.reloaded, false);
        }
    }
}
