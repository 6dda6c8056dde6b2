package io.kinesnow.nifi.processors;

/** PutSnowflake's Authentication Strategy. The names are the property's values, as the engine reads them. */
public enum AuthenticationStrategy implements Choice {
    KEY_PAIR("Key Pair",
            "Authenticate as User with an RSA key pair (JWT signed with the private key)."),
    SNOWFLAKE_MANAGED("Snowflake Managed",
            "Openflow's Snowflake deployments (SPCS): the token the platform mounts and rotates, read on every "
            + "use. The service account's OIDC token (Service Account Token File) when it can be read, sent as a "
            + "workload identity token, else the session token (Session Token File). No account, user or key is "
            + "needed: the account URL is https://<SNOWFLAKE_HOST>, from the environment variable the platform "
            + "sets."),
    SNOWFLAKE_MANAGED_TOKEN("Snowflake Managed Token (same as Snowflake Managed)",
            "An earlier name of Snowflake Managed, still accepted."),
    SNOWFLAKE_SESSION_TOKEN("Snowflake Session Token (same as Snowflake Managed)",
            "Another name of Snowflake Managed, still accepted.");

    private final Words words;

    AuthenticationStrategy(final String displayName, final String description) { words = new Words(displayName, description); }

    @Override public Words words() { return words; }
}
