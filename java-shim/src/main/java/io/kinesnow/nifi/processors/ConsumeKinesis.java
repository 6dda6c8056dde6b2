package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.contract.Attributes;
import io.kinesnow.nifi.contract.ConsumeKinesisCounters;
import io.kinesnow.nifi.contract.ConsumeKinesisSpecs;
import io.kinesnow.nifi.nativebridge.NativeBridge;
import io.kinesnow.nifi.nativebridge.NativeException;
import io.kinesnow.nifi.nativebridge.NativeLibrary;
import io.kinesnow.nifi.nativebridge.RecordBatch;
import io.kinesnow.nifi.nativebridge.SkippedRecords;
import org.apache.nifi.annotation.behavior.InputRequirement;
import org.apache.nifi.annotation.behavior.Stateful;
import org.apache.nifi.components.state.Scope;
import org.apache.nifi.annotation.configuration.DefaultSettings;
import org.apache.nifi.annotation.behavior.SystemResource;
import org.apache.nifi.annotation.behavior.SystemResourceConsideration;
import org.apache.nifi.annotation.behavior.WritesAttribute;
import org.apache.nifi.annotation.behavior.WritesAttributes;
import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.annotation.lifecycle.OnRemoved;
import org.apache.nifi.annotation.lifecycle.OnScheduled;
import org.apache.nifi.migration.PropertyConfiguration;
import org.apache.nifi.annotation.lifecycle.OnStopped;
import org.apache.nifi.annotation.lifecycle.OnUnscheduled;
import org.apache.nifi.components.AllowableValue;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationContext;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.components.Validator;
import org.apache.nifi.expression.ExpressionLanguageScope;
import org.apache.nifi.flowfile.FlowFile;
import org.apache.nifi.flowfile.attributes.CoreAttributes;
import org.apache.nifi.processor.AbstractProcessor;
import org.apache.nifi.processor.ProcessContext;
import org.apache.nifi.processor.ProcessSession;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.processor.VerifiableProcessor;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.serialization.RecordReaderFactory;
import org.apache.nifi.serialization.RecordSetWriterFactory;

import java.nio.ByteBuffer;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

@Tags({"amazon", "aws", "kinesis", "consume", "stream", "snowflake", "kinesnow"})
@InputRequirement(InputRequirement.Requirement.INPUT_FORBIDDEN)
// It yields only while the engine starts: a short yield lets the first records out as soon as it has started.
@DefaultSettings(yieldDuration = "100 millis")
@Stateful(scopes = Scope.LOCAL, description = "The status of each shard this node leases, for View State: milliseconds "
        + "behind the tip, what the shard waits for, when the last records read and committed in NiFi arrived in Kinesis "
        + "(with Failover Position SNOWFLAKE_COMMIT also when the first record of the newest FlowFile in Snowflake "
        + "arrived), then the lease counter, what Snowflake has committed (SNOWFLAKE_COMMIT) and last the checkpoint, so "
        + "the dialog's cut keeps what an operator looks for. Written at most "
        + "every 5 seconds when it changes and cleared when the processor stops; nothing reads it back, so clearing it "
        + "changes nothing. Checkpoints and leases live in the DynamoDB lease table.")
@SystemResourceConsideration(resource = SystemResource.MEMORY, description = "The engine holds up to Max Buffer Size of "
        + "records read ahead, outside the Java heap, whatever the number of shards (a single record larger than that, up to "
        + "Kinesis' 10 MiB, is held alone), plus the GetRecords answers being read (one per fetch slot: Max Buffer Size / 10 MB, "
        + "1 to 16 slots, each at most 10 MB); each concurrent task keeps one batch buffer (up to about Max Batch Size, or one "
        + "larger record) between runs, in direct memory outside the heap (counted against the JVM's MaxDirectMemorySize).")
@SystemResourceConsideration(resource = SystemResource.NETWORK, description = "Reads each leased shard up to Kinesis' "
        + "limits (2 MiB/s per shard, 5 GetRecords calls a second, or an Enhanced Fan-Out subscription) and reads and writes "
        + "the DynamoDB lease table about once a second.")
@CapabilityDescription("Reads records from an Amazon Kinesis Data Stream, in shard order, with its engine written in Rust. "
        + "Shards are leased through a DynamoDB table named after the Application Name, so several processors (or a NiFi "
        + "cluster) share a stream. A shard's checkpoint is written only after NiFi has committed the FlowFiles that hold "
        + "its records. KPL aggregated records are split into their user records.")
