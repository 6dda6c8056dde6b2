//! The second signal of a shard's end with Enhanced Fan-Out, as pure decisions (the I/O is in
//! `subscriber.rs`). Kinesis ends a subscription at a shard's end with an event naming the
//! children; kinesis-local never does, and a subscription can also fail to. So when the stream's
//! listing shows the shard closed (an EndingSequenceNumber) and its subscription has brought no
//! records for [`QUIET`], the reader confirms the end itself: the subscription is dropped, then one
//! GetShardIterator (from the last record the subscription delivered) and GetRecords. No records and
//! no next iterator: the shard is finished. Records: the subscription lagged; the probe's reader
//! delivers them and reads on with GetRecords to the end of the closed shard (its records are
//! finite), so one reader alone delivers at any time, in order, and its position rules out repeats.
//! A quiet shard the listing does not show closed asks for a new listing, at most every
//! [`LIST_AT_MOST_EVERY`], since the last one may be older than the shard's end.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::config::consume_kinesis::InitialPosition;
use crate::kinesis::position::Position;
use crate::kinesis::shards::ShardInfo;

/// A subscription that brought no records for this long, on a shard the listing shows closed,
/// is confirmed ended by polling.
pub const QUIET: Duration = Duration::from_secs(5);
/// How often a reader looks at its quiet time and the listing.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);
/// A quiet shard asks for a new listing only when the last one is at least this old.
pub const LIST_AT_MOST_EVERY: Duration = Duration::from_secs(5);

/// What a fan-out reader should do about a possible shard end now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndCheck {
    /// Records came recently, or the listing is recent and shows the shard open.
    Wait,
    /// Quiet, and the listing predates the quiet time: list the stream again.
    List,
    /// Quiet, and the listing shows the shard closed: confirm the end with GetRecords.
    Probe,
}

/// What the latest listing of the stream says about one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed {
    /// The shard has an EndingSequenceNumber.
    pub closed: bool,
    /// When that listing was started.
    pub at: Instant,
}

/// The closed shards of the lease keeper's latest listing, shared with the readers.
#[derive(Debug)]
pub struct ListingView {
    closed: HashSet<String>,
    started: Instant,
}

impl ListingView {
    pub fn of(shards: &[ShardInfo], started: Instant) -> Self {
        Self { closed: shards.iter().filter(|s| s.closed).map(|s| s.shard_id.clone()).collect(), started }
    }

    pub fn listed(&self, shard_id: &str) -> Listed {
        Listed { closed: self.closed.contains(shard_id), at: self.started }
    }
}

/// Decides from the listing, the time records last came (or the reader started) and now.
pub fn end_check(listed: Listed, last_records: Instant, now: Instant) -> EndCheck {
    let quiet_since = last_records + QUIET;
    if now < quiet_since {
        EndCheck::Wait
    } else if listed.closed {
        EndCheck::Probe
    } else if listed.at < quiet_since && now.saturating_duration_since(listed.at) >= LIST_AT_MOST_EVERY {
        EndCheck::List
    } else {
        EndCheck::Wait
    }
}

/// Where the probe's GetShardIterator starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeStart {
    /// AFTER_SEQUENCE_NUMBER of the last record the subscription delivered.
    AfterRecord(String),
    /// AT_SEQUENCE_NUMBER of the checkpoint (what it covers is dropped), when nothing came since.
    AtCheckpoint(Position),
    /// Neither, from LATEST: AFTER_SEQUENCE_NUMBER of the subscription's continuation (where a
    /// renewed subscription would start), TRIM_HORIZON if Kinesis refuses it.
    AfterContinuation(String),
    TrimHorizon,
    AtTimestamp(SystemTime),
}

