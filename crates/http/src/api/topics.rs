//! `/api/topics`: topics with their subscriptions (backlog, consumers, selector, settings),
//! all at once or paged by name.

use axum::extract::{Path, Query};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use std::collections::HashMap;

use ferry_store::QueueDetails;

use super::paging::ListQuery;
use super::St;
use crate::error::ApiResult;

/// `?force=true`.
#[derive(Debug, Deserialize, Default)]
pub struct Force {
    /// Delete even when not empty.
    #[serde(default)]
    pub force: bool,
}

/// The topics with their subscriptions, by name: all of them, or a page of them.
pub async fn list(
    state: St,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let page = ListQuery::checked(q)?;
    let mgmt = &state.mgmt;
    let topics = mgmt.store().topics().list_topics().await?;
    let (topics, next) = page.page(topics, |t| t.name.as_str());
    let details = mgmt.store().admin().queue_details().await?;
    // Looked up by name: a search per subscription made a listing of many subscriptions
    // cost their number squared.
    let details: HashMap<&str, &QueueDetails> =
        details.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut consumers = HashMap::<String, u64>::new();
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
                    let d = details.get(queue.as_str());
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
    Ok(Json(json!({"topics": out, "next": next})))
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
