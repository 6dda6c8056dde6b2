//! FlowFiles of a consumer that tracks what Snowflake has (ConsumeKinesis' Failover Position
//! `SNOWFLAKE_COMMIT`, see `feedback`): which channel they take, and the position their success
//! reports. Pure decisions; `router` applies them (with its own rules first, the waits and the
//! parking lot) and the sink engine does the rest.
//!
//! Such a FlowFile carries its consumer (`kinesnow.stream.arn`, `kinesnow.application.name`), the
//! NiFi node that read it (`kinesnow.node`) and the lease counter of the tenure that read it
//! (`kinesnow.lease.counter`). Its rows go to
//! - **the shard's shared channel** (`<prefix>_<account>_<region>_<stream>_<application>_<shard>`,
//!   the same on every node) when it was read on this node and follows on from what this node put
//!   of its lease into the channel (`feedback::Chain`): every tenure of a shard re-reads from
//!   what Snowflake had when it began, so whichever node commits a record first loads it and the
//!   others skip it. Each node's FlowFiles of a lease go in as one unbroken run, so no gap is ever
//!   skipped;
//! - waiting (parked in the engine) while one of its lease's FlowFiles read before it has not come
//!   yet: NiFi's queue keeps no order (no prioritizer, several ConsumeKinesis tasks, a rollback,
//!   `failure` sent back), so the earlier one usually comes soon and the chain goes on;
//! - the per-node channels with a warning when that FlowFile did not come within the order wait
//!   (a load-balanced connection sent it to another node, a flow dropped it): at least once, and no
//!   position is reported past the gap, so a node taking the shard over re-reads from before it;
//! - nowhere (success, `superseded`) when it came from another node and the shard's lease has
//!   moved on to a tracking tenure since (NiFi's offload or a load-balanced connection sent it
//!   here): that tenure re-read its records from what Snowflake had, so they load once anyway,
//!   while loading this copy beside them could skip rows another node has not committed yet;
//! - parked in the engine (its session waits) until this node's consumer of the same key has read
//!   the lease table after the FlowFile arrived (so a release just before an offload is seen), while
//!   the lease that read it is released and not taken yet (an offload under way), or while this
//!   PutSnowflake is warming up (just started, no consumer of this node has read the table yet);
//! - the per-node channels with a warning otherwise (another node's FlowFiles while its tenure is
//!   current, still after twice the consumer's failover timeout, so its holder is alive: a
//!   load-balanced connection between ConsumeKinesis and PutSnowflake): at least once, because
//!   rows of one shard arriving on several nodes are no contiguous run.

use std::collections::HashMap;

use md5::Digest;

use crate::feedback::{Chain, LinkKey, ShardTenure};
use crate::kinesis::position::Position;

use super::rows::{ATTR_LAST_SEQUENCE, ATTR_LAST_SUB, ATTR_SHARD};

pub use super::rows::{ATTR_PREVIOUS_SEQUENCE, ATTR_PREVIOUS_SUB};
pub use crate::contract::attributes::APPLICATION as ATTR_APPLICATION;
/// The prefix of the attributes above, which Java passes across JNI.
pub use crate::contract::attributes::KINESNOW_PREFIX as ATTRIBUTE_PREFIX;
pub use crate::contract::attributes::LEASE_COUNTER as ATTR_LEASE_COUNTER;
pub use crate::contract::attributes::NODE as ATTR_NODE;
pub use crate::contract::attributes::STREAM_ARN as ATTR_STREAM_ARN;

/// One lease of a shard: its consumer, the shard and the lease counter of the tenure that read it.
/// A chain, a report and the broken set are per lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId {
    pub key: LinkKey,
    pub shard: String,
    pub tenure: u64,
}

/// A FlowFile of a tracking consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// The lease that read it.
    pub lease: LeaseId,
    pub node: String,
    /// The FlowFile's last record: what its success reports loaded.
    pub last: Position,
    /// The record its lease read just before its first one (`None`: none, from the shard's start).
    pub previous: Option<Position>,
}

