package io.kinesnow.nifi.processors;

import io.kinesnow.nifi.nativebridge.NativeTestSupport;
import org.apache.nifi.components.ConfigVerificationResult;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.controller.AbstractControllerService;
import org.apache.nifi.processor.VerifiableProcessor;
import org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService;
import org.apache.nifi.reporting.InitializationException;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.awssdk.core.exception.SdkClientException;

import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import static io.kinesnow.nifi.processors.ProcessorTestSupport.assertProblem;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * ConsumeKinesis with NiFi's AWS credentials service (the service API is on the test class path, as under
 * kinesnow-aws-nar): the property, its exclusivity, and verification through the native engine, which calls back into
 * the service's provider across JNI.
 */
class ConsumeKinesisCredentialsServiceTest {
    private static final String KEY = "ASIAIOSFODNN7EXAMPLE";
    private static final String SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    private static final String TOKEN = "FwoGZXIvYXdzEJr//////////wEaDOuDhFK3v1xG2exampletoken";

    private TestRunner runner;

    /** A credentials service whose provider is given by the test; counts the provider's calls. */
    static final class TestCredentialsService extends AbstractControllerService implements AwsCredentialsProviderService {
        final AtomicInteger calls = new AtomicInteger();
        private final Supplier<AwsCredentials> credentials;

        TestCredentialsService(final Supplier<AwsCredentials> credentials) {
            this.credentials = credentials;
        }

        @Override
        public AwsCredentialsProvider getAwsCredentialsProvider() {
            return () -> {
                calls.incrementAndGet();
                return credentials.get();
            };
        }
    }

    @BeforeEach
    void setUp() {
        runner = TestRunners.newTestRunner(ConsumeKinesis.class);
        runner.setProperty(ConsumeKinesis.STREAM_NAME, "orders");
        runner.setProperty(ConsumeKinesis.APPLICATION_NAME, "orders-to-snowflake");
        runner.setProperty(ConsumeKinesis.REGION, "us-east-1");
        // Port 9 on loopback refuses connections: no traffic leaves the machine.
        runner.setProperty(ConsumeKinesis.ENDPOINT_OVERRIDE, "http://127.0.0.1:9");
    }

    private TestCredentialsService service(final Supplier<AwsCredentials> credentials) throws InitializationException {
        final TestCredentialsService service = new TestCredentialsService(credentials);
        runner.addControllerService("reader-role", service);
        runner.enableControllerService(service);
        runner.setProperty(property(), "reader-role");
        return service;
    }

    private static PropertyDescriptor property() {
        return ConsumeKinesis.CREDENTIALS_SERVICE.orElseThrow();
    }

    @Test
    void thePropertyIsOfferedAfterRegionWhereTheServiceApiIsVisible() {
        final PropertyDescriptor property = property();
        assertEquals("AWS Credentials Provider Service", property.getName());
        assertEquals(AwsCredentialsProviderService.class, property.getControllerServiceDefinition());
        assertFalse(property.isRequired());
        final List<PropertyDescriptor> all = ConsumeKinesis.PROPERTIES;
        assertEquals(all.indexOf(ConsumeKinesis.REGION) + 1, all.indexOf(property));
    }

    @Test
    void theServiceStandsAloneAmongTheCredentialProperties() throws InitializationException {
        service(() -> AwsSessionCredentials.create(KEY, SECRET, TOKEN));
        runner.assertValid();
        runner.setProperty(ConsumeKinesis.ACCESS_KEY_ID, "AKIAIOSFODNN7EXAMPLE");
        runner.setProperty(ConsumeKinesis.SECRET_ACCESS_KEY, SECRET);
        runner.setProperty(ConsumeKinesis.ASSUME_ROLE_ARN, "arn:aws:iam::123456789012:role/r");
        assertProblem(runner, "AWS Credentials Provider Service",
                "is set together with AWS Access Key ID, AWS Secret Access Key, Assume Role ARN: the credentials service alone");
        runner.removeProperty(ConsumeKinesis.ACCESS_KEY_ID);
        runner.removeProperty(ConsumeKinesis.SECRET_ACCESS_KEY);
        runner.removeProperty(ConsumeKinesis.ASSUME_ROLE_ARN);
        runner.assertValid();
    }

