//! One row as it goes to Snowflake: its JSON text and offset token. Made by `rows` (and its fast
//! path, `row_probe`), queued and sent by a channel's writer.
//!
//! The text is a [`Bytes`]: the fast path's rows are slices of their FlowFile's content (one buffer
//! for all of them, no copy per row), the general way's rows own what they were written out to. A
//! slice keeps its whole FlowFile's buffer alive; the rows of one FlowFile are held and dropped
//! together (`book`), and PutSnowflake counts what they hold, buffer included, against Max
//! In-Flight Size (`rows::held_bytes`).

use bytes::Bytes;

use super::offset::OffsetToken;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub json: Bytes,
    /// For rows loaded at least once (`rows::Delivery::AtLeastOnce`) a placeholder, replaced by
    /// the channel.
    pub token: OffsetToken,
}
