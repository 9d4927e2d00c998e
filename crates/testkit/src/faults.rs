//! A store wrapper that fails chosen operations on demand: the test seam for broker-level error
//! paths (`StoreUnavailable`, `Internal`) without touching the engine. Disk-level faults (failed
//! fsync, disk full) are injected below the engine with the store crate's faulty backend.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferry_protocol::{Delivery, DeliveryId, MessageId, QueueInfo};
use ferry_store::{
    Admin, NewMessage, Queues, ReceiveSpec, SessionId, Sessions, Store, StoreError, Topics,
    Transactions, Upkeep, Users,
};

/// Delegates to an inner store, except that while a fault is set every data operation (send,
/// receive, ack, nack, queue and topic changes, commits, the operator's changes) fails with it.
/// It plays only the roles it faults (queues, topics, transactions, admin); the inner store
/// plays the others.
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
impl Queues for FaultInjectingStore {
    fn memory_bytes(&self) -> u64 {
        self.inner.queues().memory_bytes()
    }

    async fn create_queue_with(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.queues().create_queue_with(name, options).await
    }

    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.check()?;
        self.inner.queues().delete_queue(name, force).await
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError> {
        self.inner.queues().list_queues().await
    }

    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError> {
        self.check()?;
        self.inner.queues().send(msg).await
    }

    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>> {
        if let Err(e) = self.check() {
            return msgs.iter().map(|_| Err(e.clone())).collect();
        }
        self.inner.queues().send_batch(msgs).await
    }

    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError> {
        self.check()?;
        self.inner.queues().receive(spec, max).await
    }

    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError> {
        self.check()?;
        self.inner.queues().ack(session, ids).await
    }

    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError> {
        self.check()?;
        self.inner.queues().nack(session, ids, requeue).await
    }

    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.queues().waiting_queues(client, now_ms).await
    }
}

#[async_trait]
impl Topics for FaultInjectingStore {
    async fn create_topic(&self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.topics().create_topic(name).await
    }

    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.check()?;
        self.inner.topics().delete_topic(name, force).await
    }

    async fn list_topics(&self) -> Result<Vec<ferry_protocol::TopicInfo>, StoreError> {
        self.inner.topics().list_topics().await
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
            .topics()
            .subscribe_topic(topic, name, options, owner)
            .await
    }

    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.topics().unsubscribe(topic, name).await
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
            .topics()
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
        self.inner
            .topics()
            .detach_consumer(topic, name, session)
            .await
    }
}

#[async_trait]
impl Transactions for FaultInjectingStore {
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        self.check()?;
        self.inner.transactions().commit(session, msgs, acks).await
    }
}

/// The operator's role goes to the inner store; the fault applies to what writes.
#[async_trait]
impl Admin for FaultInjectingStore {
    async fn queue_details(&self) -> Result<Vec<ferry_store::QueueDetails>, StoreError> {
        self.inner.admin().queue_details().await
    }
    async fn set_queue_options(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.admin().set_queue_options(name, options).await
    }
    async fn purge_queue(&self, name: &str) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.admin().purge_queue(name).await
    }
    async fn browse(
        &self,
        spec: &ferry_store::BrowseSpec,
    ) -> Result<ferry_store::BrowsePage, StoreError> {
        self.check()?;
        self.inner.admin().browse(spec).await
    }
    async fn delete_message(&self, queue: &str, id: MessageId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.admin().delete_message(queue, id).await
    }
    async fn move_messages(
        &self,
        from: &str,
        target: &ferry_store::MoveTarget,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<ferry_store::MoveReport, StoreError> {
        self.check()?;
        self.inner
            .admin()
            .move_messages(from, target, ids, limit)
            .await
    }
    async fn list_clients(&self) -> Result<Vec<ferry_store::ClientRecord>, StoreError> {
        self.inner.admin().list_clients().await
    }
    async fn forget_client(&self, name: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.admin().forget_client(name).await
    }
    fn engine_stats(&self) -> ferry_store::EngineStats {
        self.inner.admin().engine_stats()
    }
    async fn check_ready(&self) -> Result<(), StoreError> {
        self.check()?;
        self.inner.admin().check_ready().await
    }
}

/// Sessions, upkeep and users are never faulted: the inner store plays those roles.
impl Store for FaultInjectingStore {
    fn queues(&self) -> &dyn Queues {
        self
    }

    fn topics(&self) -> &dyn Topics {
        self
    }

    fn transactions(&self) -> &dyn Transactions {
        self
    }

    fn sessions(&self) -> &dyn Sessions {
        self.inner.sessions()
    }

    fn upkeep(&self) -> &dyn Upkeep {
        self.inner.upkeep()
    }

    fn admin(&self) -> &dyn Admin {
        self
    }

    fn users(&self) -> &dyn Users {
        self.inner.users()
    }
}
