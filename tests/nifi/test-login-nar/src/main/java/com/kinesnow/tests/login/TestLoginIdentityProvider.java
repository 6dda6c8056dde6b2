package com.kinesnow.tests.login;

import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import java.util.concurrent.TimeUnit;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import org.apache.nifi.authentication.AuthenticationResponse;
import org.apache.nifi.authentication.LoginCredentials;
import org.apache.nifi.authentication.LoginIdentityProvider;
import org.apache.nifi.authentication.LoginIdentityProviderConfigurationContext;
import org.apache.nifi.authentication.LoginIdentityProviderInitializationContext;
import org.apache.nifi.authentication.exception.InvalidLoginCredentialsException;
import org.apache.nifi.authentication.exception.ProviderCreationException;

/**
 * Test-only login identity provider of kinesnow's secured test NiFi (tests/nifi/nifi.sh start --secure), never
 * shipped. NiFi's single-user login providers NAR is not served where the tests build, so the tests log in through
 * this provider instead, with the same REST login (POST /nifi-api/access/token, username and password, bearer token).
 *
 * <p>One user. Its username and password hash come from the provider's properties in login-identity-providers.xml:
 * {@value #USERNAME} and {@value #PASSWORD_HASH}. The hash is PBKDF2 with HMAC-SHA-256 (the JDK's
 * {@code PBKDF2WithHmacSHA256}), salted, written by the test harness with Python's {@code hashlib.pbkdf2_hmac} as
 * {@code pbkdf2-sha256$<iterations>$<salt, base64>$<key, base64>}; the check compares in constant time
 * ({@link MessageDigest#isEqual}). Not bcrypt: nothing in the test harness can write bcrypt hashes.
 */
public final class TestLoginIdentityProvider implements LoginIdentityProvider {
    static final String USERNAME = "Username";
    static final String PASSWORD_HASH = "Password Hash";
    private static final String SCHEME = "pbkdf2-sha256";
    private static final long EXPIRATION_MILLIS = TimeUnit.HOURS.toMillis(12);

    private String issuer = TestLoginIdentityProvider.class.getSimpleName();
    private String username;
    private PasswordHash hash;

    @Override
    public void initialize(LoginIdentityProviderInitializationContext context) {
        issuer = context.getIdentifier();
    }

    @Override
    public void onConfigured(LoginIdentityProviderConfigurationContext context) {
        username = required(context, USERNAME);
        hash = PasswordHash.parse(required(context, PASSWORD_HASH));
    }

    @Override
    public AuthenticationResponse authenticate(LoginCredentials credentials) {
        String given = credentials.getPassword() == null ? "" : credentials.getPassword();
        boolean passwordMatches = hash.matches(given); // computed for every username: no timing hint
        if (!username.equals(credentials.getUsername()) || !passwordMatches) {
            throw new InvalidLoginCredentialsException("The username or password is not valid.");
        }
        return new AuthenticationResponse(username, username, EXPIRATION_MILLIS, issuer);
    }

    @Override
    public void preDestruction() {
    }

    private static String required(LoginIdentityProviderConfigurationContext context, String name) {
        String value = context.getProperty(name);
        if (value == null || value.isBlank()) {
            throw new ProviderCreationException("Property '" + name + "' is required.");
        }
        return value.trim();
    }

    /** A PBKDF2-HMAC-SHA-256 password hash: iterations, salt and derived key. */
    record PasswordHash(int iterations, byte[] salt, byte[] key) {
        static PasswordHash parse(String text) {
            String[] parts = text.split("\\$");
            if (parts.length != 4 || !parts[0].equals(SCHEME)) {
                throw new ProviderCreationException(
                        "Property '" + PASSWORD_HASH + "' is not " + SCHEME + "$<iterations>$<salt>$<key>.");
            }
            try {
                PasswordHash hash = new PasswordHash(Integer.parseInt(parts[1]),
                        Base64.getDecoder().decode(parts[2]), Base64.getDecoder().decode(parts[3]));
                if (hash.iterations < 1 || hash.salt.length == 0 || hash.key.length == 0) {
                    throw new IllegalArgumentException("empty part");
                }
                return hash;
            } catch (IllegalArgumentException e) {
                throw new ProviderCreationException("Property '" + PASSWORD_HASH + "' is malformed.", e);
            }
        }

        boolean matches(String password) {
            try {
                PBEKeySpec spec = new PBEKeySpec(password.toCharArray(), salt, iterations, key.length * 8);
                byte[] derived = SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
                spec.clearPassword();
                return MessageDigest.isEqual(derived, key);
            } catch (GeneralSecurityException e) {
                throw new IllegalStateException("PBKDF2WithHmacSHA256 is not available", e);
            }
        }
    }
}
