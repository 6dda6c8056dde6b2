//! Commit tracking for all channels with one poller: every interval it asks Snowflake's bulk
//! channel status for the channels that wait for a commit, and hands each its status.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::warn;

use super::api::{ChannelStatus, SnowflakeApi};

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

/// A channel's end: whether it waits for a commit, and the statuses that arrive.
pub struct StatusWatch {
    awaiting: Arc<AtomicBool>,
    receiver: watch::Receiver<Option<ChannelStatus>>,
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
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).insert(channel.to_owned(), Entry { awaiting: awaiting.clone(), sender });
        StatusWatch { awaiting, receiver }
    }

    fn awaiting(&self) -> Vec<String> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.iter().filter(|(_, e)| e.awaiting.load(Ordering::Acquire)).map(|(n, _)| n.clone()).collect()
    }

    fn publish(&self, statuses: HashMap<String, ChannelStatus>) {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for (name, status) in statuses {
            if let Some(entry) = entries.get(&name) {
                entry.sender.send_replace(Some(status));
            }
        }
    }

    /// Polls until the task is aborted.
    pub async fn run(self, api: Arc<SnowflakeApi>, interval: Duration, component: u64) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let names = self.awaiting();
            for chunk in names.chunks(CHANNELS_PER_REQUEST) {
                match api.bulk_status(chunk).await {
                    Ok(statuses) => self.publish(statuses),
                    Err(e) => warn!(component, "channel status of {} channel(s) not read: {e}", chunk.len()),
                }
            }
        }
    }
}
