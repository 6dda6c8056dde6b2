//! The counters each processor adds to NiFi's (`adjustCounter`: the canvas' Counters page and
//! `/nifi-api/counters`), and the gauges it records where the NiFi running it has them
//! (`recordGauge`, nifi-api 2.6 and later), written once. The engine keeps its counts in the top-level `counters`
//! module, in the order listed here, and the processor drains them into NiFi; the processor counts the rest
//! itself. The Java twins `io.kinesnow.nifi.contract.ConsumeKinesisCounters` and
//! `PutSnowflakeCounters` are generated from these lists.

/// One counter: its constant, the name NiFi shows and what it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterSpec {
    pub constant: &'static str,
    pub name: &'static str,
    pub meaning: &'static str,
}

macro_rules! counters {
    (engine $enum:ident { $( #[doc = $doc:literal] $variant:ident = $name:literal; )* }
     processor { $( #[doc = $pdoc:literal] $pconstant:ident = $pname:literal; )* }) => {
        /// The counters the engine keeps, as indexes into its counts.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum $enum { $( #[doc = $doc] $variant ),* }

        /// The engine's counters, in the order of its counts.
        pub const ENGINE: &[super::CounterSpec] = &[ $( super::CounterSpec {
            constant: stringify!($variant), name: $name, meaning: $doc.trim_ascii(),
        } ),* ];

        /// The counters the processor keeps itself.
        pub const PROCESSOR: &[super::CounterSpec] = &[ $( super::CounterSpec {
            constant: stringify!($pconstant), name: $pname, meaning: $pdoc.trim_ascii(),
        } ),* ];
    };
}

/// ConsumeKinesis' counters and gauges.
pub mod consume_kinesis {
    /// The gauges, in the order the engine reports their values after its counts.
    pub const GAUGES: &[super::CounterSpec] = &[
        super::CounterSpec {
            constant: "MILLIS_BEHIND_LATEST",
            name: "Kinesis Millis Behind Latest",
            meaning: "The most any shard this node leases was behind the tip of the stream on its last read (MillisBehindLatest), in milliseconds.",
        },
        super::CounterSpec {
            constant: "SHARDS_LEASED",
            name: "Shards Leased",
            meaning: "The shards this node leases.",
        },
    ];

    counters! {
        engine ConsumerCounter {
            /// Kinesis records fetched (after KPL de-aggregation), before NiFi has them.
            RecordsRead = "Records Read from Kinesis";
            /// Bytes of the records' data (a KPL aggregate counts as its records' payloads, without its framing).
            BytesRead = "Bytes Read from Kinesis";
            /// GetRecords calls answered (polling).
            GetRecordsCalls = "GetRecords Calls";
            /// Calls Kinesis refused for a shard's or the account's limits (ProvisionedThroughputExceeded, LimitExceeded).
            Throttles = "Kinesis Throttles";
            /// Batches of FlowFiles handed to NiFi.
            Batches = "Batches Handed to NiFi";
            /// Shard leases this node took (free, expired, or from a dead node).
            LeasesTaken = "Leases Taken";
            /// Shard leases another node took from this one, or fenced writes showed gone.
            LeasesLost = "Leases Lost";
            /// Shard leases this node gave up so another node could take them (balancing).
            LeasesHandedBack = "Leases Handed Back";
            /// Checkpoints written to the lease table after NiFi committed the records they cover.
            CheckpointsWritten = "Checkpoints Written";
            /// Records handed to NiFi in a session that did not commit; their shards read them again.
            RecordsReadAgain = "Records Read Again after a Rollback";
        }
        processor {
            /// Kinesis records written into FlowFiles of committed sessions (NiFi's own ConsumeKinesis has the same counter).
            RECORDS_CONSUMED = "Records Consumed";
            /// Records routed to parse.failure: the Record Reader could not read them (Processing Strategy RECORD).
            RECORDS_PARSE_FAILURE = "Records Parse Failure";
        }
    }
}

/// PutSnowflake's counters and gauges.
pub mod put_snowflake {
    /// The gauges, in the order the engine reports their values after its counts.
    pub const GAUGES: &[super::CounterSpec] = &[super::CounterSpec {
        constant: "FRESHNESS_LAG",
        name: "Snowflake Freshness Lag",
        meaning: "While FlowFiles of a shard wait for Snowflake to commit: how long ago the newest row Snowflake committed of the stalest such shard arrived in Kinesis (as the Freshness Warning weighs it), in milliseconds; 0 when nothing waits.",
    }];

    counters! {
        engine SinkCounter {
            /// Channels opened again after Snowflake invalidated them, a stale continuation token or rows not committed in time.
            ChannelReopens = "Channel Reopens";
            /// Calls to Snowflake tried again after a 429 or 503 (Snowflake throttled the client).
            RetriedThrottled = "Snowflake Calls Retried (throttled)";
            /// Calls to Snowflake tried again after another transient answer (a 5xx, a timeout, a lost connection).
            RetriedTransient = "Snowflake Calls Retried (server or network)";
            /// Gaps passed over: a shard's FlowFiles waited Order Wait for an earlier record that never came.
            GapsDetected = "Gaps Detected";
        }
        processor {
            /// Rows Snowflake reported committed.
            ROWS_SENT = "Rows Sent";
            /// Duplicates prevented: rows not sent again because Snowflake had committed that very record (a replay).
            ROWS_SKIPPED = "Rows Skipped (already committed)";
            /// FlowFiles that went back to the queue, penalized, to wait for an earlier record of their shard.
            FLOW_FILES_WAITING = "FlowFiles Waiting for an Earlier Record";
            /// FlowFiles sent back to the queue to load at least once: they bring records of a gap a channel passed over, or waited Order Wait in a shard's shared channel.
            GAP_FLOW_FILES_RELOADED = "Gap FlowFiles Sent to Load at Least Once";
        }
    }
}

/// Both processors' counters, by the Java class that reports them: (processor, engine's, processor's).
pub const PROCESSORS: &[(&str, &[CounterSpec], &[CounterSpec])] = &[
    ("ConsumeKinesis", consume_kinesis::ENGINE, consume_kinesis::PROCESSOR),
    ("PutSnowflake", put_snowflake::ENGINE, put_snowflake::PROCESSOR),
];

/// Both processors' gauges, by the Java class that records them.
pub const GAUGES: &[(&str, &[CounterSpec])] =
    &[("ConsumeKinesis", consume_kinesis::GAUGES), ("PutSnowflake", put_snowflake::GAUGES)];

/// A gauge value the engine has none for (nothing to measure yet): not recorded.
pub const NO_VALUE: i64 = i64::MIN;

#[cfg(test)]
pub(super) fn java_twins() -> Vec<(String, String)> {
    let mut twins = Vec::new();
    for (processor, engine, own) in PROCESSORS {
        let mut out = format!(
            "{}import java.util.List;\n\n\
             /** {processor}'s counters in NiFi: the engine's, in the order it reports them, and the processor's own. */\n\
             public final class {processor}Counters {{\n    private {processor}Counters() {{\n    }}\n",
            super::generated_head("counters.rs")
        );
        let names: Vec<String> = engine.iter().map(|c| format!("\n            \"{}\"", c.name)).collect();
        out.push_str(&format!(
            "\n    /** The engine's counters, by their index in what it reports. */\n    public static final List<String> ENGINE = List.of({});\n",
            names.join(",")
        ));
        let gauges = GAUGES.iter().find(|(p, _)| p == processor).map_or(&[][..], |(_, g)| g);
        let names: Vec<String> = gauges.iter().map(|g| format!("\n            \"{}\"", g.name)).collect();
        out.push_str(&format!(
            "\n    /** The gauges (NiFi 2.6 and later), by their index after the engine's counts. */\n    public static final List<String> GAUGES = List.of({});\n",
            names.join(",")
        ));
        for c in *own {
            out.push_str(&format!(
                "\n    /** {} */\n    public static final String {} = \"{}\";\n",
                c.meaning.replace("*/", "* /"),
                c.constant,
                c.name
            ));
        }
        out.push_str("}\n");
        twins.push((format!("{processor}Counters.java"), out));
    }
    twins
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_processor_names_a_counter_once() {
        for (processor, engine, own) in PROCESSORS {
            let mut names: Vec<&str> = engine.iter().chain(own.iter()).map(|c| c.name).collect();
            let all = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all, "{processor}: a counter named twice");
        }
    }

    #[test]
    fn the_monitoring_page_explains_every_counter() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/monitoring.md"))
            .expect("docs/monitoring.md is readable");
        for (processor, engine, own) in PROCESSORS {
            for c in engine.iter().chain(own.iter()) {
                assert!(
                    page.contains(&format!("| {processor} | `{}` |", c.name)),
                    "docs/monitoring.md has no row for {processor}'s counter `{}`",
                    c.name
                );
            }
        }
        for (processor, gauges) in GAUGES {
            for g in *gauges {
                assert!(
                    page.contains(&format!("| {processor} | `{}` |", g.name)),
                    "docs/monitoring.md has no row for {processor}'s gauge `{}`",
                    g.name
                );
            }
        }
    }

    #[test]
    fn the_enums_index_the_engine_lists() {
        assert_eq!(consume_kinesis::ConsumerCounter::RecordsReadAgain as usize + 1, consume_kinesis::ENGINE.len());
        assert_eq!(put_snowflake::SinkCounter::GapsDetected as usize + 1, put_snowflake::ENGINE.len());
        assert_eq!(
            consume_kinesis::ENGINE[consume_kinesis::ConsumerCounter::Throttles as usize].name,
            "Kinesis Throttles"
        );
    }
}
