//! The memory budget of one consumer: every record held by the engine (fetched, buffered, or
//! handed to NiFi but not yet committed) holds bytes of it. When it is empty, fetching waits, so
//! memory is bounded by Max Buffer Size whatever the number of shards or NiFi's back-pressure.
//!
//! A single record (or KPL expansion) may cost more than the whole budget: Kinesis records reach
//! 10 MiB when a stream's `MaxRecordSizeInKiB` is raised, and Max Buffer Size may be 1 MiB. Its
//! reservation is clamped to the whole budget, so it waits until every byte is free (the semaphore
//! is fair: smaller reservations queued after it wait too) and then holds all of them: it is
//! admitted alone, nothing else is admitted until it is given back, and the consumer always makes
//! progress. Records held then total the larger of the budget and that one record's cost. Its bytes
//! are shared among the records of the expansion in proportion to their costs
//! ([`Reservation::split_share`]), so they come back as those records are committed and the whole
//! budget is free again only once the last of them is: giving the clamped bytes to the first
//! records alone freed the budget while most of the expansion was still held, and a second one
//! was admitted beside it (issue 50).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest GetRecords response Kinesis sends; reserved before each call.
pub const MAX_RESPONSE_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Clone)]
pub struct MemoryBudget {
    semaphore: Arc<Semaphore>,
    total: u64,
}

/// Bytes held; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
}

impl MemoryBudget {
    pub fn new(total: u64) -> Self {
        let total = total.clamp(1, u32::MAX as u64);
        Self { semaphore: Arc::new(Semaphore::new(total as usize)), total }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn available(&self) -> u64 {
        self.semaphore.available_permits() as u64
    }

    /// Waits for `bytes`, clamped to the whole budget, so a single record larger than the budget is
    /// admitted alone once the whole budget is free (see the module doc).
    pub async fn reserve(&self, bytes: u64) -> Reservation {
        let permit = self
            .semaphore
            .clone()
            .acquire_many_owned(self.clamp(bytes))
            .await
            .expect("the budget semaphore is never closed");
        Reservation { permit: Some(permit) }
    }

    /// `bytes` (clamped as by [`MemoryBudget::reserve`]) if they are free now, without waiting.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let permit = self.semaphore.clone().try_acquire_many_owned(self.clamp(bytes)).ok()?;
        Some(Reservation { permit: Some(permit) })
    }

