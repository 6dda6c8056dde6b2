//! The `kinesisMetadata` object ConsumeKinesis adds to each record and PutSnowflake completes:
//! its key and fields, named and ordered as NiFi's own ConsumeKinesis and Openflow's Kinesis
//! connector write them. The Java twin `io.kinesnow.nifi.contract.KinesisMetadataFields` is
//! generated from [`ALL`] (the Record Writer's schema is built from it).

/// The key under which a record carries its metadata.
pub const KEY: &str = "kinesisMetadata";

macro_rules! fields {
    ($( #[doc = $doc:literal] $constant:ident = $name:literal; )*) => {
        $( #[doc = $doc] pub const $constant: &str = $name; )*

        /// Every field, in the order of NiFi's schema: (constant, name, meaning).
        pub const ALL: &[(&str, &str, &str)] = &[ $( (stringify!($constant), $name, $doc.trim_ascii()) ),* ];
    };
}

fields! {
    /// The stream the record came from.
    STREAM = "stream";
    /// The shard the record came from.
    SHARD_ID = "shardId";
    /// The record's sequence number.
    SEQUENCE_NUMBER = "sequenceNumber";
    /// Its sub-sequence number (0 when not KPL aggregated).
    SUB_SEQUENCE_NUMBER = "subSequenceNumber";
    /// The exactly-once key (see `exactly_once`).
    SHARDED_SEQUENCE_NUMBER = "shardedSequenceNumber";
    /// The record's partition key.
    PARTITION_KEY = "partitionKey";
    /// When Kinesis received the record, in milliseconds since the epoch.
    APPROXIMATE_ARRIVAL = "approximateArrival";
}

#[cfg(test)]
pub(super) fn java_twin() -> String {
    let mut out = super::java_class_head(
        "metadata.rs",
        "The kinesisMetadata object's key and fields, in the order of NiFi's schema.",
        "KinesisMetadataFields",
    );
    out.push_str("\n    /** The key under which a record carries its metadata. */\n");
    out.push_str(&format!("    public static final String KEY = \"{KEY}\";\n"));
    for (constant, name, meaning) in ALL {
        out.push_str(&format!("\n    /** {meaning} */\n    public static final String {constant} = \"{name}\";\n"));
    }
    out.push_str("}\n");
    out
}
