//! Commit tracking for all channels with one poller: every interval it asks Snowflake's bulk
//! channel status for the channels that wait for a commit, and hands each its status. A channel's
//! entry lives as long as its writer's [`StatusWatch`], so retired writers leave nothing behind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;

use super::api::{ChannelStatus, SnowflakeApi};
use crate::runtime::lock;

/// Snowflake answers at most this many channels per bulk status request.
const CHANNELS_PER_REQUEST: usize = 100;

struct Entry {
    awaiting: Arc<AtomicBool>,
    sender: watch::Sender<Option<ChannelStatus>>,
}

/// The channels the poller looks after.
#[derive(Default, Clone)]
pub struct StatusBoard {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

/// A channel's end: whether it waits for a commit, and the statuses that arrive. Dropping it
/// removes the channel from the board.
pub struct StatusWatch {
    channel: String,
    board: StatusBoard,
    awaiting: Arc<AtomicBool>,
    receiver: watch::Receiver<Option<ChannelStatus>>,
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        let mut entries = lock(&self.board.entries);
        // A newer writer of the same channel may have its own entry by now: leave that one.
        if entries.get(&self.channel).is_some_and(|e| Arc::ptr_eq(&e.awaiting, &self.awaiting)) {
            entries.remove(&self.channel);
        }
    }
}

impl StatusWatch {
    pub fn set_awaiting(&self, awaiting: bool) {
        self.awaiting.store(awaiting, Ordering::Release);
    }

    /// The next status; `None` if the poller is gone (the writer then just times out).
    pub async fn changed(&mut self) -> Option<ChannelStatus> {
        match self.receiver.changed().await {
            Ok(()) => self.receiver.borrow_and_update().clone(),
            Err(_) => std::future::pending().await,
        }
    }
}

impl StatusBoard {
    pub fn watch(&self, channel: &str) -> StatusWatch {
        let awaiting = Arc::new(AtomicBool::new(false));
        let (sender, receiver) = watch::channel(None);
        lock(&self.entries).insert(channel.to_owned(), Entry { awaiting: awaiting.clone(), sender });
        StatusWatch { channel: channel.to_owned(), board: self.clone(), awaiting, receiver }
    }

    /// Channels on the board.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn awaiting(&self) -> Vec<String> {
        let entries = lock(&self.entries);
        entries.iter().filter(|(_, e)| e.awaiting.load(Ordering::Acquire)).map(|(n, _)| n.clone()).collect()
    }

    fn publish(&self, statuses: HashMap<String, ChannelStatus>) {
        let entries = lock(&self.entries);
        for (name, status) in statuses {
            if let Some(entry) = entries.get(&name) {
                entry.sender.send_replace(Some(status));
            }
        }
    }

    /// Polls until the task is aborted.
    pub async fn run(self, api: Arc<SnowflakeApi>, interval: Duration) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let names = self.awaiting();
            for chunk in names.chunks(CHANNELS_PER_REQUEST) {
                match api.bulk_status(chunk).await {
                    Ok(statuses) => self.publish(statuses),
                    Err(e) => warn!("channel status of {} channel(s) not read: {e}", chunk.len()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_watch_leaves_the_board_but_not_a_newer_watch_of_its_channel() {
        let board = StatusBoard::default();
        let old = board.watch("a");
        let b = board.watch("b");
        assert_eq!(board.len(), 2);
        drop(b);
        assert_eq!(board.len(), 1);
        let newer = board.watch("a");
        drop(old);
        assert_eq!(board.len(), 1, "the newer watch of 'a' stays");
        newer.set_awaiting(true);
        assert_eq!(board.awaiting(), vec!["a".to_owned()]);
        drop(newer);
        assert!(board.is_empty());
    }
}
