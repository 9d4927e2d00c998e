//! `/api/definitions`: queues (with their settings), topics and durable subscriptions as one
//! JSON document. Export, then import into another broker, then export again gives the same
//! document. Import creates what is missing and sets every listed setting; it removes nothing.

use axum::Json;
use ferry_protocol::{QueueOptions, SubscriptionOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::St;
use crate::error::{ApiError, ApiResult};

/// The document.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Definitions {
    /// Format version of this document (1).
    pub format: u32,
    /// Queues, by name.
    pub queues: Vec<QueueDef>,
    /// Topics, by name.
    pub topics: Vec<TopicDef>,
}

/// A queue and its settings.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueDef {
    /// Name.
    pub name: String,
    /// 0: unlimited.
    #[serde(default)]
    pub max_deliveries: u32,
    /// Dead-letter queue.
    #[serde(default)]
    pub dead_letter_queue: Option<String>,
    /// Expiry queue.
    #[serde(default)]
    pub expiry_queue: Option<String>,
}

/// A topic and its durable subscriptions.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopicDef {
    /// Name.
    pub name: String,
    /// Durable subscriptions, by name.
    #[serde(default)]
    pub subscriptions: Vec<SubscriptionDef>,
}

/// A durable subscription.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionDef {
    /// Name.
    pub name: String,
    /// Shared among consumers.
    #[serde(default)]
    pub shared: bool,
    /// Selector; empty: every message.
    #[serde(default)]
    pub selector: String,
    /// As for a queue.
    #[serde(default)]
    pub max_deliveries: u32,
    /// As for a queue.
    #[serde(default)]
    pub dead_letter_queue: Option<String>,
    /// As for a queue.
    #[serde(default)]
    pub expiry_queue: Option<String>,
}

fn options(max: u32, dlq: &Option<String>, exp: &Option<String>) -> QueueOptions {
    QueueOptions {
        max_deliveries: max,
        dead_letter_queue: dlq.clone(),
        expiry_queue: exp.clone(),
    }
}

/// Exports the definitions.
pub async fn export(state: St) -> ApiResult<Json<Definitions>> {
    let store = state.mgmt.store();
    let details = store.admin().queue_details().await?;
    let topics = store.topics().list_topics().await?;
    let queues = details
        .iter()
        .filter(|q| ferry_protocol::split_subscription_queue(&q.name).is_none())
        .map(|q| QueueDef {
            name: q.name.clone(),
            max_deliveries: q.options.max_deliveries,
            dead_letter_queue: q.options.dead_letter_queue.clone(),
            expiry_queue: q.options.expiry_queue.clone(),
        })
        .collect();
    let topics = topics
        .iter()
        .map(|t| TopicDef {
            name: t.name.clone(),
            subscriptions: t
                .subscriptions
                .iter()
                .filter(|s| s.durable)
                .map(|s| {
                    let queue = ferry_protocol::subscription_queue(&t.name, &s.name);
                    let o = details
                        .iter()
                        .find(|d| d.name == queue)
                        .map(|d| d.options.clone())
                        .unwrap_or_default();
                    SubscriptionDef {
                        name: s.name.clone(),
                        shared: s.shared,
                        selector: s.selector.clone(),
                        max_deliveries: o.max_deliveries,
                        dead_letter_queue: o.dead_letter_queue,
                        expiry_queue: o.expiry_queue,
                    }
                })
                .collect(),
        })
        .collect();
    Ok(Json(Definitions {
        format: 1,
        queues,
        topics,
    }))
}

/// Imports definitions: creates missing queues (then sets every queue's settings, so their
/// order in the document does not matter), topics and durable subscriptions.
pub async fn import(
    state: St,
    body: Result<Json<Definitions>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Json(defs) = body?;
    if defs.format != 1 {
        return Err(ApiError::invalid(format!(
            "definitions format {} is not supported (1 is)",
            defs.format
        )));
    }
    let mgmt = &state.mgmt;
    let existing: Vec<String> = mgmt
        .store()
        .admin()
        .queue_details()
        .await?
        .into_iter()
        .map(|q| q.name)
        .collect();
    let mut created = Vec::new();
    for q in &defs.queues {
        if !existing.contains(&q.name) {
            mgmt.create_queue(&q.name, QueueOptions::default()).await?;
            created.push(q.name.clone());
        }
    }
    for q in &defs.queues {
        let o = options(q.max_deliveries, &q.dead_letter_queue, &q.expiry_queue);
        mgmt.set_queue_options(&q.name, &o).await?;
    }
    let topics: Vec<String> = mgmt
        .store()
        .topics()
        .list_topics()
        .await?
        .into_iter()
        .map(|t| t.name)
        .collect();
    for t in &defs.topics {
        if !topics.contains(&t.name) {
            mgmt.create_topic(&t.name).await?;
            created.push(t.name.clone());
        }
        for s in &t.subscriptions {
            let o = SubscriptionOptions {
                durable: true,
                shared: s.shared,
                selector: s.selector.clone(),
                queue: options(s.max_deliveries, &s.dead_letter_queue, &s.expiry_queue),
            };
            let queue = mgmt
                .store()
                .topics()
                .subscribe_topic(&t.name, &s.name, &o, "")
                .await?;
            mgmt.set_queue_options(&queue, &o.queue).await?;
        }
    }
    Ok(Json(json!({"created": created})))
}