@WritesAttributes({
    @WritesAttribute(attribute = Attributes.STREAM, description = "The stream the records came from"),
    @WritesAttribute(attribute = Attributes.REGION, description = "The AWS region of the stream (the Region property); "
            + "PutSnowflake names its channels with it, so same-named streams of two regions do not share channels"),
    @WritesAttribute(attribute = Attributes.SHARD, description = "The shard the records came from"),
    @WritesAttribute(attribute = Attributes.PARENT_SHARDS, description = "The shard's parents (comma-separated) when "
            + "a split or merge created it; PutSnowflake uses it to load a parent's records before its children's"),
    @WritesAttribute(attribute = Attributes.PARTITION_KEY, description = "Partition key of the (first) record"),
    @WritesAttribute(attribute = Attributes.FIRST_SEQUENCE, description = "Sequence number of the first record"),
    @WritesAttribute(attribute = Attributes.LAST_SEQUENCE, description = "Sequence number of the last record"),
    @WritesAttribute(attribute = Attributes.FIRST_SUB, description = "Sub-sequence number of the first record, for KPL aggregated records"),
    @WritesAttribute(attribute = Attributes.LAST_SUB, description = "Sub-sequence number of the last record, for KPL aggregated records"),
    @WritesAttribute(attribute = Attributes.ARRIVAL_MS, description = "Approximate arrival time of the (first) record, epoch milliseconds"),
    @WritesAttribute(attribute = Attributes.MILLIS_BEHIND, description = "How far the shard's reader was behind the tip of the stream, in milliseconds"),
    @WritesAttribute(attribute = "mime.type", description = "application/json for wrapped or metadata-injected output; "
            + "with Processing Strategy RECORD, the Record Writer's mime type"),
    @WritesAttribute(attribute = Attributes.RECORD_COUNT, description = "Number of records in the FlowFile (with RECORD, the "
            + "records the Record Writer wrote)"),
    @WritesAttribute(attribute = Attributes.RECORD_ERROR_MESSAGE, description = "Why a record went to parse.failure"),
    @WritesAttribute(attribute = Attributes.PREVIOUS_SEQUENCE, description = "The shard's record this processor read just "
            + "before the FlowFile's first one (empty when none): PutSnowflake restores each shard's order by it, whatever "
            + "order NiFi's queue hands FlowFiles over in"),
    @WritesAttribute(attribute = Attributes.PREVIOUS_SUB, description = "The sub-sequence number of that "
            + "record, when it is a KPL sub-record"),
    @WritesAttribute(attribute = Attributes.APPLICATION, description = "The Application Name: PutSnowflake passes over "
            + "this consumer's records that never load (parse.failure, invalid, empty) by it")
})
public class ConsumeKinesis extends AbstractProcessor implements VerifiableProcessor {


        
            
                
            
