//! Where a shard's reading resumes when this node takes its lease, and what this tenure starts
//! out knowing about the shard's rows in Snowflake. Pure decisions; the keeper does the I/O.
//!
//! - Failover Position `NIFI_COMMIT`: after the checkpoint (what NiFi committed), as always.
//! - `SNOWFLAKE_COMMIT`: after the lease row's `loadedSequenceNumber` when it is behind the
//!   checkpoint (records NiFi committed but Snowflake does not have yet are read again, and the
//!   shard's shared channel skips what Snowflake has by then); from TRIM_HORIZON when the row
//!   says nothing is known loaded since tracking began at the shard's start; after the
//!   checkpoint when the row has no loaded position (the tenures before did not track, so their
//!   rows went to per-node channels and are not skipped by anyone).

use crate::feedback::Loaded;
use crate::kinesis::position::Position;
use crate::lease::{Checkpoint, LoadedOnTake};

use crate::kinesis::position::is_after;

pub use crate::config::consume_kinesis::FailoverPosition;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// Resume after this position; `None` to start at `trim_horizon` or the initial position.
    pub after: Option<Position>,
    /// Start at TRIM_HORIZON whatever the Initial Stream Position.
    pub trim_horizon: bool,
    /// What this tenure knows Snowflake has (`None`: not tracked).
    pub loaded: Option<Loaded>,
}

/// `checkpoint` and `loaded` as the row was before this node took it.
pub fn resume(mode: FailoverPosition, checkpoint: &Checkpoint, loaded: Option<&Loaded>) -> Resume {
    let at = match checkpoint {
        Checkpoint::At(p) => Some(p.clone()),
        Checkpoint::None | Checkpoint::ShardEnd(_) => None,
    };
    if mode == FailoverPosition::NiFiCommit {
        return Resume { after: at, trim_horizon: false, loaded: None };
    }
    match loaded {
        Some(Loaded::Through(p)) => {
            let after = match &at {
                Some(c) if is_after(p, c) => c.clone(),
                _ => p.clone(),
            };
            Resume { after: Some(after), trim_horizon: false, loaded: Some(Loaded::Through(p.clone())) }
        }
        Some(Loaded::FromTrimHorizon) => {
            Resume { after: None, trim_horizon: true, loaded: Some(Loaded::FromTrimHorizon) }
        }
        None => {
            let loaded = at.clone().map_or(Loaded::FromTrimHorizon, Loaded::Through);
            Resume { after: at, trim_horizon: false, loaded: Some(loaded) }
        }
    }
}

/// What a take writes: with `SNOWFLAKE_COMMIT`, a row without a checkpoint is marked
/// [`Loaded::FromTrimHorizon`] in the same write (unless it has a loaded position), so that a
/// crash before the first checkpoint cannot leave a later owner starting at LATEST past records
/// that are in NiFi's queues but not in Snowflake; with `NIFI_COMMIT` the loaded position is
/// removed, so a row has one exactly while tracking tenures hold it.
pub fn on_take(mode: FailoverPosition, scanned: &Checkpoint) -> LoadedOnTake {
    match (mode, scanned) {
        (FailoverPosition::NiFiCommit, _) => LoadedOnTake::Remove,
        (FailoverPosition::SnowflakeCommit, Checkpoint::None) => LoadedOnTake::MarkStart,
        (FailoverPosition::SnowflakeCommit, _) => LoadedOnTake::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(seq: &str) -> Position {
        Position::new(seq, None)
    }

    #[test]
    fn nifi_commit_resumes_after_the_checkpoint_whatever_the_row_says() {
        let r = resume(FailoverPosition::NiFiCommit, &Checkpoint::At(p("100")), Some(&Loaded::Through(p("40"))));
        assert_eq!(r, Resume { after: Some(p("100")), trim_horizon: false, loaded: None });
    }

    #[test]
    fn snowflake_commit_resumes_after_the_lower_of_loaded_and_checkpoint() {
        let mode = FailoverPosition::SnowflakeCommit;
        let behind = resume(mode, &Checkpoint::At(p("100")), Some(&Loaded::Through(p("40"))));
        assert_eq!(behind.after, Some(p("40")), "records NiFi committed but Snowflake lacks are read again");
        assert_eq!(behind.loaded, Some(Loaded::Through(p("40"))));
        let ahead = resume(mode, &Checkpoint::At(p("100")), Some(&Loaded::Through(p("150"))));
        assert_eq!(
            ahead.after,
            Some(p("100")),
            "never past what NiFi committed: other branches of the flow need those records"
        );
        assert_eq!(ahead.loaded, Some(Loaded::Through(p("150"))), "the fact is kept");
        let sub = resume(
            mode,
            &Checkpoint::At(Position::new("100", Some(3))),
            Some(&Loaded::Through(Position::new("100", Some(1)))),
        );
        assert_eq!(sub.after, Some(Position::new("100", Some(1))), "exact to the KPL sub-record");
    }

    #[test]
    fn snowflake_commit_without_a_loaded_position_starts_where_the_untracked_tenure_left() {
        let mode = FailoverPosition::SnowflakeCommit;
        let r = resume(mode, &Checkpoint::At(p("100")), None);
        assert_eq!(r, Resume { after: Some(p("100")), trim_horizon: false, loaded: Some(Loaded::Through(p("100"))) });
        let fresh = resume(mode, &Checkpoint::None, None);
        assert_eq!(fresh, Resume { after: None, trim_horizon: false, loaded: Some(Loaded::FromTrimHorizon) });
        let marked = resume(mode, &Checkpoint::At(p("100")), Some(&Loaded::FromTrimHorizon));
        assert_eq!(marked, Resume { after: None, trim_horizon: true, loaded: Some(Loaded::FromTrimHorizon) });
        assert_eq!(on_take(mode, &Checkpoint::None), LoadedOnTake::MarkStart);
        assert_eq!(on_take(mode, &Checkpoint::At(p("1"))), LoadedOnTake::Keep);
        assert_eq!(on_take(FailoverPosition::NiFiCommit, &Checkpoint::None), LoadedOnTake::Remove);
    }
}
