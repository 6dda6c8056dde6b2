//! What PutSnowflake's View State shows: each channel a writer holds open, its pipe, the last
//! offset token Snowflake reported committed and when this processor learned it. Each writer keeps
//! its own entry (removed when the writer ends, so the view is bounded by the open writers); nothing
//! reads the view back.

use crate::runtime::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq, Eq)]
struct ChannelView {
    pipe: String,
    committed: Option<String>,
    committed_at: Option<SystemTime>,
}

/// The open channels of one PutSnowflake, by channel name.
#[derive(Debug, Default)]
pub struct ChannelViews {
    channels: Mutex<BTreeMap<String, ChannelView>>,
}

impl ChannelViews {
    /// A writer's entry, removed when the returned guard drops.
    pub fn enter(self: &Arc<Self>, channel: &str) -> ViewEntry {
        ViewEntry { views: self.clone(), channel: channel.to_owned() }
    }

    /// The channel opened on `pipe`; Snowflake reported `committed` as its last committed token.
    fn opened(&self, channel: &str, pipe: &str, committed: Option<String>) {
        let mut channels = self.lock();
        let at = committed.as_ref().map(|_| SystemTime::now());
        channels.insert(channel.to_owned(), ChannelView { pipe: pipe.to_owned(), committed, committed_at: at });
    }

    /// Snowflake reported `token` committed in the channel.
    fn committed(&self, channel: &str, token: String) {
        if let Some(view) = self.lock().get_mut(channel) {
            if view.committed.as_deref() != Some(token.as_str()) {
                view.committed = Some(token);
                view.committed_at = Some(SystemTime::now());
            }
        }
    }

    fn remove(&self, channel: &str) {
        self.lock().remove(channel);
    }

    /// One line per open channel: key `channel.<name>`; when the commit was learned and the pipe
    /// first, the long offset token last (View State cuts a value at its column's width).
    pub fn lines(&self) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .map(|(name, v)| {
                let token = v.committed.as_deref().unwrap_or("none yet");
                let at = v.committed_at.map_or("-".to_owned(), |t| humantime::format_rfc3339_seconds(t).to_string());
                (format!("channel.{name}"), format!("learned {at}; pipe {}; committed offset token {token}", v.pipe))
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ChannelView>> {
        lock(&self.channels)
    }
}

/// A writer's entry in the view; dropping it (the writer retired, or its task ended) removes it.
#[derive(Debug)]
pub struct ViewEntry {
    views: Arc<ChannelViews>,
    channel: String,
}

impl ViewEntry {
    pub fn opened(&self, pipe: &str, committed: Option<String>) {
        self.views.opened(&self.channel, pipe, committed);
    }

    pub fn committed(&self, token: String) {
        self.views.committed(&self.channel, token);
    }
}

impl Drop for ViewEntry {
    fn drop(&mut self) {
        self.views.remove(&self.channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writers_channel_shows_while_it_lives_with_its_last_committed_token() {
        let views = Arc::new(ChannelViews::default());
        let entry = views.enter("kinesnow_abc_us-west-2_orders_shardId-000000000000");
        assert!(views.lines().is_empty(), "nothing before the channel opens");
        entry.opened("ORDERS-STREAMING", None);
        assert_eq!(
            views.lines(),
            vec![(
                "channel.kinesnow_abc_us-west-2_orders_shardId-000000000000".to_owned(),
                "learned -; pipe ORDERS-STREAMING; committed offset token none yet".to_owned()
            )]
        );
        entry.committed("49.0007".into());
        let (_, line) = &views.lines()[0];
        assert!(line.starts_with("learned 20"), "{line}");
        assert!(line.ends_with("; pipe ORDERS-STREAMING; committed offset token 49.0007"), "{line}");
        drop(entry);
        assert!(views.lines().is_empty(), "a retired writer's channel leaves the view");
    }
}
