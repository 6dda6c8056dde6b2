//! A batch taken from the consumer engine on its way to NiFi. It owns the batch until it is
//! handed over: one dropped before that (it could not be encoded, Java could not allocate its
//! array, the call failed half way) is nacked, so its shards are read again from their checkpoint
//! instead of holding their budget in flight for ever.

use crate::consumer::output::ShardFlowFiles;
use crate::consumer::ConsumerError;
use crate::ffi::batch::{self, BatchError};

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

    /// Bytes of the batch in the JNI layout (`ffi::batch`).
    pub fn encoded_len(&self) -> usize {
        batch::encoded_len_linked(&self.link, &self.shards)
    }

    /// Writes the batch at the start of `out`; the length written.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, BatchError> {
        batch::encode_linked_into(self.id, &self.link, &self.shards, out)
    }

    /// The batch in the JNI layout, handed over; nacked if it cannot be encoded.
    pub fn into_bytes(self) -> Result<Vec<u8>, BatchError> {
        let bytes = batch::encode_linked(self.id, &self.link, &self.shards)?;
        self.handed_over();
        Ok(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn outgoing(id: i64, shards: Vec<ShardFlowFiles>) -> (OutgoingBatch, Arc<Mutex<Vec<i64>>>) {
        let nacked = Arc::new(Mutex::new(vec![]));
        let seen = nacked.clone();
        let batch = OutgoingBatch::new(id, String::new(), shards, move |id| {
            seen.lock().unwrap().push(id);
            Ok(())
        });
        (batch, nacked)
    }

    #[test]
    fn a_batch_that_cannot_be_encoded_is_nacked() {
        let mut shards = batch::synthetic(2, 3, 10);
        shards[1].shard_id = "s".repeat(70_000);
        let (batch, nacked) = outgoing(42, shards);
        let err = batch.into_bytes().unwrap_err();
        assert!(matches!(err, BatchError::TooLong { what: "shard id", .. }), "{err}");
        assert_eq!(*nacked.lock().unwrap(), vec![42]);
    }

    #[test]
    fn an_encoded_batch_stays_in_flight_until_nifi_settles_it() {
        let (batch, nacked) = outgoing(43, batch::synthetic(1, 1, 1));
        let bytes = batch.into_bytes().unwrap();
        assert_eq!(bytes, batch::encode(43, &batch::synthetic(1, 1, 1)).unwrap());
        assert!(nacked.lock().unwrap().is_empty());
    }

    #[test]
    fn a_batch_dropped_before_it_is_handed_over_is_nacked_once() {
        let (batch, nacked) = outgoing(44, batch::synthetic(2, 2, 4));
        let mut small = vec![0u8; batch.encoded_len() - 1];
        assert!(matches!(batch.encode_into(&mut small), Err(BatchError::BufferTooSmall { .. })));
        drop(batch);
        assert_eq!(*nacked.lock().unwrap(), vec![44]);
        let (batch, nacked) = outgoing(45, batch::synthetic(2, 2, 4));
        let mut room = vec![0u8; batch.encoded_len()];
        assert_eq!(batch.encode_into(&mut room).unwrap(), room.len());
        batch.handed_over();
        assert!(nacked.lock().unwrap().is_empty());
    }
}
