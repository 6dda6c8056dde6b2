package io.kinesnow.nifi.processors.aws;

import io.kinesnow.nifi.nativebridge.CredentialsCallback;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.context.PropertyContext;
import org.apache.nifi.processors.aws.credentials.provider.AwsCredentialsProviderService;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.awssdk.awscore.exception.AwsServiceException;

import java.time.Instant;

/**
 * The only class of the processors that names NiFi's {@code AwsCredentialsProviderService} (and the AWS SDK's
 * credential types, which its NAR provides): the native engine's {@link CredentialsCallback} over the service's
 * {@code AwsCredentialsProvider}. Loaded by reflection, and only where that NAR is the parent (see
 * {@code CredentialsService}).
 */
public final class ServiceCredentials implements CredentialsCallback {
    private final AwsCredentialsProvider provider;
    private final String service;

    private ServiceCredentials(final AwsCredentialsProvider provider, final String service) {
        this.provider = provider;
        this.service = service;
    }

    /** The callback of the service {@code property} names; {@code service} names it in messages. */
    public static CredentialsCallback of(final PropertyContext context, final PropertyDescriptor property, final String service) {
        final AwsCredentialsProviderService credentials = context.getProperty(property).asControllerService(AwsCredentialsProviderService.class);
        if (credentials == null) {
            throw new IllegalStateException("no enabled AWS credentials service " + service);
        }
        final AwsCredentialsProvider provider = credentials.getAwsCredentialsProvider();
        if (provider == null) {
            throw new IllegalStateException("the AWS credentials service " + service + " gave no credentials provider");
        }
        return new ServiceCredentials(provider, service);
    }

    @Override
    public String[] credentials() {
        final Thread thread = Thread.currentThread();
        final ClassLoader previous = thread.getContextClassLoader();
        // The engine's thread has no context class loader; the provider's SDK clients look theirs up through it.
        thread.setContextClassLoader(provider.getClass().getClassLoader());
        try {
            final AwsCredentials resolved = provider.resolveCredentials();
            if (resolved == null) {
                return new String[] {"ERROR", "the provider of " + service + " returned no credentials"};
            }
            final String token = resolved instanceof AwsSessionCredentials session ? session.sessionToken() : null;
            final String expiry = resolved.expirationTime().map(Instant::toEpochMilli).map(String::valueOf).orElse(null);
            return new String[] {"OK", resolved.accessKeyId(), resolved.secretAccessKey(), token, expiry};
        } catch (final RuntimeException | LinkageError e) {
            return new String[] {"ERROR", reason(e)};
        } finally {
            thread.setContextClassLoader(previous);
        }
    }

    /** The exception's class and message, and its causes' (the native side removes anything secret-like). */
    static String reason(final Throwable error) {
        final StringBuilder text = new StringBuilder();
        Throwable e = error;
        for (int depth = 0; e != null && depth < 4; depth++, e = e.getCause()) {
            final String message = e.getMessage();
            final String part = e.getClass().getSimpleName() + (message == null ? "" : ": " + message) + unreadAnswer(e);
            if (text.indexOf(part) < 0) {
                text.append(text.isEmpty() ? "" : "; caused by ").append(part);
            }
            if (e.getCause() == e) {
                break;
            }
        }
        return text.toString();
    }

    /**
     * The status and text of an AWS error answer whose code the SDK could not read (its message then says nothing
     * but the status): an STS look-alike answering in another XML shape, or a proxy's HTML page. Error answers carry
     * no credentials.
     */
    static String unreadAnswer(final Throwable e) {
        if (!(e instanceof AwsServiceException service) || service.awsErrorDetails() == null
                || service.awsErrorDetails().errorCode() != null || service.awsErrorDetails().rawResponse() == null) {
            return "";
        }
        final String body = service.awsErrorDetails().rawResponse().asUtf8String();
        String text = body.replaceAll("<[^>]*>", " ").replaceAll("\\s+", " ").trim();
        if (text.length() > 400) {
            text = text.substring(0, 400) + "...";
        }
        return text.isEmpty() ? "" : " (the service answered HTTP " + service.statusCode() + ": " + text + ")";
    }
}
