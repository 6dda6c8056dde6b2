package io.kinesnow.nifi.nativebridge;

/**
 * AWS credentials the native engine asks Java for (NiFi's AWS credentials controller service, wrapped by the
 * processors), registered with {@link NativeBridge#registerCredentials}. The engine calls {@link #credentials()}
 * from a native thread attached to the JVM for the call, off NiFi's threads, shortly before the last credentials
 * expire.
 */
public interface CredentialsCallback {
    /**
     * Either {@code {"OK", accessKeyId, secretAccessKey, sessionToken or null, expiry in epoch milliseconds or null}}
     * or {@code {"ERROR", reason}}. The reason is shown to the user: it must name what failed and why, and hold no
     * secret. Implementations return errors instead of throwing.
     */
    String[] credentials();
}
