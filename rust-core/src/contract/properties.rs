//! Each processor's properties as both languages must see them: name, default and allowed
//! values. Java's property descriptors take them from the generated, checked-in twins
//! `io.kinesnow.nifi.contract.ConsumeKinesisSpecs` and `PutSnowflakeSpecs` (`PropertySpecsTest`
//! checks every descriptor against them); Rust's settings read the same names from here, and a unit test in `config` checks
//! that each default written here is what the settings assume when the property is not set.
//! Descriptions, validators and dependencies stay in Java, where NiFi shows them. NiFi's own
//! properties added to ours (the Proxy Configuration Service, the AWS credentials service) are not
//! listed here.

/// One property: its Rust and Java constant, its name, its default and its allowed values (empty:
/// any value its validation accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropertySpec {
    pub constant: &'static str,
    pub name: &'static str,
    pub default: Option<&'static str>,
    pub allowed: &'static [&'static str],
}

macro_rules! properties {
    ($( $constant:ident = $name:literal, $default:expr, [$($allowed:literal),*]; )*) => {
        $( pub const $constant: &str = $name; )*

        /// Every property, in the order of the processor's descriptors.
        pub const ALL: &[super::PropertySpec] = &[ $( super::PropertySpec {
            constant: stringify!($constant), name: $name, default: $default, allowed: &[$($allowed),*],
        } ),* ];
    };
}

/// ConsumeKinesis' properties.
pub mod consume_kinesis {
    properties! {
        STREAM_NAME = "Stream Name", None, [];
        APPLICATION_NAME = "Application Name", None, [];
        REGION = "Region", Some("us-west-2"), [];
        ACCESS_KEY_ID = "AWS Access Key ID", None, [];
        SECRET_ACCESS_KEY = "AWS Secret Access Key", None, [];
        PROFILE_NAME = "Profile Name", None, [];
        CREDENTIALS_FILE = "Credentials File", None, [];
        WEB_IDENTITY_TOKEN_FILE = "Web Identity Token File", None, [];
        ASSUME_ROLE_ARN = "Assume Role ARN", None, [];
        ASSUME_ROLE_SESSION_NAME = "Assume Role Session Name", Some("nifi-kinesnow"), [];
        ASSUME_ROLE_EXTERNAL_ID = "Assume Role External ID", None, [];
        ASSUME_ROLE_SESSION_TIME = "Assume Role Session Time", Some("3600"), [];
        ASSUME_ROLE_STS_REGION = "Assume Role STS Region", None, [];
        ASSUME_ROLE_STS_ENDPOINT = "Assume Role STS Endpoint Override", None, [];
        ENDPOINT_OVERRIDE = "Endpoint Override URL", None, [];
        DYNAMODB_ENDPOINT_OVERRIDE = "DynamoDB Endpoint Override URL", None, [];
        CONSUMER_TYPE = "Consumer Type", Some("SHARED_THROUGHPUT"), ["SHARED_THROUGHPUT", "ENHANCED_FAN_OUT"];
        INITIAL_POSITION = "Initial Stream Position", Some("TRIM_HORIZON"), ["TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"];
        POSITION_TIMESTAMP = "Stream Position Timestamp", None, [];
        MAX_RECORDS_PER_REQUEST = "Max Records Per Request", Some("1000"), [];
        MAX_BATCH_DURATION = "Max Batch Duration", Some("1 sec"), [];
        MAX_BATCH_SIZE = "Max Batch Size", Some("10 MB"), [];
        MAX_BUFFER_SIZE = "Max Buffer Size", Some("64 MB"), [];
        PROCESSING_STRATEGY = "Processing Strategy", Some("FLOW_FILE"), ["FLOW_FILE", "LINE_DELIMITED", "DEMARCATOR", "RECORD"];
        MESSAGE_DEMARCATOR = "Message Demarcator", None, [];
        RECORD_READER = "Record Reader", None, [];
        RECORD_WRITER = "Record Writer", None, [];
        OUTPUT_STRATEGY = "Output Strategy", Some("USE_VALUE"), ["USE_VALUE", "USE_WRAPPER", "INJECT_METADATA"];
        LAG_WARNING_THRESHOLD = "Lag Warning Threshold", Some("50"), [];
        FAILOVER_TIMEOUT = "Failover Timeout", Some("7 sec"), [];
        STUCK_SHARD_WARNING = "Stuck Shard Warning", Some("5 min"), [];
        FAILOVER_POSITION = "Failover Position", Some("NIFI_COMMIT"), ["NIFI_COMMIT", "SNOWFLAKE_COMMIT"];
    }

    /// Properties renamed since a release, as (former name, current name): `migrateProperties`
    /// renames them in a user's flow, so the flow stays valid. Append; never remove an entry.
    /// Empty: no property has been renamed since the first release.
    pub const RENAMED: &[(&str, &str)] = &[];
}