/// What becomes of a tracked FlowFile's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Shared,
    Superseded {
        current: u64,
    },
    Park,
    /// One of its lease's FlowFiles read before it has not come yet (NiFi's queue keeps no order):
    /// it waits for it, up to the order wait, then takes the per-node channels for `reason`.
    AwaitChain {
        reason: String,
    },
    PerNode {
        reason: String,
    },
}

/// The FlowFile's tracking, if its attributes carry all of it (any missing or malformed part
/// leaves it untracked, on the per-node path).
pub fn tracked(attributes: &HashMap<String, String>) -> Option<Tracked> {
    let get = |name: &str| attributes.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let last_sequence = get(ATTR_LAST_SEQUENCE).filter(|s| s.bytes().all(|b| b.is_ascii_digit()))?;
    let last_sub = match get(ATTR_LAST_SUB) {
        Some(sub) => Some(sub.parse::<u64>().ok()?),
        None => None,
    };
    let previous = match get(ATTR_PREVIOUS_SEQUENCE) {
        Some(sequence) if sequence.bytes().all(|b| b.is_ascii_digit()) => {
            let sub = match get(ATTR_PREVIOUS_SUB) {
                Some(sub) => Some(sub.parse::<u64>().ok()?),
                None => None,
            };
            Some(Position::new(sequence, sub))
        }
        Some(_) => return None,
        None => None,
    };
    Some(Tracked {
        lease: LeaseId {
            key: LinkKey { stream: get(ATTR_STREAM_ARN)?.to_owned(), application: get(ATTR_APPLICATION)?.to_owned() },
            shard: get(ATTR_SHARD)?.to_owned(),
            tenure: get(ATTR_LEASE_COUNTER)?.parse().ok()?,
        },
        node: get(ATTR_NODE)?.to_owned(),
        last: Position::new(last_sequence, last_sub),
        previous,
    })
}

/// What this JVM's consumers of a FlowFile's key know of its shard's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The counter of the shard's lease that a consumer of this JVM holds now.
    pub held_here: Option<u64>,
    /// A consumer of the key has read the lease table since this JVM started.
    pub known: bool,
    /// The shard's latest tracking tenure as last read (`None`: its row has no loaded position).
    pub tenure: Option<ShardTenure>,
    /// That read came after the FlowFile was first parked.
    pub fresh: bool,
    /// Whether the FlowFile follows on from what this JVM put of its lease into the shared channel.
    pub chain: Chain,
}

/// See the module comment; `warming` while this PutSnowflake has just started; `held_wait_over`
/// once the FlowFile was parked for longer than a dead holder takes to be replaced (so a holder
/// still there is alive: a load-balanced connection).
pub fn decide(tracked: &Tracked, my_node: &str, view: View, warming: bool, held_wait_over: bool) -> Decision {
    if tracked.node == my_node {
        return local(tracked, view, warming);
    }
    if !view.known {
        return if warming {
            Decision::Park
        } else {
            Decision::PerNode {
                reason: format!(
                    "it was read on NiFi node '{}' and no ConsumeKinesis of Application Name '{}' runs on this node to tell \
                     whether that node's lease is over",
                    tracked.node, tracked.lease.key.application
                ),
            }
        };
    }
    if !view.fresh {
        return Decision::Park;
    }
    match view.tenure {
        Some(v) if v.counter > tracked.lease.tenure => Decision::Superseded { current: v.counter },
        Some(v) if v.counter == tracked.lease.tenure && !v.held => Decision::Park,
        Some(v) if v.counter == tracked.lease.tenure && !held_wait_over => Decision::Park,
        Some(_) => Decision::PerNode {
            reason: format!(
                "it was read on NiFi node '{}' while that node still holds the lease (is the connection from ConsumeKinesis \
                 load-balanced?)",
                tracked.node
            ),
        },
        None => Decision::PerNode {
            reason: format!("it was read on NiFi node '{}' and the lease row of shard {} no longer tracks Snowflake's position", tracked.node, tracked.lease.shard),
        },
    }
}