    @Test
    void verificationResolvesTheServicesCredentialsThroughTheEngine() throws InitializationException {
        final Instant expiry = Instant.now().plusSeconds(900);
        final TestCredentialsService service = service(() -> AwsSessionCredentials.builder()
                .accessKeyId(KEY).secretAccessKey(SECRET).sessionToken(TOKEN).expirationTime(expiry).build());
        io.kinesnow.nifi.nativebridge.NativeLibrary.require();
        final int registered = NativeTestSupport.registeredCredentials();
        final List<ConfigVerificationResult> steps = verify();
        assertTrue(service.calls.get() >= 1, "the engine asked the service's provider");
        final ConfigVerificationResult credentials = steps.get(0);
        assertEquals(ConfigVerificationResult.Outcome.SUCCESSFUL, credentials.getOutcome(), credentials.getExplanation());
        final String text = credentials.getExplanation();
        assertTrue(text.contains("temporary credentials from the AWS credentials service") && text.contains("reader-role"), text);
        assertTrue(text.contains(java.time.format.DateTimeFormatter.ISO_INSTANT.format(expiry.truncatedTo(java.time.temporal.ChronoUnit.SECONDS))), text);
        // The stream step ran with them: it failed on the refused port, not for want of credentials.
        assertTrue(steps.get(1).getExplanation().contains("DescribeStream"), steps.get(1).getExplanation());
        assertFalse(steps.toString().contains(SECRET) || steps.toString().contains(TOKEN), "no secret in any step");
        assertEquals(registered, NativeTestSupport.registeredCredentials(), "the callback is released after the verification");
    }

    @Test
    void aFailingServiceIsAFailedStepNamingTheServiceAndTheReasonWithoutSecrets() throws InitializationException {
        service(() -> {
            throw SdkClientException.create("Unable to assume role arn:aws:iam::123456789012:role/kinesis-reader: "
                    + "AccessDenied, not authorized (signed with " + KEY + " / " + SECRET + ")");
        });
        final ConfigVerificationResult credentials = verify().get(0);
        assertEquals(ConfigVerificationResult.Outcome.FAILED, credentials.getOutcome());
        final String text = credentials.getExplanation();
        assertTrue(text.contains("no credentials from the AWS credentials service") && text.contains("reader-role"), text);
        assertTrue(text.contains("SdkClientException: Unable to assume role arn:aws:iam::123456789012:role/kinesis-reader"), text);
        assertTrue(text.contains("Check the credentials service"), text);
        assertFalse(text.contains(SECRET) || text.contains(KEY), text);
    }

    @Test
    void anStsAnswerTheSdkCouldNotReadIsQuoted() throws InitializationException {
        // moto's STS wraps its error in <Errors>, which the Java SDK does not read: the exception says only "403".
        final String answer = "<ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User: "
                + "arn:aws:iam::123456789012:user/nobody is not authorized to perform: sts:AssumeRole</Message></Error>"
                + "</Errors></ErrorResponse>";
        service(() -> {
            throw software.amazon.awssdk.services.sts.model.StsException.builder().statusCode(403)
                    .awsErrorDetails(software.amazon.awssdk.awscore.exception.AwsErrorDetails.builder()
                            .rawResponse(software.amazon.awssdk.core.SdkBytes.fromUtf8String(answer)).build())
                    .build();
        });
        final String text = verify().get(0).getExplanation();
        assertTrue(text.contains("the service answered HTTP 403: AccessDenied User: arn:aws:iam::123456789012:user/nobody "
                + "is not authorized to perform: sts:AssumeRole"), text);
    }

    @Test
    void aServiceThatReturnsNothingUsableIsExplained() throws InitializationException {
        service(() -> null);
        final String text = verify().get(0).getExplanation();
        assertTrue(text.contains("returned no credentials"), text);
    }

    private List<ConfigVerificationResult> verify() {
        return ((VerifiableProcessor) runner.getProcessor()).verify(runner.getProcessContext(), runner.getLogger(), Map.of());
    }
}