/// PutSnowflake's properties.
pub mod put_snowflake {
    properties! {
        ACCOUNT_IDENTIFIER = "Account Identifier", None, [];
        URL_OVERRIDE = "Snowflake URL Override", None, [];
        AUTHENTICATION_STRATEGY = "Authentication Strategy", Some("KEY_PAIR"), ["KEY_PAIR", "SNOWFLAKE_MANAGED", "SNOWFLAKE_MANAGED_TOKEN", "SNOWFLAKE_SESSION_TOKEN"];
        USER = "User", None, [];
        ROLE = "Role", None, [];
        PRIVATE_KEY = "Private Key", None, [];
        PRIVATE_KEY_FILE = "Private Key File", None, [];
        PRIVATE_KEY_PASSWORD = "Private Key Password", None, [];
        TOKEN_FILE = "Session Token File", Some("/snowflake/session/token"), [];
        SERVICE_ACCOUNT_TOKEN_FILE = "Service Account Token File", Some("/snowflake/serviceaccount/token"), [];
        DATABASE = "Database", None, [];
        SCHEMA = "Schema", None, [];
        TABLE = "Table", None, [];
        DESTINATION_TYPE = "Destination Type", Some("TABLE"), ["TABLE", "PIPE"];
        PIPE = "Pipe", None, [];
        ICEBERG_ENABLED = "Iceberg Enabled", Some("false"), ["true", "false"];
        SCHEMA_EVOLUTION_ENABLED = "Schema Evolution Enabled", Some("false"), ["true", "false"];
        CHANNEL_PREFIX = "Channel Name Prefix", Some("kinesnow"), [];
        MAX_BATCH_SIZE = "Max Batch Size", Some("8 MB"), [];
        MAX_LATENCY = "Max Latency", Some("250 ms"), [];
        COMMIT_TIMEOUT = "Commit Timeout", Some("90 sec"), [];
        ORDER_WAIT = "Order Wait", Some("60 sec"), [];
        MAX_IN_FLIGHT_SIZE = "Max In-Flight Size", Some("64 MB"), [];
        FRESHNESS_WARNING = "Freshness Warning", Some("0 sec"), [];
        RECORD_READER = "Record Reader", None, [];
        BINARY_ENCODING = "Binary Encoding", Some("HEX"), ["HEX", "BASE64"];
    }

    /// Properties renamed since a release, as (former name, current name): `migrateProperties`
    /// renames them in a user's flow, so the flow stays valid. Append; never remove an entry.
    /// Empty: no property has been renamed since the first release.
    pub const RENAMED: &[(&str, &str)] = &[];
}

/// Both processors' specs, by the Java class that declares them.
pub const PROCESSORS: &[(&str, &[PropertySpec])] =
    &[("ConsumeKinesis", consume_kinesis::ALL), ("PutSnowflake", put_snowflake::ALL)];

/// Both processors' renamed properties, by the Java class that declares them.
pub const RENAMES: &[(&str, &[(&str, &str)])] =
    &[("ConsumeKinesis", consume_kinesis::RENAMED), ("PutSnowflake", put_snowflake::RENAMED)];

/// `processor`'s renamed properties (none for an unknown processor).
pub fn renamed_by(processor: &str) -> &'static [(&'static str, &'static str)] {
    RENAMES.iter().find(|(p, _)| *p == processor).map_or(&[], |(_, r)| r)
}

#[cfg(test)]
fn java_string(value: Option<&str>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
}

/// The Java twins: `PropertySpec.java` (the record) and one `<Processor>Specs.java` per processor.
#[cfg(test)]
pub(super) fn java_twins() -> Vec<(String, String)> {
    let generated = super::generated_head("properties.rs");
    let record = format!(
        "{generated}import java.util.List;\n\n\
         /** One property as the engine reads it: its name, default (null: none) and allowed values (empty: any). */\n\
         public record PropertySpec(String name, String defaultValue, List<String> allowed) {{\n}}\n"
    );
    let mut twins = vec![("PropertySpec.java".to_owned(), record)];
    for (processor, specs) in PROCESSORS {
        let mut out = format!(
            "{generated}import java.util.List;\nimport java.util.Map;\n\n\
             /** {processor}'s properties as the engine reads them: names, defaults and allowed values. */\n\
             public final class {processor}Specs {{\n    private {processor}Specs() {{\n    }}\n"
        );
        for spec in *specs {
            let allowed: Vec<String> = spec.allowed.iter().map(|a| java_string(Some(a))).collect();
            out.push_str(&format!(
                "\n    public static final PropertySpec {} = new PropertySpec({}, {}, List.of({}));\n",
                spec.constant,
                java_string(Some(spec.name)),
                java_string(spec.default),
                allowed.join(", ")
            ));
        }
        let all: Vec<&str> = specs.iter().map(|s| s.constant).collect();
        out.push_str(&format!(
            "\n    /** Every property, in the order of the descriptors. */\n    public static final List<PropertySpec> ALL = List.of({});\n",
            all.join(", ")
        ));
        let renamed: Vec<String> = renamed_by(processor)
            .iter()
            .map(|(former, current)| format!("{}, {}", java_string(Some(former)), java_string(Some(current))))
            .collect();
        out.push_str(&format!(
            "\n    /** Properties renamed since a release: former name to current name (migrateProperties). */\n    public static final Map<String, String> RENAMED = Map.of({});\n}}\n",
            renamed.join(", ")
        ));
        twins.push((format!("{processor}Specs.java"), out));
    }
    twins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_are_allowed() {
        for (processor, specs) in PROCESSORS {
            let mut names: Vec<_> = specs.iter().map(|s| s.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), specs.len(), "{processor}: a property named twice");
            for spec in *specs {
                if let (Some(default), false) = (spec.default, spec.allowed.is_empty()) {
                    assert!(
                        spec.allowed.contains(&default),
                        "{processor}: {} defaults to {default}, not allowed",
                        spec.name
                    );
                }
            }
        }
    }

    #[test]
    fn a_rename_leads_from_a_former_name_to_a_current_one() {
        for (processor, specs) in PROCESSORS {
            let current: Vec<&str> = specs.iter().map(|s| s.name).collect();
            for (former, now) in renamed_by(processor) {
                assert!(current.contains(now), "{processor}: {former} is renamed to {now}, which is not a property");
                assert!(!current.contains(former), "{processor}: {former} is renamed but still a property");
            }
        }
    }
}
