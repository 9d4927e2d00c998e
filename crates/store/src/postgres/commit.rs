//! Transactions: a session's sends, publishes and acks in one database transaction, all or
//! nothing.
//!
//! The acks go first (the cheapest way to fail: a delivery the session does not hold), then the
//! messages, each checked as a batch checks it; any failure drops the transaction, so nothing
//! of it is seen, not even its change notices. The senders are registered beforehand in
//! transactions of their own: registering a client is idempotent and harmless, and a client id
//! cached in the process must never come from a transaction that was rolled back.

use async_trait::async_trait;
use ferry_protocol::{DeliveryId, MessageId};

use super::batch::{all_transient, Stored};
use super::inner::Inner;
use super::receive::as_i64;
use super::settle::unknown_ids;
use super::tally::Tally;
use super::tx::{retrying, TxResult};
use crate::api::{NewMessage, SessionId, Sessions, Transactions};
use crate::error::StoreError;

#[async_trait]
impl Transactions for Inner {
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        if msgs.is_empty() && acks.is_empty() {
            return Ok(Vec::new());
        }
        let mut senders: Vec<&str> = msgs.iter().map(|m| &*m.sender).collect();
        senders.sort_unstable();
        senders.dedup();
        for s in senders {
            self.register_client(s).await?;
        }
        retrying(|| self.try_commit(session, &msgs, acks)).await
    }
}

impl Inner {
    async fn try_commit(
        &self,
        session: SessionId,
        msgs: &[NewMessage],
        acks: &[DeliveryId],
    ) -> TxResult<Vec<MessageId>> {
        let refs: Vec<&NewMessage> = msgs.iter().collect();
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let mut tally = Tally::default();
        if !acks.is_empty() {
            let ids: Vec<i64> = acks.iter().map(|i| as_i64(*i)).collect();
            let sessions = vec![as_i64(session); ids.len()];
            let mut acked = self.remove_leased(&tx, &sessions, &ids, &mut tally).await?;
            let settled = acked.remove(&as_i64(session)).unwrap_or_default();
            let unknown = unknown_ids(acks, &settled);
            if !unknown.is_empty() {
                // Dropping `tx` rolls back the acks made so far.
                return Err(StoreError::DeliveriesNotFound(unknown).into());
            }
        }
        let relax = acks.is_empty() && all_transient(&refs);
        let Stored { verdicts, ids } = self.store_relaxed(&tx, &refs, relax, &mut tally).await?;
        if let Some(e) = verdicts.into_iter().find_map(Result::err) {
            return Err(e.into());
        }
        tx.commit().await?;
        self.count(tally);
        Ok(ids)
    }
}
