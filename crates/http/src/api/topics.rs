//! `/api/topics`: topics with their subscriptions (backlog, consumers, selector, settings).

use axum::extract::{Path, Query};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::St;
use crate::error::ApiResult;

/// `?force=true`.
#[derive(Debug, Deserialize, Default)]
pub struct Force {
    /// Delete even when not empty.
    #[serde(default)]
    pub force: bool,
}

/// Every topic with its subscriptions.
pub async fn list(state: St) -> ApiResult<Json<Value>> {
    let mgmt = &state.mgmt;
    let topics = mgmt.store().topics().list_topics().await?;
    let details = mgmt.store().admin().queue_details().await?;
    let mut consumers = std::collections::HashMap::<String, u64>::new();
    for s in mgmt.sessions() {
        for sub in s.subscriptions {
            *consumers.entry(sub.queue).or_default() += 1;
        }
    }
    let out: Vec<Value> = topics
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "subscriptions": t.subscriptions.iter().map(|s| {
                    let queue = ferry_protocol::subscription_queue(&t.name, &s.name);
                    let d = details.iter().find(|d| d.name == queue);
                    json!({
                        "name": s.name,
                        "queue": queue,
                        "durable": s.durable,
                        "shared": s.shared,
                        "selector": s.selector,
                        "ready": s.ready,
                        "in_flight": s.in_flight,
                        "delayed": d.map_or(0, |d| d.delayed),
                        "consumers": consumers.get(&queue).copied().unwrap_or(0),
                        "max_deliveries": d.map_or(0, |d| d.options.max_deliveries),
                        "dead_letter_queue": d.and_then(|d| d.options.dead_letter_queue.clone()),
                        "expiry_queue": d.and_then(|d| d.options.expiry_queue.clone()),
                    })
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Json(json!({"topics": out})))
}

/// Creates a topic.
pub async fn create(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    state.mgmt.create_topic(&name).await?;
    Ok(Json(json!({"created": name})))
}

/// Deletes a topic with its subscriptions (`?force=true` when they hold messages).
pub async fn remove(
    state: St,
    Path(name): Path<String>,
    Query(f): Query<Force>,
) -> ApiResult<Json<Value>> {
    state.mgmt.delete_topic(&name, f.force).await?;
    Ok(Json(json!({"deleted": name})))
}

/// Deletes a durable subscription and its backlog (refused while it has consumers).
pub async fn unsubscribe(
    state: St,
    Path((topic, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    state.mgmt.unsubscribe(&topic, &name).await?;
    Ok(Json(
        json!({"deleted": ferry_protocol::subscription_queue(&topic, &name)}),
    ))
}
