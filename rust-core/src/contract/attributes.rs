//! FlowFile attribute names shared by the engine and the processors, with what each means. The
//! Java twin `io.kinesnow.nifi.contract.Attributes` is generated from [`ALL`].

/// One attribute: its Rust and Java constant, its name and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute {
    pub constant: &'static str,
    pub name: &'static str,
    pub meaning: &'static str,
}

macro_rules! attributes {
    ($( #[doc = $doc:literal] $constant:ident = $name:literal; )*) => {
        $( #[doc = $doc] pub const $constant: &str = $name; )*

        /// Every attribute, in the order written here.
        pub const ALL: &[Attribute] = &[ $( Attribute { constant: stringify!($constant), name: $name, meaning: $doc.trim_ascii() } ),* ];
    };
}

attributes! {
    /// The Kinesis stream the records came from.
    STREAM = "aws.kinesis.stream.name";
    /// The stream's AWS region.
    REGION = "aws.kinesis.region";
    /// The shard the records came from.
    SHARD = "aws.kinesis.shard.id";
    /// Partition key of the (first) record.
    PARTITION_KEY = "aws.kinesis.partition.key";
    /// Sequence number of the FlowFile's first Kinesis record.
    FIRST_SEQUENCE = "aws.kinesis.first.sequence.number";
    /// Sub-sequence number of the FlowFile's first user record inside a KPL aggregate.
    FIRST_SUB = "aws.kinesis.first.subsequence.number";
    /// Sequence number of the FlowFile's last Kinesis record.
    LAST_SEQUENCE = "aws.kinesis.last.sequence.number";
    /// Sub-sequence number of the FlowFile's last user record inside a KPL aggregate.
    LAST_SUB = "aws.kinesis.last.subsequence.number";
    /// Approximate arrival time of the (first) record in Kinesis, in ms since the epoch.
    ARRIVAL_MS = "aws.kinesis.approximate.arrival.timestamp.ms";
    /// The shard's parents, comma-separated, when a split or merge created it.
    PARENT_SHARDS = "aws.kinesis.parent.shard.ids";
    /// How far the shard's reader was behind the tip of the stream, in milliseconds.
    MILLIS_BEHIND = "kinesis.millis.behind";
    /// Number of records in the FlowFile (with RECORD, the records the Record Writer wrote).
    RECORD_COUNT = "record.count";
    /// Why a record went to parse.failure.
    RECORD_ERROR_MESSAGE = "record.error.message";
    /// The record ConsumeKinesis read just before the FlowFile's first one in the same lease; empty when none (read from the shard's start, or the lease's first read from LATEST or a timestamp).
    PREVIOUS_SEQUENCE = "kinesnow.previous.sequence.number";
    /// Sub-sequence number of that record inside a KPL aggregate.
    PREVIOUS_SUB = "kinesnow.previous.subsequence.number";
    /// With Failover Position SNOWFLAKE_COMMIT: the stream's ARN, which links PutSnowflake's reports to this consumer.
    STREAM_ARN = "kinesnow.stream.arn";
    /// The Application Name: the flow the records belong to (PutSnowflake passes over the records this flow never loads, see parse.failure).
    APPLICATION = "kinesnow.application.name";
    /// With Failover Position SNOWFLAKE_COMMIT: the NiFi node that read the records.
    NODE = "kinesnow.node";
    /// With Failover Position SNOWFLAKE_COMMIT: the lease counter (tenure) the records were read under.
    LEASE_COUNTER = "kinesnow.lease.counter";
    /// Set by PutSnowflake on a FlowFile it sends back to its own queue to load at least once (value at-least-once).
    DELIVERY = "kinesnow.delivery";
    /// Set by PutSnowflake (never taken from the FlowFile) when its Record Reader could read no record of the FlowFile: why.
    RECORDS_UNREADABLE = "kinesnow.records.unreadable";
    /// The Snowflake database the FlowFile's rows went to.
    DATABASE = "kinesnow.snowflake.database";
    /// The Snowflake schema the FlowFile's rows went to.
    SCHEMA = "kinesnow.snowflake.schema";
    /// The Snowflake table the FlowFile's rows went to.
    TABLE = "kinesnow.snowflake.table";
    /// The Snowpipe Streaming pipe the FlowFile's rows went through.
    PIPE = "kinesnow.snowflake.pipe";
    /// The Snowpipe Streaming channel the rows went through.
    CHANNEL = "snowflake.channel";
    /// The offset token of the FlowFile's last row.
    OFFSET_TOKEN = "snowflake.offset.token";
    /// Rows of the FlowFile sent by this processor.
    ROWS_SENT = "snowflake.rows.sent";
    /// Rows of the FlowFile Snowflake had committed already, so not sent again.
    ROWS_SKIPPED = "snowflake.rows.skipped";
    /// Why the FlowFile went to failure or invalid.
    ERROR_MESSAGE = "snowflake.error.message";
    /// With a Record Reader: the numbers (from 1, comma-separated) of the records that could not be read or become rows.
    RECORDS_INVALID = "snowflake.records.invalid";
    /// With a Record Reader, on the invalid child: how many records of the parent FlowFile were handed to Snowflake with it.
    RECORDS_SENT = "snowflake.records.sent";
    /// With a Record Reader, on the invalid child: true when reading stopped at a record the reader could not get past.
    RECORDS_UNREAD = "snowflake.records.unread";
}

/// The value of [`DELIVERY`] on a FlowFile to load at least once.
pub const AT_LEAST_ONCE: &str = "at-least-once";

/// The prefix of every attribute ConsumeKinesis writes for the exactly-once path.
pub const KINESNOW_PREFIX: &str = "kinesnow.";

/// The prefix of the Kinesis attributes ConsumeKinesis writes (PutSnowflake passes them across JNI).
pub const KINESIS_PREFIX: &str = "aws.kinesis.";

/// The prefix of the attributes NiFi's split processors write (a FlowFile so marked loads at least once).
pub const FRAGMENT_PREFIX: &str = "fragment.";

#[cfg(test)]
pub(super) fn java_twin() -> String {
    let mut out = super::java_class_head(
        "attributes.rs",
        "FlowFile attribute names shared by the engine and the processors.",
        "Attributes",
    );
    for a in ALL {
        out.push_str(&format!(
            "\n    /** {} */\n    public static final String {} = \"{}\";\n",
            a.meaning.replace("*/", "* /"),
            a.constant,
            a.name
        ));
    }
    for (constant, value, meaning) in [
        ("AT_LEAST_ONCE", AT_LEAST_ONCE, "The value of DELIVERY on a FlowFile to load at least once."),
        (
            "KINESNOW_PREFIX",
            KINESNOW_PREFIX,
            "The prefix of every attribute ConsumeKinesis writes for the exactly-once path.",
        ),
        (
            "KINESIS_PREFIX",
            KINESIS_PREFIX,
            "The prefix of the Kinesis attributes ConsumeKinesis writes (PutSnowflake passes them across JNI).",
        ),
        (
            "FRAGMENT_PREFIX",
            FRAGMENT_PREFIX,
            "The prefix of the attributes NiFi's split processors write (a FlowFile so marked loads at least once).",
        ),
    ] {
        out.push_str(&format!("\n    /** {meaning} */\n    public static final String {constant} = \"{value}\";\n"));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_constants_are_unique() {
        let mut names: Vec<_> = ALL.iter().map(|a| a.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert!(ALL.iter().all(|a| !a.meaning.is_empty()));
    }
}