    fn clamp(&self, bytes: u64) -> u32 {
        bytes.min(self.total) as u32
    }
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64)
    }

    /// Splits off `bytes` (at most what is held) into a new reservation.
    pub fn split(&mut self, bytes: u64) -> Reservation {
        let held = self.bytes();
        let n = bytes.min(held) as usize;
        if n == 0 {
            return Reservation { permit: None };
        }
        if n as u64 == held {
            return Reservation { permit: self.permit.take() };
        }
        let part = self.permit.as_mut().and_then(|p| p.split(n));
        Reservation { permit: part }
    }

    /// Splits off the part of a record costing `cost` bytes, when `remaining` bytes of records (this
    /// one included) are still to get their parts of this reservation. If it holds all they cost,
    /// that is the record's cost. If it holds less (an admission clamped to the whole budget: one
    /// record or KPL expansion larger than the budget), each record gets its cost's share of what is
    /// left, and the last record all that remains: the budget's bytes come back as the records are
    /// committed, all of them only with the last, so nothing larger than what is already given back
    /// is admitted while any of them is held (see the module doc).
    pub fn split_share(&mut self, cost: u64, remaining: u64) -> Reservation {
        let held = self.bytes();
        if held >= remaining {
            return self.split(cost);
        }
        let share = (cost as u128 * held as u128 / remaining.max(1) as u128) as u64;
        self.split(if cost >= remaining { held } else { share })
    }

    pub fn empty() -> Reservation {
        Reservation { permit: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_give_bytes_back_when_dropped() {
        let budget = MemoryBudget::new(1000);
        let a = budget.reserve(600).await;
        assert_eq!(budget.available(), 400);
        drop(a);
        assert_eq!(budget.available(), 1000);
    }

    #[tokio::test]
    async fn reserving_waits_while_the_budget_is_spent() {
        let budget = MemoryBudget::new(1000);
        let held = budget.reserve(900).await;
        let waiting = tokio::time::timeout(Duration::from_millis(50), budget.reserve(200)).await;
        assert!(waiting.is_err(), "must wait while only 100 bytes are free");
        drop(held);
        let got = tokio::time::timeout(Duration::from_millis(50), budget.reserve(200)).await;
        assert!(got.is_ok());
    }

    #[tokio::test]
    async fn try_reserve_takes_only_what_is_free() {
        let budget = MemoryBudget::new(1000);
        let held = budget.try_reserve(700).expect("free");
        assert!(budget.try_reserve(400).is_none(), "only 300 bytes are free");
        assert_eq!(budget.available(), 300, "a failed try takes nothing");
        drop(held);
        assert_eq!(budget.try_reserve(5000).map(|r| r.bytes()), Some(1000), "clamped to the whole budget");
    }

    /// The rule for a record larger than the budget (a 10 MiB Kinesis record, a 1 MiB budget): it
    /// waits until the whole budget is free, nothing smaller overtakes it meanwhile, and it is then
    /// admitted alone.
    #[tokio::test]
    async fn a_record_larger_than_the_budget_is_admitted_alone_once_the_budget_is_free() {
        let budget = MemoryBudget::new(1000);
        let held = budget.reserve(600).await;
        let big = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.reserve(10_000).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!big.is_finished(), "it waits while 600 bytes are held");
        assert!(budget.try_reserve(100).is_none(), "nothing smaller overtakes it");
        drop(held);
        let big = tokio::time::timeout(Duration::from_secs(5), big).await.expect("admitted once all is free").unwrap();
        assert_eq!((big.bytes(), budget.available()), (1000, 0), "alone, with the whole budget");
        drop(big);
        assert_eq!(budget.available(), 1000);
    }

    /// An admission clamped to the budget gives its bytes back in proportion as its records go, and
    /// the last of them gives back all that remains; an admission that holds all its records cost
    /// gives each its cost, and what is left over stays with it.
    #[tokio::test]
    async fn shares_of_a_clamped_admission_come_back_only_with_its_last_record() {
        let budget = MemoryBudget::new(1000);
        let mut all = budget.reserve(4000).await; // ten records of 400 bytes
        let mut remaining = 4000;
        let mut parts = Vec::new();
        for _ in 0..10 {
            parts.push(all.split_share(400, remaining));
            remaining -= 400;
        }
        assert_eq!(all.bytes(), 0);
        assert_eq!(parts.iter().map(Reservation::bytes).collect::<Vec<_>>(), vec![100; 10]);
        let last = parts.pop().unwrap();
        drop(parts);
        assert_eq!(budget.available(), 900, "while one record is held, the whole budget is not free");
        drop(last);
        assert_eq!(budget.available(), 1000);

        let mut uneven = budget.reserve(3 * 700).await; // 700, 700, 700: clamped to 1000
        let a = uneven.split_share(700, 2100);
        let b = uneven.split_share(700, 1400);
        let c = uneven.split_share(700, 700);
        assert_eq!((a.bytes(), b.bytes(), c.bytes(), uneven.bytes()), (333, 333, 334, 0), "they add up to 1000");
        drop((a, b, c));

        let mut roomy = budget.reserve(900).await; // 600 bytes of records and 300 of an index
        let a = roomy.split_share(200, 600);
        let b = roomy.split_share(400, 400);
        assert_eq!((a.bytes(), b.bytes(), roomy.bytes()), (200, 400, 300), "exact costs; the rest stays");
        drop(roomy);
        assert_eq!(budget.available(), 400);
    }

    #[tokio::test]
    async fn oversize_requests_are_clamped_and_splits_add_up() {
        let budget = MemoryBudget::new(1000);
        let mut all = budget.reserve(5000).await;
        assert_eq!(all.bytes(), 1000);
        let part = all.split(300);
        assert_eq!((part.bytes(), all.bytes()), (300, 700));
        drop(all);
        assert_eq!(budget.available(), 700);
        drop(part);
        assert_eq!(budget.available(), 1000);
    }
}