/// The probe starts where the subscription would go on, never later: nothing it missed is skipped.
/// `last_record` is the last record of the current generation's events (delivered or covered by
/// the checkpoint); `continuation` the last event's continuation sequence number.
pub fn probe_start(
    last_record: Option<&str>,
    committed: Option<&Position>,
    initial: InitialPosition,
    continuation: Option<&str>,
) -> ProbeStart {
    match (last_record, committed, initial, continuation) {
        (Some(seq), _, _, _) => ProbeStart::AfterRecord(seq.to_owned()),
        (None, Some(p), _, _) => ProbeStart::AtCheckpoint(p.clone()),
        (None, None, InitialPosition::TrimHorizon, _) => ProbeStart::TrimHorizon,
        (None, None, InitialPosition::AtTimestamp(t), _) => ProbeStart::AtTimestamp(t),
        (None, None, InitialPosition::Latest, Some(c)) => ProbeStart::AfterContinuation(c.to_owned()),
        // No event yet: where LATEST began is unknown; at least once rather than lose any.
        (None, None, InitialPosition::Latest, None) => ProbeStart::TrimHorizon,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(closed: bool, at: Instant) -> Listed {
        Listed { closed, at }
    }

    #[test]
    fn a_closed_shard_is_probed_only_once_its_subscription_is_quiet() {
        let t0 = Instant::now();
        let closed = listed(true, t0);
        assert_eq!(end_check(closed, t0, t0), EndCheck::Wait, "records just came");
        assert_eq!(end_check(closed, t0, t0 + QUIET - Duration::from_millis(1)), EndCheck::Wait);
        assert_eq!(end_check(closed, t0, t0 + QUIET), EndCheck::Probe);
        // Records came later than the listing: the quiet time counts from them.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(end_check(closed, later, later + Duration::from_secs(1)), EndCheck::Wait);
        assert_eq!(end_check(closed, later, later + QUIET), EndCheck::Probe);
    }

    #[test]
    fn a_quiet_shard_listed_open_asks_once_for_a_listing_newer_than_its_quiet_time() {
        let t0 = Instant::now();
        let old = listed(false, t0);
        let quiet = t0 + Duration::from_secs(20);
        assert_eq!(end_check(old, quiet - QUIET, quiet), EndCheck::List, "the listing predates the quiet time");
        // A listing started after the quiet time began shows the shard open: nothing more to do
        // until records come again, however long the shard stays quiet.
        let fresh = listed(false, quiet + Duration::from_millis(500));
        for later in [1, 10, 3600] {
            assert_eq!(end_check(fresh, quiet - QUIET, quiet + Duration::from_secs(later)), EndCheck::Wait);
        }
        // A listing started just before the quiet time is not asked for again at once.
        let recent = listed(false, quiet - Duration::from_secs(1));
        assert_eq!(end_check(recent, quiet - QUIET, quiet), EndCheck::Wait);
        assert_eq!(
            end_check(recent, quiet - QUIET, quiet - Duration::from_secs(1) + LIST_AT_MOST_EVERY),
            EndCheck::List
        );
        // Not quiet: no listing, whatever its age.
        assert_eq!(end_check(old, quiet, quiet + Duration::from_secs(1)), EndCheck::Wait);
    }

    #[test]
    fn an_open_shard_is_never_probed() {
        let t0 = Instant::now();
        for (records, now) in [(t0, t0), (t0, t0 + QUIET), (t0, t0 + Duration::from_secs(3600))] {
            assert_ne!(end_check(listed(false, now), records, now), EndCheck::Probe);
            assert_ne!(end_check(listed(false, t0), records, now), EndCheck::Probe);
        }
    }

    #[test]
    fn the_listing_view_knows_closed_shards() {
        let t0 = Instant::now();
        let info = |id: &str, closed| ShardInfo { shard_id: id.into(), parent_shard_ids: vec![], closed };
        let view = ListingView::of(&[info("a", true), info("b", false)], t0);
        assert_eq!(view.listed("a"), listed(true, t0));
        assert_eq!(view.listed("b"), listed(false, t0));
        assert_eq!(view.listed("unlisted"), listed(false, t0), "a child known only from ChildShards is open");
    }

    #[test]
    fn the_probe_starts_where_the_subscription_would_go_on() {
        let cp = Position::new("100", Some(3));
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let all = [InitialPosition::TrimHorizon, InitialPosition::Latest, InitialPosition::AtTimestamp(at)];
        for initial in all {
            assert_eq!(
                probe_start(Some("205"), Some(&cp), initial, Some("210")),
                ProbeStart::AfterRecord("205".into())
            );
            assert_eq!(probe_start(None, Some(&cp), initial, Some("210")), ProbeStart::AtCheckpoint(cp.clone()));
        }
        assert_eq!(probe_start(None, None, InitialPosition::TrimHorizon, Some("7")), ProbeStart::TrimHorizon);
        assert_eq!(probe_start(None, None, InitialPosition::AtTimestamp(at), Some("7")), ProbeStart::AtTimestamp(at));
        assert_eq!(
            probe_start(None, None, InitialPosition::Latest, Some("7")),
            ProbeStart::AfterContinuation("7".into())
        );
        assert_eq!(probe_start(None, None, InitialPosition::Latest, None), ProbeStart::TrimHorizon);
    }
}
