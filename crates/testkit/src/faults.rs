//! A store wrapper that fails chosen operations on demand: the test seam for broker-level error
//! paths (`StoreUnavailable`, `Internal`) without touching the engine. Disk-level faults (failed
//! fsync, disk full) are injected below the engine with the store crate's faulty backend.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferry_protocol::{Delivery, DeliveryId, MessageId, QueueInfo};
use ferry_store::{Heartbeat, NewMessage, ReceiveSpec, Registration, SessionId, Store, StoreError};

/// Delegates to an inner store, except that while a fault is set every data operation (send,
/// receive, ack, nack, queue changes) fails with it.
pub struct FaultInjectingStore {
    inner: Arc<dyn Store>,
    fault: Mutex<Option<StoreError>>,
}

impl FaultInjectingStore {
    /// Wraps `inner` with no fault set.
    pub fn new(inner: Arc<dyn Store>) -> Arc<FaultInjectingStore> {
        Arc::new(FaultInjectingStore {
            inner,
            fault: Mutex::new(None),
        })
    }

    /// Makes every data operation fail with `fault` (or succeed again with `None`).
    pub fn set_fault(&self, fault: Option<StoreError>) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    fn check(&self) -> Result<(), StoreError> {
        match &*self.fault.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Store for FaultInjectingStore {
    async fn register_client(&self, name: &str) -> Result<(), StoreError> {
        self.inner.register_client(name).await
    }
    fn memory_bytes(&self) -> u64 {
        self.inner.memory_bytes()
    }

    async fn client_exists(&self, name: &str) -> Result<bool, StoreError> {
        self.inner.client_exists(name).await
    }
    async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError> {
        self.inner.expire_clients(now_ms, idle_ms).await
    }
    async fn create_queue_with(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.create_queue_with(name, options).await
    }
    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.check()?;
        self.inner.delete_queue(name, force).await
    }
    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError> {
        self.inner.list_queues().await
    }
    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError> {
        self.check()?;
        self.inner.send(msg).await
    }
    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>> {
        if let Err(e) = self.check() {
            return msgs.iter().map(|_| Err(e.clone())).collect();
        }
        self.inner.send_batch(msgs).await
    }
    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError> {
        self.check()?;
        self.inner.receive(spec, max).await
    }
    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError> {
        self.check()?;
        self.inner.ack(session, ids).await
    }
    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError> {
        self.check()?;
        self.inner.nack(session, ids, requeue).await
    }
    async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError> {
        self.inner.release_session(session).await
    }
    async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.expire_leases(now_ms).await
    }
    async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError> {
        self.inner.next_lease_deadline().await
    }
    async fn delayed_due(
        &self,
        after_ms: u64,
        until_ms: u64,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        self.inner.delayed_due(after_ms, until_ms).await
    }
    async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.inner.purge_expired(now_ms).await
    }
    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.waiting_queues(client, now_ms).await
    }
    async fn maintain(&self) -> Result<(), StoreError> {
        self.inner.maintain().await
    }
    async fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush().await
    }
    async fn claim_session(
        &self,
        client: &str,
        session: SessionId,
        registration: Registration,
    ) -> Result<(), StoreError> {
        self.inner
            .claim_session(client, session, registration)
            .await
    }
    async fn end_session(&self, client: &str, session: SessionId) -> Result<(), StoreError> {
        self.inner.end_session(client, session).await
    }
    async fn create_topic(&self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.create_topic(name).await
    }
    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.check()?;
        self.inner.delete_topic(name, force).await
    }
    async fn list_topics(&self) -> Result<Vec<ferry_protocol::TopicInfo>, StoreError> {
        self.inner.list_topics().await
    }
    async fn subscribe_topic(
        &self,
        topic: &str,
        name: &str,
        options: &ferry_protocol::SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError> {
        self.check()?;
        self.inner
            .subscribe_topic(topic, name, options, owner)
            .await
    }
    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.unsubscribe(topic, name).await
    }
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        self.check()?;
        self.inner.commit(session, msgs, acks).await
    }
    async fn attach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
        shared: bool,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner
            .attach_consumer(topic, name, session, shared)
            .await
    }
    async fn detach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.detach_consumer(topic, name, session).await
    }
    async fn heartbeat(&self, node_timeout_ms: u64) -> Result<Heartbeat, StoreError> {
        self.inner.heartbeat(node_timeout_ms).await
    }
    async fn leave(&self) -> Result<(), StoreError> {
        self.inner.leave().await
    }
    fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<Vec<String>>> {
        self.inner.subscribe_changes()
    }
}

/// The operator's role goes to the inner store; the fault applies to what writes.
#[async_trait]
impl ferry_store::Admin for FaultInjectingStore {
    async fn queue_details(&self) -> Result<Vec<ferry_store::QueueDetails>, StoreError> {
        self.inner.queue_details().await
    }
    async fn set_queue_options(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.set_queue_options(name, options).await
    }
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.purge_queue(name).await
    }
    async fn browse(
        &self,
        spec: &ferry_store::BrowseSpec,
    ) -> Result<ferry_store::BrowsePage, StoreError> {
        self.check()?;
        self.inner.browse(spec).await
    }
    async fn delete_message(&self, queue: &str, id: MessageId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.delete_message(queue, id).await
    }
    async fn move_messages(
        &self,
        from: &str,
        target: &ferry_store::MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<ferry_store::MoveReport, StoreError> {
        self.check()?;
        self.inner.move_messages(from, target, ids, limit).await
    }
    async fn list_clients(&self) -> Result<Vec<ferry_store::ClientRecord>, StoreError> {
        self.inner.list_clients().await
    }
    async fn forget_client(&self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.forget_client(name).await
    }
    fn engine_stats(&self) -> ferry_store::EngineStats {
        self.inner.engine_stats()
    }
    async fn check_ready(&self) -> Result<(), StoreError> {
        self.check()?;
        self.inner.check_ready().await
    }
}

/// Users are never faulted: they pass through.
#[async_trait]
impl ferry_store::Users for FaultInjectingStore {
    async fn create_user(&self, user: &ferry_store::UserRecord) -> Result<(), StoreError> {
        self.inner.create_user(user).await
    }
    async fn set_user_credential(&self, name: &str, credential: &str) -> Result<(), StoreError> {
        self.inner.set_user_credential(name, credential).await
    }
    async fn set_user_grants(&self, name: &str, grants: &[String]) -> Result<(), StoreError> {
        self.inner.set_user_grants(name, grants).await
    }
    async fn delete_user(&self, name: &str) -> Result<(), StoreError> {
        self.inner.delete_user(name).await
    }
    async fn user(&self, name: &str) -> Result<Option<ferry_store::UserRecord>, StoreError> {
        self.inner.user(name).await
    }
    async fn list_users(&self) -> Result<Vec<ferry_store::UserRecord>, StoreError> {
        self.inner.list_users().await
    }
    async fn has_users(&self) -> Result<bool, StoreError> {
        self.inner.has_users().await
    }
}
