//! What `ferry shell` remembers between commands: whether a transaction is open, and the push
//! subscriptions opened with `subscribe` (by their queue name), whose deliveries `next` reads.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_client::{Client, ClientError, Subscription};
use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::MessageId;

use crate::render;

/// The shell's state over one connection.
pub struct Session {
    client: Client,
    txn: bool,
    subs: BTreeMap<String, Subscription>,
}

impl Session {
    /// A session without transaction or subscriptions.
    pub fn new(client: Client) -> Self {
        Session {
            client,
            txn: false,
            subs: BTreeMap::new(),
        }
    }

    /// The connection.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whether a transaction is open (the prompt shows it).
    pub fn in_transaction(&self) -> bool {
        self.txn
    }

    /// What a send or publish prints: its id, or, inside a transaction (where the broker
    /// answers 0), that the message waits for the commit.
    pub fn sent(&self, id: MessageId) -> String {
        if self.txn && id == 0 {
            "held until commit\n".to_string()
        } else {
            format!("{id}\n")
        }
    }

    /// `begin`.
    pub async fn begin(&mut self) -> Result<String, ClientError> {
        self.client.begin().await?;
        self.txn = true;
        Ok("transaction open\n".to_string())
    }

    /// `commit`: prints the ids of the messages the transaction stored, in order.
    pub async fn commit(&mut self) -> Result<String, ClientError> {
        // Committed or failed (then nothing changed), the transaction is over either way.
        let result = self.client.commit().await;
        self.txn = false;
        let ids = result?;
        if ids.is_empty() {
            return Ok("committed\n".to_string());
        }
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        Ok(format!("committed {}\n", list.join(" ")))
    }

    /// `rollback`.
    pub async fn rollback(&mut self) -> Result<String, ClientError> {
        let result = self.client.rollback().await;
        self.txn = false;
        result?;
        Ok("rolled back\n".to_string())
    }

    /// `subscribe`: opens a push subscription and keeps it under its queue name.
    pub async fn subscribe(&mut self, request: SubscribeTopic) -> Result<String, ClientError> {
        let topic = request.topic.clone();
        let sub = self.client.subscribe_topic(request).await?;
        let queue = sub.queue().to_string();
        if let Some(old) = self.subs.insert(queue.clone(), sub) {
            old.cancel().await;
        }
        Ok(format!(
            "subscribed to topic '{topic}' (queue '{queue}'; read it with 'next')\n"
        ))
    }

    /// `next`: the next delivery of the named (or only) open subscription, waiting up to
    /// `wait_ms`.
    pub async fn next(
        &mut self,
        queue: Option<String>,
        wait_ms: u32,
    ) -> Result<String, ClientError> {
        let queue = match queue {
            Some(q) => q,
            None => match self.subs.keys().next() {
                Some(q) if self.subs.len() == 1 => q.clone(),
                Some(_) => return Ok(usage("several subscriptions are open: name one")),
                None => return Ok(usage("no subscription is open (use 'subscribe')")),
            },
        };
        let Some(sub) = self.subs.get_mut(&queue) else {
            return Ok(usage(&format!("no open subscription '{queue}'")));
        };
        let limit = Duration::from_millis(u64::from(wait_ms));
        let item = match tokio::time::timeout(limit, sub.next()).await {
            Err(_elapsed) => return Ok("(no message)\n".to_string()),
            Ok(item) => item,
        };
        match item {
            Some(Ok(d)) => {
                // Only a client-ack delivery has an id to settle.
                let delivery = (d.delivery_id != 0).then_some(d.delivery_id);
                Ok(render::message_block(&d.message, delivery))
            }
            Some(Err(e)) => {
                self.subs.remove(&queue);
                Err(e)
            }
            None => {
                self.subs.remove(&queue);
                Ok(format!("subscription '{queue}' has ended\n"))
            }
        }
    }

    /// `cancel`: ends an open subscription; its unsettled deliveries stay to be settled.
    pub async fn cancel(&mut self, queue: &str) -> Result<String, ClientError> {
        match self.subs.remove(queue) {
            Some(sub) => {
                sub.try_cancel().await?;
                Ok(format!("cancelled '{queue}'\n"))
            }
            None => Ok(usage(&format!("no open subscription '{queue}'"))),
        }
    }

    /// Drops the local handle of a subscription that is about to be removed.
    pub fn forget(&mut self, queue: &str) {
        self.subs.remove(queue);
    }
}

/// A usage problem found by the shell itself, printed like an answer (not an error: the
/// broker was not asked).
fn usage(text: &str) -> String {
    format!("({text})\n")
}
