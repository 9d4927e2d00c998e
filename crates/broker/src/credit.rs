//! A push subscription's credit (its prefetch window), shared by its push task, its session
//! (which grants more) and, for direct delivery, the publishers that hand it messages.
//!
//! One atomic word holds the credit (low 32 bits) and a *taking* flag. The push task sets the
//! flag while it takes a batch from the store and clears it once the batch is on its way to
//! the client; meanwhile direct deliveries are refused (see [`ferry_store::direct`]). That keeps
//! a direct delivery from overtaking a batch taken from the queue before it, and from spending
//! credit the batch was sized by.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// The taking flag.
const TAKING: u64 = 1 << 32;
/// The bits of the credit itself.
const AMOUNT: u64 = u32::MAX as u64;

/// Credit of one subscription.
#[derive(Default)]
pub struct Credit {
    word: AtomicU64,
    /// Notified when credit is granted.
    pub changed: Notify,
}

impl Credit {
    /// Credit that starts at `n`.
    pub fn new(n: u32) -> Credit {
        Credit {
            word: AtomicU64::new(u64::from(n)),
            changed: Notify::new(),
        }
    }

    /// The credit left.
    pub fn available(&self) -> u32 {
        (self.word.load(Ordering::Acquire) & AMOUNT) as u32
    }

    /// Grants `n` more, saturating, and wakes the push task.
    pub fn grant(&self, n: u32) {
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some((w & TAKING) | (w & AMOUNT).saturating_add(u64::from(n)).min(AMOUNT))
            });
        self.changed.notify_one();
    }

    /// Starts taking a batch from the store; returns the credit the batch may use. Nobody else
    /// spends credit until [`Credit::end_take`].
    pub fn begin_take(&self) -> u32 {
        (self.word.fetch_or(TAKING, Ordering::AcqRel) & AMOUNT) as u32
    }

    /// Ends taking: spends `n` (at most what [`Credit::begin_take`] returned) and lets direct
    /// deliveries in again. Call it only once the batch is on its way to the client.
    pub fn end_take(&self, n: u32) {
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some((w & AMOUNT).saturating_sub(u64::from(n)))
            });
    }

    /// Spends `n` units for direct deliveries (all or none), unless there are fewer or a
    /// batch is being taken.
    pub fn try_spend(&self, n: u32) -> bool {
        let n = u64::from(n);
        self.word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w & TAKING == 0 && w & AMOUNT >= n).then(|| w - n)
            })
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_deliveries_spend_credit_until_none_is_left() {
        let c = Credit::new(2);
        assert!(c.try_spend(1));
        assert!(c.try_spend(1));
        assert!(!c.try_spend(1));
        assert_eq!(c.available(), 0);
        c.grant(1);
        assert!(c.try_spend(1));
    }

    #[test]
    fn a_reservation_of_several_takes_all_of_them_or_none() {
        let c = Credit::new(5);
        assert!(!c.try_spend(6));
        assert_eq!(c.available(), 5);
        assert!(c.try_spend(5));
        assert_eq!(c.available(), 0);
    }

    #[test]
    fn direct_deliveries_are_refused_while_a_batch_is_taken() {
        let c = Credit::new(5);
        assert_eq!(c.begin_take(), 5);
        assert!(!c.try_spend(1));
        // Credit granted meanwhile counts; the batch spends what it took.
        c.grant(3);
        c.end_take(4);
        assert_eq!(c.available(), 4);
        assert!(c.try_spend(1));
        assert_eq!(c.available(), 3);
    }

    #[test]
    fn granting_saturates_without_touching_the_taking_flag() {
        let c = Credit::new(u32::MAX - 1);
        c.begin_take();
        c.grant(10);
        assert_eq!(c.available(), u32::MAX);
        assert!(!c.try_spend(1));
        c.end_take(0);
        assert!(c.try_spend(1));
    }
}