/// A FlowFile read on this node: while the lease that read it is this node's engine's own (then no
/// FlowFile of that lease has left this node but through a load-balanced connection), its chain
/// decides. Otherwise, on a table read from after it came, superseded when a later tracking lease
/// exists (a FlowFile offloaded away and back, or left from before a restart), else its chain
/// decides. Without any consumer of its key on this node it waits out the warm-up, then its chain
/// decides (this node's queue drained with ConsumeKinesis stopped). A chain that is not known (this
/// JVM's engine did not take that lease: a restart) parks the FlowFile until a later lease supersedes
/// it; the sink sends it to the per-node channels if none comes in time.
fn local(tracked: &Tracked, view: View, warming: bool) -> Decision {
    if view.held_here == Some(tracked.lease.tenure) {
        return by_chain(tracked, view.chain);
    }
    if !view.fresh {
        return if view.known || warming { Decision::Park } else { by_chain(tracked, view.chain) };
    }
    match view.tenure {
        Some(v) if v.counter > tracked.lease.tenure => Decision::Superseded { current: v.counter },
        _ => by_chain(tracked, view.chain),
    }
}

fn by_chain(tracked: &Tracked, chain: Chain) -> Decision {
    match chain {
        Chain::Linked => Decision::Shared,
        Chain::Unknown => Decision::Park,
        Chain::Broken => Decision::AwaitChain {
            reason: format!(
                "a FlowFile that lease {} of shard {} read before this one never reached this PutSnowflake (is the connection \
                 from ConsumeKinesis load-balanced, or are FlowFiles filtered out on the way?); the rest of that lease's \
                 FlowFiles on this node go the same way",
                tracked.lease.tenure, tracked.lease.shard
            ),
        },
    }
}

/// The shared channel of a tracked FlowFile's shard (the same on every node).
pub fn shared_channel(prefix: &str, key: &LinkKey, shard_id: &str) -> String {
    let mut name = format!("{prefix}_{}_{}_{}", stream_identity(&key.stream), safe(&key.application), safe(shard_id));
    if name.len() > MAX_CHANNEL_NAME {
        let digest: String = md5::Md5::digest(name.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        name.truncate(MAX_CHANNEL_NAME - digest.len() - 1);
        name.push('_');
        name.push_str(&digest);
    }
    name
}

/// Channel names are Snowflake identifiers of at most 255 characters.
const MAX_CHANNEL_NAME: usize = 255;

/// `<account>_<region>_<stream>` from `arn:aws:kinesis:<region>:<account>:stream/<stream>`; the
/// whole text made safe when it is not such an ARN.
fn stream_identity(arn: &str) -> String {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", _, "kinesis", region, account, resource] => match resource.strip_prefix("stream/") {
            Some(stream) => format!("{}_{}_{}", safe(account), safe(region), safe(stream)),
            None => safe(arn),
        },
        _ => safe(arn),
    }
}

