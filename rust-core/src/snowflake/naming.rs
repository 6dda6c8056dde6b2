//! Channel names: the one place that decides which channel a FlowFile's rows take.
//!
//! `<prefix>_<instance>_<source>`, where the instance is this PutSnowflake's own id (NiFi keeps it
//! in the processor's local state, so a restart reuses it; every NiFi instance, clustered or not,
//! has its own) and the source is
//! - `[<region>_]<stream>_<shardId>` for a shard's rows with exact tokens,
//! - the same followed by `_atleastonce` for a shard's rows without exact tokens (tokens the
//!   channel assigns, so they neither are skipped nor move the exact channel's token),
//! - `direct` for FlowFiles not from Kinesis (at least once too).
//!
//! Since no two instances share a channel, FlowFiles of a shard that moved to another instance
//! still load into their own instance's channel instead of being skipped as older than the other
//! instance's tokens.

use super::rows::{Delivery, Source};

pub const AT_LEAST_ONCE_SUFFIX: &str = "atleastonce";
pub const DIRECT: &str = "direct";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelNames {
    /// `<prefix>_<instance>`.
    base: String,
}

impl ChannelNames {
    pub fn new(prefix: &str, instance: &str) -> Self {
        Self { base: format!("{prefix}_{}", safe(instance)) }
    }

    /// The channel of a FlowFile from `source` whose rows are delivered as `delivery`.
    pub fn channel(&self, source: &Source, delivery: Delivery) -> String {
        match (source, delivery) {
            (Source::Shard { .. }, Delivery::ExactlyOnce) => self.shard(source),
            (Source::Shard { .. }, Delivery::AtLeastOnce) => format!("{}_{AT_LEAST_ONCE_SUFFIX}", self.shard(source)),
            (Source::Direct, _) => format!("{}_{DIRECT}", self.base),
        }
    }

    /// What the lineage gate knows a shard by: its exact channel's name, whichever channel its
    /// FlowFiles take.
    pub fn lineage_key(&self, source: &Source) -> String {
        self.channel(source, Delivery::ExactlyOnce)
    }

    fn shard(&self, source: &Source) -> String {
        match source {
            Source::Shard { region: Some(region), stream, shard_id } => {
                format!("{}_{}_{stream}_{shard_id}", self.base, safe(region))
            }
            Source::Shard { region: None, stream, shard_id } => format!("{}_{stream}_{shard_id}", self.base),
            Source::Direct => format!("{}_{DIRECT}", self.base),
        }
    }
}

/// Letters, digits, '_' and '-' as they are; anything else becomes '_'.
fn safe(text: &str) -> String {
    text.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(region: Option<&str>, stream: &str, shard_id: &str) -> Source {
        Source::Shard { region: region.map(str::to_owned), stream: stream.into(), shard_id: shard_id.into() }
    }

    #[test]
    fn names_tell_instances_regions_and_deliveries_apart() {
        let a = ChannelNames::new("kinesnow", "a1b2c3");
        let b = ChannelNames::new("kinesnow", "d4e5f6");
        let s = shard(Some("eu-west-1"), "orders", "shardId-000000000001");
        assert_eq!(a.channel(&s, Delivery::ExactlyOnce), "kinesnow_a1b2c3_eu-west-1_orders_shardId-000000000001");
        assert_eq!(
            a.channel(&s, Delivery::AtLeastOnce),
            "kinesnow_a1b2c3_eu-west-1_orders_shardId-000000000001_atleastonce"
        );
        assert_ne!(
            a.channel(&s, Delivery::ExactlyOnce),
            b.channel(&s, Delivery::ExactlyOnce),
            "two instances never share a channel"
        );
        let other_region = shard(Some("us-east-1"), "orders", "shardId-000000000001");
        assert_ne!(a.channel(&s, Delivery::ExactlyOnce), a.channel(&other_region, Delivery::ExactlyOnce));
        assert_eq!(
            a.channel(&shard(None, "orders", "shardId-0"), Delivery::ExactlyOnce),
            "kinesnow_a1b2c3_orders_shardId-0"
        );
        assert_eq!(a.channel(&Source::Direct, Delivery::AtLeastOnce), "kinesnow_a1b2c3_direct");
        assert_eq!(a.lineage_key(&s), a.channel(&s, Delivery::ExactlyOnce));
    }

    #[test]
    fn instance_and_region_are_made_safe() {
        let n = ChannelNames::new("p", "nifi-2.example:8443");
        assert_eq!(n.channel(&shard(Some("a/b"), "s", "x"), Delivery::ExactlyOnce), "p_nifi-2_example_8443_a_b_s_x");
    }
}
