//! A batch taken from the consumer engine on its way to NiFi. It owns the batch until it is
//! handed over: one dropped before that (it could not be encoded, Java could not allocate its
//! array, the call failed half way) is nacked, so its shards are read again from their checkpoint
//! instead of holding their budget in flight for ever. Its bytes are `ffi::batch`'s business.

use crate::consumer::output::ShardFlowFiles;
use crate::consumer::ConsumerError;

type Nack = Box<dyn FnOnce(i64) -> Result<(), ConsumerError> + Send>;

pub struct OutgoingBatch {
    id: i64,
    link: String,
    shards: Vec<ShardFlowFiles>,
    nack: Option<Nack>,
}

impl OutgoingBatch {
    /// `nack` settles the batch if it is dropped before [`OutgoingBatch::handed_over`].
    pub fn new(
        id: i64,
        link: String,
        shards: Vec<ShardFlowFiles>,
        nack: impl FnOnce(i64) -> Result<(), ConsumerError> + Send + 'static,
    ) -> Self {
        Self { id, link, shards, nack: Some(Box::new(nack)) }
    }

    pub fn id(&self) -> i64 {
        self.id
    }

    /// The stream's ARN the batch's FlowFiles name (empty without Failover Position
    /// `SNOWFLAKE_COMMIT`).
    pub fn link(&self) -> &str {
        &self.link
    }

    pub fn shards(&self) -> &[ShardFlowFiles] {
        &self.shards
    }

    /// NiFi has the batch: from now on it is settled by NiFi's ack or nack.
    pub fn handed_over(mut self) {
        self.nack = None;
    }
}

impl Drop for OutgoingBatch {
    fn drop(&mut self) {
        if let Some(nack) = self.nack.take() {
            tracing::warn!("batch {} did not reach NiFi; its shards are read again from their checkpoint", self.id);
            if let Err(e) = nack(self.id) {
                tracing::warn!("batch {} could not be nacked after it did not reach NiFi: {e}", self.id);
            }
        }
    }
}
