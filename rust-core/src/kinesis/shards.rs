//! Shard discovery: every shard of the stream (paginated ListShards), with its parents and
//! whether it is closed.

use aws_sdk_kinesis::Client;

use super::address::{ForStream, StreamRef};
use super::KinesisError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    pub shard_id: String,
    pub parent_shard_ids: Vec<String>,
    /// A closed shard (after a split or merge) has an ending sequence number.
    pub closed: bool,
}

pub async fn list_shards(client: &Client, stream: StreamRef<'_>) -> Result<Vec<ShardInfo>, KinesisError> {
    let mut shards = Vec::new();
    let mut next_token: Option<String> = None;
    loop {
        let request = match &next_token {
            // With a token, the stream's name or ARN must not be sent again.
            Some(token) => client.list_shards().next_token(token),
            None => client.list_shards().for_stream(stream),
        };
        let out = request.send().await.map_err(|e| {
            KinesisError::from_sdk(
                stream.as_str(),
                None,
                crate::kinesis::sdk_error_text(&e),
                e.as_service_error().map(|s| s.meta().code().unwrap_or_default().to_owned()),
            )
        })?;
        for shard in out.shards() {
            let mut parents = Vec::new();
            if let Some(p) = shard.parent_shard_id() {
                parents.push(p.to_owned());
            }
            if let Some(p) = shard.adjacent_parent_shard_id() {
                parents.push(p.to_owned());
            }
            let closed = shard.sequence_number_range().and_then(|r| r.ending_sequence_number()).is_some();
            shards.push(ShardInfo { shard_id: shard.shard_id().to_owned(), parent_shard_ids: parents, closed });
        }
        match out.next_token() {
            Some(t) if !t.is_empty() => next_token = Some(t.to_owned()),
            _ => return Ok(shards),
        }
    }
}