    static final PropertyDescriptor STREAM_NAME = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.STREAM_NAME.name())
            .description("The name of the Kinesis stream to read, or its ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME; "
                    + "also arn:aws-cn:... and arn:aws-us-gov:...) to read a stream of another AWS account. With an ARN every "
                    + "Kinesis call names the stream by it, the ARN's region must be the Region, and the lease table's rows, "
                    + "the aws.kinesis.stream.name attribute and kinesisMetadata carry the stream's name from the ARN.")
            .required(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor APPLICATION_NAME = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.APPLICATION_NAME.name())
            .description("Names this consumer: the DynamoDB table of leases and checkpoints has this name, and so does the "
                    + "Enhanced Fan-Out consumer. Processors with the same Application Name share the stream's shards; a new "
                    + "name starts again from the Initial Stream Position.")
            .required(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor REGION = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.REGION.name()).description("The AWS region of the stream and the DynamoDB table, such as us-east-1.")
            .required(true).defaultValue(ConsumeKinesisSpecs.REGION.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ACCESS_KEY_ID = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ACCESS_KEY_ID.name())
            .description("Access key ID of static credentials. Leave empty (with the secret, the profile and the token file) "
                    + "to use the AWS default credentials chain: environment, profile, web identity, container or instance role.")
            .required(false).sensitive(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor SECRET_ACCESS_KEY = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.SECRET_ACCESS_KEY.name()).description("Secret access key of static credentials; required with the access key ID.")
            .required(false).sensitive(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor PROFILE_NAME = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.PROFILE_NAME.name())
            .description("A profile of the AWS shared config and credentials files (~/.aws/config, ~/.aws/credentials of "
                    + "NiFi's user, or the Credentials File) whose credentials are used: keys, a role chain, SSO or a "
                    + "credential process, as the AWS SDKs read them. Empty with a Credentials File: the profile 'default'.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor CREDENTIALS_FILE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.CREDENTIALS_FILE.name())
            .description("An AWS shared credentials file (INI: [profile] sections with aws_access_key_id, "
                    + "aws_secret_access_key, aws_session_token) read instead of ~/.aws/credentials. Unlike NiFi's AWS "
                    + "credentials service, not the Java properties format (accessKey=, secretKey=).")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor WEB_IDENTITY_TOKEN_FILE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.WEB_IDENTITY_TOKEN_FILE.name())
            .description("A file holding an OIDC token (what EKS mounts for IAM Roles for Service Accounts, "
                    + "AWS_WEB_IDENTITY_TOKEN_FILE), read at each refresh and exchanged for the Assume Role ARN's "
                    + "credentials with STS AssumeRoleWithWebIdentity. Needs Assume Role ARN.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_ARN = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_ARN.name())
            .description("An IAM role whose temporary credentials every Kinesis and DynamoDB call uses: assumed with the "
                    + "credentials above (the access key pair, the profile, or the default chain), or, with a Web Identity "
                    + "Token File, the role the token is exchanged for. Refreshed before they expire.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_SESSION_NAME = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_SESSION_NAME.name())
            .description("The role session's name, seen in CloudTrail (2-64 letters, digits or = , . @ - _).")
            .required(false).defaultValue(ConsumeKinesisSpecs.ASSUME_ROLE_SESSION_NAME.defaultValue()).dependsOn(ASSUME_ROLE_ARN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_EXTERNAL_ID = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_EXTERNAL_ID.name())
            .description("The external ID the role's trust policy requires (sts:ExternalId), for access across accounts.")
            .required(false).dependsOn(ASSUME_ROLE_ARN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_SESSION_TIME = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_SESSION_TIME.name())
            .description("Seconds each role session lasts, 900 to 43200 (the role's maximum session duration may be lower). "
                    + "New credentials are fetched shortly before a session ends.")
            .required(false).defaultValue(ConsumeKinesisSpecs.ASSUME_ROLE_SESSION_TIME.defaultValue()).dependsOn(ASSUME_ROLE_ARN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_STS_REGION = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_STS_REGION.name())
            .description("The region of the STS endpoint that issues the role's credentials. Empty: the Region above.")
            .required(false).dependsOn(ASSUME_ROLE_ARN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ASSUME_ROLE_STS_ENDPOINT = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ASSUME_ROLE_STS_ENDPOINT.name())
            .description("An http(s) URL used instead of the STS endpoint of the STS region (a VPC endpoint, or a local "
                    + "emulator).")
            .required(false).dependsOn(ASSUME_ROLE_ARN).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ENDPOINT_OVERRIDE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.ENDPOINT_OVERRIDE.name())
            .description("An http(s) URL used instead of AWS's endpoints for Kinesis, DynamoDB and Enhanced Fan-Out, "
                    + "for VPC endpoints or local emulators.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor DYNAMODB_ENDPOINT_OVERRIDE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.DYNAMODB_ENDPOINT_OVERRIDE.name())
            .description("An http(s) URL for DynamoDB alone, when it differs from the Endpoint Override URL "
                    + "(for example two local emulators on different ports). Empty: the Endpoint Override URL applies.")
            .required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor CONSUMER_TYPE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.CONSUMER_TYPE.name()).description("How records are read from the shards.")
            .required(true).allowableValues(ConsumerType.class).defaultValue(ConsumeKinesisSpecs.CONSUMER_TYPE.defaultValue()).build();
    static final PropertyDescriptor INITIAL_POSITION = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.INITIAL_POSITION.name())
            .description("Where to start reading a shard that has no checkpoint yet.")
            .required(true).allowableValues(InitialPosition.class).defaultValue(ConsumeKinesisSpecs.INITIAL_POSITION.defaultValue()).build();
    static final PropertyDescriptor POSITION_TIMESTAMP = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.POSITION_TIMESTAMP.name())
            .description("ISO-8601 time to start from with AT_TIMESTAMP, such as 2026-01-31T12:00:00Z.")
            .required(true).dependsOn(INITIAL_POSITION, InitialPosition.AT_TIMESTAMP).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_RECORDS_PER_REQUEST = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.MAX_RECORDS_PER_REQUEST.name()).description("The Limit of each GetRecords call, 1 to 10000.")
            .required(true).defaultValue(ConsumeKinesisSpecs.MAX_RECORDS_PER_REQUEST.defaultValue()).dependsOn(CONSUMER_TYPE, ConsumerType.SHARED_THROUGHPUT).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_BATCH_DURATION = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.MAX_BATCH_DURATION.name())
            .description("The longest one run of the processor collects records before it commits them, such as '1 sec'.")
            .required(true).defaultValue(ConsumeKinesisSpecs.MAX_BATCH_DURATION.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_BATCH_SIZE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.MAX_BATCH_SIZE.name()).description("The most record data one run of the processor commits, such as '10 MB'.")
            .required(true).defaultValue(ConsumeKinesisSpecs.MAX_BATCH_SIZE.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor MAX_BUFFER_SIZE = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.MAX_BUFFER_SIZE.name())
            .description("The most record data the engine holds in memory for this processor, whatever the number of "
                    + "shards. When it is full, reading pauses until NiFi takes records. A single record larger than this "
                    + "(Kinesis allows up to 10 MiB) waits until the buffer is empty and is then held alone.")
            .required(true).defaultValue(ConsumeKinesisSpecs.MAX_BUFFER_SIZE.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor PROCESSING_STRATEGY = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.PROCESSING_STRATEGY.name()).description("How records are laid out in FlowFiles.")
            .required(true).allowableValues(ProcessingStrategy.class).defaultValue(ConsumeKinesisSpecs.PROCESSING_STRATEGY.defaultValue()).build();
    static final PropertyDescriptor MESSAGE_DEMARCATOR = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.MESSAGE_DEMARCATOR.name())
            .description("The text (written as UTF-8) between two records of a FlowFile with Processing Strategy DEMARCATOR. "
                    + "Enter a new line with Shift+Enter, or use Expression Language such as ${literal('\\n')}. A record that "
                    + "contains the demarcator is written as it is (not escaped), so a split on the demarcator cuts it.")
            .required(true).dependsOn(PROCESSING_STRATEGY, ProcessingStrategy.DEMARCATOR)
            .expressionLanguageSupported(ExpressionLanguageScope.ENVIRONMENT).addValidator(Validator.VALID).build();
    static final PropertyDescriptor RECORD_READER = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.RECORD_READER.name())
            .description("Reads each Kinesis record into records (JSON, Avro, CSV...); a Kinesis record it cannot read goes "
                    + "to parse.failure whole.")
            .required(true).dependsOn(PROCESSING_STRATEGY, ProcessingStrategy.RECORD).identifiesControllerService(RecordReaderFactory.class).build();
    static final PropertyDescriptor RECORD_WRITER = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.RECORD_WRITER.name())
            .description("Writes a shard's records into FlowFiles, after the Output Strategy.")
            .required(true).dependsOn(PROCESSING_STRATEGY, ProcessingStrategy.RECORD).identifiesControllerService(RecordSetWriterFactory.class).build();
    static final PropertyDescriptor OUTPUT_STRATEGY = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.OUTPUT_STRATEGY.name()).description("What is written for each record. With RECORD, applied to each record "
                    + "the Record Reader read; otherwise USE_WRAPPER and INJECT_METADATA need JSON records.")
            .required(true).allowableValues(OutputStrategy.class).defaultValue(ConsumeKinesisSpecs.OUTPUT_STRATEGY.defaultValue()).build();
    static final PropertyDescriptor LAG_WARNING_THRESHOLD = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.LAG_WARNING_THRESHOLD.name())
            .description("Warn when a shard's reader is behind by more than this percentage of the stream's retention "
                    + "period: its oldest unread records are then at risk of expiring unread.")
            .required(true).defaultValue(ConsumeKinesisSpecs.LAG_WARNING_THRESHOLD.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor FAILOVER_TIMEOUT = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.FAILOVER_TIMEOUT.name())
            .description("How long a node sharing this Application Name may stay silent before the other nodes take "
                    + "its shards over. Each node writes one heartbeat per three sevenths of it (3 s at the default), "
                    + "whatever the number of shards it reads. From 1 sec to 10 min.")
            .required(true).defaultValue(ConsumeKinesisSpecs.FAILOVER_TIMEOUT.defaultValue()).addValidator(Validator.VALID).build();
    static final PropertyDescriptor STUCK_SHARD_WARNING = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.STUCK_SHARD_WARNING.name())
            .description("Warn, with a bulletin that names the shard and what it waits for (back-pressure, NiFi's "
                    + "commits, the lease table, Kinesis, the shard's end, a hand-back), when a shard this node leases "
                    + "has not moved its checkpoint for this long while records wait; and warn once more when it moves "
                    + "again. 0 sec turns the warning off. Up to 1 day.")
            .required(true).defaultValue(ConsumeKinesisSpecs.STUCK_SHARD_WARNING.defaultValue())
            .addValidator(Validator.VALID).build();

            static final PropertyDescriptor FAILOVER_POSITION = new PropertyDescriptor.Builder()
            .name(ConsumeKinesisSpecs.FAILOVER_POSITION.name())
            .description("Where a node that takes a shard over (failover, scale-out, rebalancing) resumes reading. See "
                    + "the processor's additional details for the topologies that are exactly once.")
            .required(true).allowableValues(FailoverPosition.class).defaultValue(ConsumeKinesisSpecs.FAILOVER_POSITION.defaultValue()).build();

    /** NiFi's AWS credentials service; offered only where its API is the parent NAR (see {@link CredentialsService}). */
    static final java.util.Optional<PropertyDescriptor> CREDENTIALS_SERVICE = CredentialsService.DESCRIPTOR;

    static final List<PropertyDescriptor> PROPERTIES = CredentialsService.offeredWith(List.of(STREAM_NAME, APPLICATION_NAME, REGION, ACCESS_KEY_ID,
            SECRET_ACCESS_KEY, PROFILE_NAME, CREDENTIALS_FILE, WEB_IDENTITY_TOKEN_FILE, ASSUME_ROLE_ARN, ASSUME_ROLE_SESSION_NAME,
            ASSUME_ROLE_EXTERNAL_ID, ASSUME_ROLE_SESSION_TIME, ASSUME_ROLE_STS_REGION, ASSUME_ROLE_STS_ENDPOINT, ENDPOINT_OVERRIDE, DYNAMODB_ENDPOINT_OVERRIDE, CONSUMER_TYPE, INITIAL_POSITION, POSITION_TIMESTAMP,
            MAX_RECORDS_PER_REQUEST, MAX_BATCH_DURATION, MAX_BATCH_SIZE, MAX_BUFFER_SIZE, PROCESSING_STRATEGY,
            MESSAGE_DEMARCATOR, OUTPUT_STRATEGY, LAG_WARNING_THRESHOLD, FAILOVER_TIMEOUT, FAILOVER_POSITION, STUCK_SHARD_WARNING), REGION);

    /**
     * What NiFi shows: the properties the engine reads, the Record Reader and Writer (used by the shim alone, see
     * {@link RecordFlowFiles}) and NiFi's Proxy Configuration Service (see {@link ProxyService}).
     */
    static final List<PropertyDescriptor> DESCRIPTORS = ProxyService.withProxy(withRecordServices(PROPERTIES));

    private static List<PropertyDescriptor> withRecordServices(final List<PropertyDescriptor> properties) {
        final List<PropertyDescriptor> all = new java.util.ArrayList<>(properties);
        all.add(all.indexOf(MESSAGE_DEMARCATOR), RECORD_WRITER);
        all.add(all.indexOf(RECORD_WRITER), RECORD_READER);
        return List.copyOf(all);
    }

    public static final Relationship REL_SUCCESS = new Relationship.Builder()
            .name("success").description("FlowFiles holding the records read from the stream.").build();
    public static final Relationship REL_PARSE_FAILURE = new Relationship.Builder()
            .name("parse.failure")
            .description("Kinesis records that could not be parsed, each whole with record.error.message: with Processing "
                    + "Strategy RECORD, those the Record Reader cannot read (or that hold no record); with the other "
                    + "strategies and Output Strategy USE_WRAPPER or INJECT_METADATA, records that are not JSON (or not a "
                    + "JSON object). Nothing goes here with USE_VALUE and FLOW_FILE, LINE_DELIMITED or DEMARCATOR (offered "
                    + "always, unlike NiFi's ConsumeKinesis: see the additional details).").build();

    /** While the engine starts, a notice at most this often (and whenever its status changes). */
    private static final long STARTUP_NOTICE_INTERVAL_NANOS = 60_000_000_000L;
    /** A start-up that takes longer than this is worth a warning bulletin; a normal one is quick. */
    private static final long SLOW_STARTUP_NANOS = 10_000_000_000L;

    private final NativeComponent rules = new NativeComponent(NativeBridge.CONSUME_KINESIS);
    private final RecordSource engine;
    private final BatchArrays arrays = new BatchArrays();
    private final EngineCounters engineCounters = new EngineCounters(ConsumeKinesisCounters.ENGINE, ConsumeKinesisCounters.GAUGES);
    private final StatusState status = new StatusState();
    private volatile long scheduledAt;
    /** The NiFi node, on the FlowFiles of a consumer with Failover Position SNOWFLAKE_COMMIT. */
    private volatile String node = "";
    private volatile String lastStartupNotice;
    private volatile long lastStartupNoticeAt;
    private volatile boolean slowStartupWarned;

    public ConsumeKinesis() {
        this(new NativeRecordSource());
    }

    /** With another engine; for tests of the processor's own logic. */
    ConsumeKinesis(final RecordSource engine) {
        this.engine = engine;
    }

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return DESCRIPTORS;
    }

    @Override
    public Set<Relationship> getRelationships() {
        return Set.of(REL_SUCCESS, REL_PARSE_FAILURE);
    }

    /**
     * "Verify Properties": step by step, with read-only probes of the services (see the processor's documentation
     * for the steps).
     */
    @Override
    public List<ConfigVerificationResult> verify(final ProcessContext context, final ComponentLog verificationLogger,
                                                 final Map<String, String> attributes) {
        try (CredentialsService.Registration credentials = CredentialsService.register(context)) {
            return rules.verify(context, PROPERTIES, attributes, credentials.facts(ProxyService.facts(context)));
        } catch (final RuntimeException e) {
            return List.of(new ConfigVerificationResult.Builder().verificationStepName("AWS Credentials")
                    .outcome(ConfigVerificationResult.Outcome.FAILED).explanation(e.getMessage()).build());
        }
    }

    @Override
    protected Collection<ValidationResult> customValidate(final ValidationContext context) {
        return ProxyService.validate(context, rules.validate(context, PROPERTIES));
    }

    /**
     * Returns at once: the engine starts in the background (preparing the lease table can wait minutes for another
     * node's KCL migration, and Enhanced Fan-Out for its consumer), and {@link #onTrigger} yields until it runs.
     */
    @Override
    public void migrateProperties(final PropertyConfiguration config) {
        PropertyRenames.apply(config, ConsumeKinesisSpecs.RENAMED);
    }

    @OnScheduled
    public void onScheduled(final ProcessContext context) {
        scheduledAt = System.nanoTime();
        lastStartupNotice = null;
        slowStartupWarned = false;
        node = NativeComponent.nodeIdentity(getNodeTypeProvider());
        engine.open(context, getLogger(), node);
        status.start(context.getStateManager(), getLogger(), engine::status);
    }

    /**
     * Closes the engine as soon as the processor is unscheduled, not only once its threads are done: NiFi's offload
     * (and "Terminate") stops processors and then terminates those still busy, replacing the processor object
     * without calling {@link #onStopped} on it, and an engine left open would keep its leases and heartbeat for
     * ever. A batch being committed meanwhile is still acknowledged (the engine stays reachable while it stops).
     */
    @OnUnscheduled
    public void onUnscheduled() {
        status.stop();
        engine.close();
    }

    @OnStopped
    public void onStopped(final ProcessContext context) {
        status.stop();
        engine.close();
        arrays.clear();
        status.clear(context.getStateManager(), getLogger());
    }

    /** Removed from the canvas: its Enhanced Fan-Out consumer is deregistered, or the user is told to do it. */
    @OnRemoved
    public void onRemoved(final ProcessContext context) {
        if (NativeLibrary.load().isPresent()) {
            return;
        }
        try (CredentialsService.Registration credentials = CredentialsService.register(context)) {
            final String done = NativeBridge.removeConsumer(NativeComponent.withFacts(
                    NativeComponent.evaluated(context, PROPERTIES), credentials.facts(ProxyService.facts(context))));
            if (!done.isEmpty()) {
                getLogger().info("{}", done);
            }
        } catch (final RuntimeException e) {
            getLogger().warn("{}", e.getMessage());
        }
    }

    @Override
    public void onTrigger(final ProcessContext context, final ProcessSession session) {
        final ByteBuffer lent = arrays.take();
        ByteBuffer bytes = null;
        try {
            final String notReady;
            try {
                notReady = engine.startupStatus();
                bytes = notReady == null ? engine.poll(lent) : null;
            } catch (final NativeException e) {
                if (!isScheduled()) {
                    return; // unscheduled meanwhile: the engine was closed under this last run
                }
                throw e;
            }
            if (notReady != null) {
                reportStartup(notReady);
                context.yield();
                return;
            }
            engineCounters.drain(session, engine::counters);
            if (bytes == null) {
                return; // the engine already waited up to Max Batch Duration
            }
            writeBatch(context, session, bytes);
        } finally {
            // The FlowFiles' content is in the session by now (or the session is rolled back): the buffer is free.
            arrays.give(bytes != null ? bytes : lent);
        }
    }

    private void writeBatch(final ProcessContext context, final ProcessSession session, final ByteBuffer bytes) {
        final Settlement settlement = new Settlement(RecordBatch.batchIdOf(bytes));
        try {
            final RecordBatch batch = RecordBatch.decode(bytes);
            writeFlowFiles(context, session, batch, recordFlowFiles(context));
            session.commitAsync(settlement::ack, failure -> settlement.nack());
        } catch (final RuntimeException | Error e) {
            // Content repository full, a corrupt batch, a failed commit: NiFi rolls the session back, and the
            // engine must read these records again, or the shard (then every reader) waits for them for ever.
            settlement.nack();
            throw e;
        }
    }

    /**
     * The stream's name: Stream Name holds it, or the stream's ARN (which the engine validated: its resource is
     * stream/&lt;name&gt;, and a name has no '/').
     */
    static String streamName(final String streamProperty) {
        return streamProperty.startsWith("arn:") ? streamProperty.substring(streamProperty.lastIndexOf('/') + 1) : streamProperty;
    }

    /** With Processing Strategy RECORD, what reads and writes the records; else null. */
    private RecordFlowFiles recordFlowFiles(final ProcessContext context) {
        if (context.getProperty(PROCESSING_STRATEGY).asAllowableValue(ProcessingStrategy.class) != ProcessingStrategy.RECORD) {
            return null;
        }
        return new RecordFlowFiles(context.getProperty(RECORD_READER).asControllerService(RecordReaderFactory.class),
                context.getProperty(RECORD_WRITER).asControllerService(RecordSetWriterFactory.class),
                RecordOutput.of(context.getProperty(OUTPUT_STRATEGY).getValue()), streamName(context.getProperty(STREAM_NAME).getValue()),
                getLogger());
    }

    private void writeFlowFiles(final ProcessContext context, final ProcessSession session, final RecordBatch batch,
                                final RecordFlowFiles records) {
        final String stream = streamName(context.getProperty(STREAM_NAME).getValue());
        final String region = context.getProperty(REGION).getValue();
        final boolean json = records == null && context.getProperty(OUTPUT_STRATEGY).asAllowableValue(OutputStrategy.class) != OutputStrategy.USE_VALUE;
        final String application = context.getProperty(APPLICATION_NAME).getValue();
        final Map<String, String> link = batch.link().isEmpty() ? Map.of() : Map.of(
                Attributes.STREAM_ARN, batch.link(),
                Attributes.NODE, node);
        final Tally tally = new Tally();
        final SkippedRecords skipped = new SkippedRecords();
        for (final RecordBatch.Shard shard : batch.shards()) {
            final RecordFlowFiles.Emitter emitter = (flowFile, data, extra) -> {
                final Map<String, String> attributes = attributes(stream, region, shard, data, json);
                attributes.putAll(linkAttributes(link, application, shard, data));
                attributes.putAll(extra);
                emit(session, session.putAllAttributes(flowFile, attributes), stream, shard, data, tally);
            };
            if (records != null) {
                final List<RecordBatch.FlowFileData> unread =
                        records.writeShard(session, shard, data -> attributes(stream, region, shard, data, false), emitter);
                unread.forEach(kinesisRecord -> skipped.add(shard, kinesisRecord));
                continue;
            }
            for (final RecordBatch.FlowFileData data : shard.flowFiles()) {
                emitter.emit(session.write(session.create(), data::writeTo), data, Map.of());
            }
        }
        if (skipped.count() > 0) {
            engine.noteSkipped(skipped.encode()); // before the commit: PutSnowflake must not see a gap
        }
        session.adjustCounter(ConsumeKinesisCounters.RECORDS_CONSUMED, tally.consumed, false);
        if (tally.failed > 0) {
            session.adjustCounter(ConsumeKinesisCounters.RECORDS_PARSE_FAILURE, tally.failed, false);
        }
    }

    /**
     * The record read before the FlowFile's first one (empty: none), by which PutSnowflake restores the shard's order;
     * and the attributes that tie a FlowFile to the lease that read it (Failover Position SNOWFLAKE_COMMIT).
     */
    private static Map<String, String> linkAttributes(final Map<String, String> link, final String application,
                                                      final RecordBatch.Shard shard, final RecordBatch.FlowFileData data) {
        final Map<String, String> attributes = new HashMap<>();
        attributes.put(Attributes.APPLICATION, application);
        attributes.put(Attributes.PREVIOUS_SEQUENCE, data.previousSequence());
        if (!data.previousSequence().isEmpty() && data.previousSubSequence() >= 0) {
            attributes.put(Attributes.PREVIOUS_SUB, Long.toString(data.previousSubSequence()));
        }
        if (!link.isEmpty() && shard.tenure() >= 0) {
            attributes.putAll(link);
            attributes.put(Attributes.LEASE_COUNTER, Long.toString(shard.tenure()));
        }
        return attributes;
    }

    /** Reports and routes a FlowFile by its route. */
    private static void emit(final ProcessSession session, final FlowFile flowFile, final String stream,
                             final RecordBatch.Shard shard, final RecordBatch.FlowFileData data, final Tally tally) {
        session.getProvenanceReporter().receive(flowFile, "kinesis://" + stream + "/" + shard.shardId());
        if (data.route() == RecordBatch.ROUTE_SUCCESS) {
            tally.consumed += data.recordCount();
            session.transfer(flowFile, REL_SUCCESS);
        } else {
            tally.failed += data.recordCount();
            session.transfer(flowFile, REL_PARSE_FAILURE);
        }
    }

    /** Records counted in one batch. */
    private static final class Tally {
        private long consumed;
        private long failed;
    }

    /** A bulletin while the engine starts: INFO at first, WARN once it takes long, each change and every minute. */
    private void reportStartup(final String status) {
        final long now = System.nanoTime();
        final boolean slow = now - scheduledAt > SLOW_STARTUP_NANOS;
        final boolean changed = !status.equals(lastStartupNotice) || (slow && !slowStartupWarned);
        if (!changed && now - lastStartupNoticeAt < STARTUP_NOTICE_INTERVAL_NANOS) {
            return;
        }
        lastStartupNotice = status;
        lastStartupNoticeAt = now;
        final long seconds = (now - scheduledAt) / 1_000_000_000L;
        if (slow || status.contains("could not start")) {
            slowStartupWarned = slow;
            getLogger().warn("Not reading yet, {} s after the start: {}", seconds, status);
        } else {
            getLogger().info("Not reading yet: {}", status);
        }
    }

    /** Settles one batch exactly once: ack after NiFi committed it, else nack (its records are read again). */
    private final class Settlement {
        private final OptionalLong batchId;
        private final AtomicBoolean settled = new AtomicBoolean();

        Settlement(final OptionalLong batchId) {
            this.batchId = batchId;
        }

        void ack() {
            settle(true);
        }

        void nack() {
            settle(false);
        }

        private void settle(final boolean committed) {
            if (batchId.isEmpty() || !settled.compareAndSet(false, true)) {
                return;
            }
            final long id = batchId.getAsLong();
            try {
                if (committed) {
                    engine.ack(id);
                } else {
                    engine.nack(id);
                }
            } catch (final NativeException e) {
                getLogger().warn("Batch {} of the Kinesis consumer could not be settled: {}", id, e.getMessage());
            }
        }
    }

    private static Map<String, String> attributes(final String stream, final String region, final RecordBatch.Shard shard,
                                                  final RecordBatch.FlowFileData data, final boolean json) {
        final Map<String, String> attributes = new HashMap<>();
        attributes.put(Attributes.STREAM, stream);
        if (region != null && !region.isBlank()) {
            attributes.put(Attributes.REGION, region.trim());
        }
        attributes.put(Attributes.SHARD, shard.shardId());
        if (!shard.parentShardIds().isEmpty()) {
            attributes.put(Attributes.PARENT_SHARDS, shard.parentShardIds());
        }
        attributes.put(Attributes.PARTITION_KEY, data.partitionKey());
        attributes.put(Attributes.FIRST_SEQUENCE, data.firstSequence());
        attributes.put(Attributes.LAST_SEQUENCE, data.lastSequence());
        if (data.firstSubSequence() >= 0) {
            attributes.put(Attributes.FIRST_SUB, Long.toString(data.firstSubSequence()));
        }
        if (data.lastSubSequence() >= 0) {
            attributes.put(Attributes.LAST_SUB, Long.toString(data.lastSubSequence()));
        }
        attributes.put(Attributes.ARRIVAL_MS, Long.toString(data.approximateArrivalMillis()));
        if (shard.millisBehind() >= 0) {
            attributes.put(Attributes.MILLIS_BEHIND, Long.toString(shard.millisBehind()));
        }
        attributes.put(Attributes.RECORD_COUNT, Integer.toString(data.recordCount()));
        if (json && data.route() == RecordBatch.ROUTE_SUCCESS) {
            attributes.put(CoreAttributes.MIME_TYPE.key(), "application/json");
        }
        if (!data.error().isEmpty()) {
            attributes.put(Attributes.RECORD_ERROR_MESSAGE, data.error());
        }
        return attributes;
    }
}
