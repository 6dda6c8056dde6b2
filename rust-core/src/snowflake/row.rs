//! One row as it goes to Snowflake: its JSON text and offset token. Made by `rows` (and its fast
//! path, `row_probe`), queued and sent by a channel's writer.

use super::offset::OffsetToken;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub json: Vec<u8>,
    /// For rows loaded at least once (`rows::Delivery::AtLeastOnce`) a placeholder, replaced by
    /// the channel.
    pub token: OffsetToken,
}
