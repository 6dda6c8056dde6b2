package com.kinesnow.tests.awscreds;

import org.apache.nifi.annotation.documentation.CapabilityDescription;
import org.apache.nifi.annotation.documentation.Tags;
import org.apache.nifi.annotation.lifecycle.OnDisabled;
import org.apache.nifi.annotation.lifecycle.OnEnabled;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.Validator;
import org.apache.nifi.controller.AbstractControllerService;
import org.apache.nifi.controller.ConfigurationContext;
import org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sts.StsClient;
import software.amazon.awssdk.services.sts.auth.StsAssumeRoleCredentialsProvider;

import java.net.URI;
import java.time.Duration;
import java.util.List;

/**
 * Test-only AwsCredentialsProviderService: static keys, or a role those keys assume through the AWS Java SDK's STS
 * client (StsAssumeRoleCredentialsProvider) at an STS endpoint of the test's choosing. Unlike NiFi's own service it
 * allows sessions shorter than 900 s, so a test can watch them being renewed.
 */
@Tags({"aws", "credentials", "test"})
@CapabilityDescription("Kinesnow test-only AWS credentials service: static keys, or an assumed role at an STS endpoint override.")
public class TestAwsCredentialsService extends AbstractControllerService implements AwsCredentialsProviderService {
    static final PropertyDescriptor ACCESS_KEY = new PropertyDescriptor.Builder().name("Access Key ID")
            .description("Access key ID of the static keys (which assume the role when one is set).")
            .required(true).sensitive(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor SECRET_KEY = new PropertyDescriptor.Builder().name("Secret Access Key")
            .description("Secret access key of the static keys.").required(true).sensitive(true).addValidator(Validator.VALID).build();
    static final PropertyDescriptor ROLE_ARN = new PropertyDescriptor.Builder().name("Assume Role ARN")
            .description("A role the keys assume; empty: the keys themselves.").required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor EXTERNAL_ID = new PropertyDescriptor.Builder().name("External ID")
            .description("The role's external ID.").required(false).addValidator(Validator.VALID).build();
    static final PropertyDescriptor SESSION_NAME = new PropertyDescriptor.Builder().name("Session Name")
            .description("The role session's name.").required(true).defaultValue("kinesnow-test-service").addValidator(Validator.VALID).build();
    static final PropertyDescriptor SESSION_SECONDS = new PropertyDescriptor.Builder().name("Session Seconds")
            .description("The role session's lifetime in seconds.").required(true).defaultValue("900").addValidator(Validator.VALID).build();
    static final PropertyDescriptor STS_ENDPOINT = new PropertyDescriptor.Builder().name("STS Endpoint")
            .description("The STS endpoint URL.").required(false).addValidator(Validator.VALID).build();

    private volatile AwsCredentialsProvider provider;
    private volatile StsClient sts;

    @Override
    protected List<PropertyDescriptor> getSupportedPropertyDescriptors() {
        return List.of(ACCESS_KEY, SECRET_KEY, ROLE_ARN, EXTERNAL_ID, SESSION_NAME, SESSION_SECONDS, STS_ENDPOINT);
    }

    @OnEnabled
    public void onEnabled(final ConfigurationContext context) {
        final AwsCredentialsProvider keys = StaticCredentialsProvider.create(AwsBasicCredentials.create(
                context.getProperty(ACCESS_KEY).getValue(), context.getProperty(SECRET_KEY).getValue()));
        final String role = context.getProperty(ROLE_ARN).getValue();
        if (role == null || role.isBlank()) {
            provider = keys;
            return;
        }
        final var builder = StsClient.builder().region(Region.US_EAST_1).credentialsProvider(keys)
                .httpClientBuilder(ApacheHttpClient.builder());
        final String endpoint = context.getProperty(STS_ENDPOINT).getValue();
        if (endpoint != null && !endpoint.isBlank()) {
            builder.endpointOverride(URI.create(endpoint));
        }
        sts = builder.build();
        final int seconds = Integer.parseInt(context.getProperty(SESSION_SECONDS).getValue().trim());
        final String externalId = context.getProperty(EXTERNAL_ID).getValue();
        final String sessionName = context.getProperty(SESSION_NAME).getValue();
        // Renewed by the SDK when less than a sixth of the session is left (a minute at most), so short test
        // sessions are not fetched anew at every call.
        final Duration stale = Duration.ofSeconds(Math.min(60, Math.max(1, seconds / 12)));
        provider = StsAssumeRoleCredentialsProvider.builder()
                .stsClient(sts)
                .refreshRequest(r -> r.roleArn(role).roleSessionName(sessionName).durationSeconds(seconds).externalId(externalId))
                .staleTime(stale)
                .prefetchTime(stale.multipliedBy(2))
                .asyncCredentialUpdateEnabled(false)
                .build();
    }

    @OnDisabled
    public void onDisabled() {
        if (provider instanceof StsAssumeRoleCredentialsProvider assumed) {
            assumed.close();
        }
        if (sts != null) {
            sts.close();
        }
        provider = null;
        sts = null;
    }

    @Override
    public AwsCredentialsProvider getAwsCredentialsProvider() {
        return provider;
    }
}