/// Letters, digits, '_' and '-' as they are; anything else becomes '_'.
fn safe(text: &str) -> String {
    text.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes(node: &str, counter: &str) -> HashMap<String, String> {
        HashMap::from([
            (ATTR_STREAM_ARN.to_owned(), "arn:aws:kinesis:eu-west-1:123456789012:stream/orders".to_owned()),
            (ATTR_APPLICATION.to_owned(), "orders-to-snowflake".to_owned()),
            (ATTR_NODE.to_owned(), node.to_owned()),
            (ATTR_LEASE_COUNTER.to_owned(), counter.to_owned()),
            (ATTR_SHARD.to_owned(), "shardId-000000000001".to_owned()),
            (ATTR_LAST_SEQUENCE.to_owned(), "4960".to_owned()),
            (ATTR_LAST_SUB.to_owned(), "3".to_owned()),
        ])
    }

    #[test]
    fn reads_the_tracking_and_refuses_any_part_missing_or_malformed() {
        let t = tracked(&attributes("n1", "4")).expect("tracked");
        assert_eq!((t.node.as_str(), t.lease.tenure, t.last.clone()), ("n1", 4, Position::new("4960", Some(3))));
        for name in [ATTR_STREAM_ARN, ATTR_APPLICATION, ATTR_NODE, ATTR_LEASE_COUNTER, ATTR_SHARD, ATTR_LAST_SEQUENCE] {
            let mut a = attributes("n1", "4");
            a.remove(name);
            assert_eq!(tracked(&a), None, "without {name}");
        }
        assert_eq!(tracked(&attributes("n1", "four")), None);
        let mut a = attributes("n1", "4");
        a.insert(ATTR_LAST_SUB.to_owned(), "x".into());
        assert_eq!(tracked(&a), None);
    }

    #[test]
    fn reads_the_previous_record_when_there_is_one() {
        assert_eq!(tracked(&attributes("n1", "4")).unwrap().previous, None);
        let mut a = attributes("n1", "4");
        a.insert(ATTR_PREVIOUS_SEQUENCE.to_owned(), "4959".into());
        assert_eq!(tracked(&a).unwrap().previous, Some(Position::new("4959", None)));
        a.insert(ATTR_PREVIOUS_SUB.to_owned(), "2".into());
        assert_eq!(tracked(&a).unwrap().previous, Some(Position::new("4959", Some(2))));
        a.insert(ATTR_PREVIOUS_SUB.to_owned(), "two".into());
        assert_eq!(tracked(&a), None, "a malformed previous position leaves it untracked");
        a.insert(ATTR_PREVIOUS_SEQUENCE.to_owned(), "49x".into());
        a.remove(ATTR_PREVIOUS_SUB);
        assert_eq!(tracked(&a), None);
    }

    #[test]
    fn own_nodes_flow_files_share_the_channel_by_their_chain() {
        let t = tracked(&attributes("n1", "4")).unwrap();
        let unknown = View { held_here: None, known: false, tenure: None, fresh: false, chain: Chain::Unknown };
        assert_eq!(
            decide(&t, "n1", unknown, true, true),
            Decision::Park,
            "just started: wait for this node's consumer to read the table"
        );
        assert_eq!(
            decide(&t, "n1", unknown, false, true),
            Decision::Park,
            "no consumer here and nothing known of its lease: wait for a later lease"
        );
        assert_eq!(
            decide(&t, "n1", View { chain: Chain::Linked, ..unknown }, false, true),
            Decision::Shared,
            "no consumer here, its lease's FlowFiles all came: this node's queue drained with ConsumeKinesis stopped"
        );
        let mine = View { held_here: Some(4), known: true, tenure: None, fresh: false, chain: Chain::Linked };
        assert_eq!(decide(&t, "n1", mine, false, false), Decision::Shared, "its own engine's lease");
        assert!(
            matches!(
                decide(&t, "n1", View { chain: Chain::Broken, ..mine }, false, false),
                Decision::AwaitChain { .. }
            ),
            "one of its lease's FlowFiles before it has not come yet (or went elsewhere): it waits, then per-node"
        );
        let stale = View {
            held_here: Some(5),
            known: true,
            tenure: Some(ShardTenure { counter: 5, held: true }),
            fresh: false,
            chain: Chain::Unknown,
        };
        assert_eq!(
            decide(&t, "n1", stale, false, false),
            Decision::Park,
            "another lease of this node: wait for a table read"
        );
        assert_eq!(decide(&t, "n1", View { fresh: true, ..stale }, false, false), Decision::Superseded { current: 5 });
        let old = View {
            held_here: None,
            known: true,
            tenure: Some(ShardTenure { counter: 4, held: true }),
            fresh: true,
            chain: Chain::Unknown,
        };
        assert_eq!(
            decide(&t, "n1", old, false, false),
            Decision::Park,
            "left from before a restart, its lease not taken over yet"
        );
        assert_eq!(
            decide(&t, "n1", View { chain: Chain::Linked, ..old }, false, false),
            Decision::Shared,
            "its engine stopped, the chain is known"
        );
    }

    #[test]
    fn another_nodes_flow_files_follow_the_tenure() {
        let t = tracked(&attributes("n1", "4")).unwrap();
        let unknown = View { held_here: None, known: false, tenure: None, fresh: false, chain: Chain::Unknown };
        let fresh = |tenure| View { held_here: None, known: true, tenure, fresh: true, chain: Chain::Unknown };
        let held = |counter| Some(ShardTenure { counter, held: true });
        assert_eq!(
            decide(&t, "n2", View { fresh: false, ..fresh(held(5)) }, false, true),
            Decision::Park,
            "a read from before the FlowFile came decides nothing"
        );
        assert_eq!(decide(&t, "n2", View { fresh: false, ..fresh(None) }, false, true), Decision::Park);
        assert_eq!(decide(&t, "n2", fresh(held(5)), false, true), Decision::Superseded { current: 5 });
        assert_eq!(decide(&t, "n2", fresh(Some(ShardTenure { counter: 4, held: false })), false, true), Decision::Park);
        assert_eq!(
            decide(&t, "n2", fresh(held(4)), false, false),
            Decision::Park,
            "its holder may be dead and about to be replaced"
        );
        assert!(
            matches!(decide(&t, "n2", fresh(held(4)), false, true), Decision::PerNode { .. }),
            "its tenure is current: load balanced"
        );
        assert!(
            matches!(decide(&t, "n2", fresh(held(3)), false, true), Decision::PerNode { .. }),
            "a view older than the FlowFile's lease"
        );
        assert!(
            matches!(decide(&t, "n2", fresh(None), false, true), Decision::PerNode { .. }),
            "the row no longer tracks"
        );
        assert_eq!(
            decide(&t, "n2", unknown, true, true),
            Decision::Park,
            "just started: this node's consumer has not read the table yet"
        );
        assert!(matches!(decide(&t, "n2", unknown, false, true), Decision::PerNode { .. }));
    }

    #[test]
    fn shared_channels_tell_accounts_regions_applications_and_shards_apart_and_stay_short() {
        let key = |arn: &str, app: &str| LinkKey { stream: arn.into(), application: app.into() };
        let a = shared_channel("kn", &key("arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "app"), "shardId-1");
        assert_eq!(a, "kn_123456789012_eu-west-1_orders_app_shardId-1");
        let names = [
            a.clone(),
            shared_channel("kn", &key("arn:aws:kinesis:eu-west-1:210987654321:stream/orders", "app"), "shardId-1"),
            shared_channel("kn", &key("arn:aws:kinesis:us-east-1:123456789012:stream/orders", "app"), "shardId-1"),
            shared_channel("kn", &key("arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "app2"), "shardId-1"),
            shared_channel("kn", &key("arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "app"), "shardId-2"),
        ];
        assert_eq!(names.iter().collect::<std::collections::HashSet<_>>().len(), names.len());
        let long = shared_channel(
            "kn",
            &key(&format!("arn:aws:kinesis:eu-west-1:1:stream/{}", "s".repeat(128)), &"a".repeat(128)),
            "shardId-1",
        );
        assert!(long.len() <= 255, "{}", long.len());
        let long2 = shared_channel(
            "kn",
            &key(&format!("arn:aws:kinesis:eu-west-1:1:stream/{}", "s".repeat(128)), &"a".repeat(128)),
            "shardId-2",
        );
        assert_ne!(long, long2, "cut names stay apart");
        assert_eq!(shared_channel("kn", &key("not an arn", "app"), "s"), "kn_not_an_arn_app_s");
    }
}
