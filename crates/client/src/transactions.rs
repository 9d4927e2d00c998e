//! Transactions on [`Client`]: sends, publishes and acks of the session grouped into one
//! all-or-nothing unit.

use ferry_protocol::{MessageId, Request, Response};

use crate::client::{expect_reply, Client};
use crate::error::ClientError;

impl Client {
    /// Begins a transaction on this session. Until [`Client::commit`] or
    /// [`Client::rollback`], every send and publish made on this client (and its clones: the
    /// transaction belongs to the session, not to a task) is held by the broker and answered
    /// with id 0, every ack is held, and auto-ack takes are settled only at the commit. Nacks
    /// are not part of it. `TransactionState` if a transaction is already open.
    ///
    /// ```no_run
    /// # async fn demo(client: ferry_client::Client, delivery_id: u64) -> Result<(), ferry_client::ClientError> {
    /// use ferry_client::OutgoingMessage;
    ///
    /// client.begin().await?;
    /// client.ack(&[delivery_id]).await?;
    /// client.send(OutgoingMessage::new("invoices", "42")).await?;
    /// client.publish(OutgoingMessage::to_topic("orders.done", "42")).await?;
    /// let ids = client.commit().await?; // both messages and the ack, or nothing
    /// assert_eq!(ids.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self) -> Result<(), ClientError> {
        self.call_ok(Request::TxnBegin).await
    }

    /// Commits the transaction: its sends and publishes are stored and its acks settled, all
    /// at once, or (on an error) nothing is, and the transaction is over either way. Returns
    /// the ids of the stored messages in the order they were sent. `TransactionState` outside
    /// a transaction.
    ///
    /// Sends still on their way when `commit` is called are in the transaction only if they
    /// were made before it: await every send before committing.
    pub async fn commit(&self) -> Result<Vec<MessageId>, ClientError> {
        let reply = self.call(Request::TxnCommit).await?;
        expect_reply!(reply, Response::Committed { ids } => ids)
    }

    /// Rolls the transaction back: its sends and publishes are dropped, and the deliveries it
    /// acked (or took with auto ack) return to their queues, flagged redelivered.
    /// `TransactionState` outside a transaction. A session that ends inside a transaction
    /// rolls it back too.
    pub async fn rollback(&self) -> Result<(), ClientError> {
        self.call_ok(Request::TxnRollback).await
    }
}
