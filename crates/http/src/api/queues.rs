//! `/api/queues`: list with depths, rates and settings (all at once, or paged by name);
//! describe; create; change settings; delete; purge.

use axum::extract::{Path, Query};
use axum::Json;
use ferry_protocol::QueueOptions;
use ferry_store::QueueDetails;
use serde::Deserialize;
use serde_json::{json, Value};

use super::paging::ListQuery;
use super::topics::Force;
use super::St;
use crate::error::{ApiError, ApiResult};
use crate::rates::Rates;

/// A queue's settings as the API takes them (every field optional on a change).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Client-ack deliveries before dead-lettering (0: unlimited).
    pub max_deliveries: Option<u32>,
    /// Dead-letter queue; `null` or `""` for none.
    pub dead_letter_queue: Option<Option<String>>,
    /// Expiry queue; `null` or `""` for none.
    pub expiry_queue: Option<Option<String>>,
}

impl Settings {
    /// `base` with these settings applied.
    pub fn apply(self, mut base: QueueOptions) -> QueueOptions {
        let none_if_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
        if let Some(m) = self.max_deliveries {
            base.max_deliveries = m;
        }
        if let Some(d) = self.dead_letter_queue {
            base.dead_letter_queue = none_if_empty(d);
        }
        if let Some(e) = self.expiry_queue {
            base.expiry_queue = none_if_empty(e);
        }
        base
    }
}

/// A queue as JSON.
pub fn queue_json(q: &QueueDetails, rates: &Rates, now_ms: u64) -> Value {
    let rate = rates.queue(&q.name);
    json!({
        "name": q.name,
        "ready": q.ready,
        "delayed": q.delayed,
        "in_flight": q.in_flight,
        "ready_bytes": q.ready_bytes,
        "oldest_age_secs": q.oldest_created_at.map(|t| now_ms.saturating_sub(t) as f64 / 1000.0),
        "max_deliveries": q.options.max_deliveries,
        "dead_letter_queue": q.options.dead_letter_queue,
        "expiry_queue": q.options.expiry_queue,
        "rate_in": rate.map(|r| r.0),
        "rate_out": rate.map(|r| r.1),
    })
}

async fn details(state: &St, name: &str) -> ApiResult<QueueDetails> {
    state
        .mgmt
        .store()
        .admin()
        .queue_details()
        .await?
        .into_iter()
        .find(|q| q.name == name)
        .ok_or_else(|| ApiError::from(ferry_store::StoreError::QueueNotFound(name.to_owned())))
}

/// The queues (not subscriptions' queues), by name: all of them, or a page of them.
pub async fn list(
    state: St,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let page = ListQuery::checked(q)?;
    let now = state.mgmt.now_ms();
    let all = state.mgmt.store().admin().queue_details().await?;
    let queues: Vec<&QueueDetails> = all
        .iter()
        .filter(|q| ferry_protocol::split_subscription_queue(&q.name).is_none())
        .collect();
    let (shown, next) = page.page(queues, |q| q.name.as_str());
    let queues: Vec<Value> = shown
        .iter()
        .map(|q| queue_json(q, &state.rates, now))
        .collect();
    Ok(Json(json!({"queues": queues, "next": next})))
}

/// One queue (or subscription queue `topic:name`), with the queues that name it as their
/// dead-letter or expiry queue and its consumers on this node.
pub async fn describe(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let all = state.mgmt.store().admin().queue_details().await?;
    let Some(q) = all.iter().find(|q| q.name == name) else {
        return Err(ferry_store::StoreError::QueueNotFound(name).into());
    };
    let mut v = queue_json(q, &state.rates, state.mgmt.now_ms());
    let used_by: Vec<Value> = all
        .iter()
        .filter_map(|o| {
            if o.options.dead_letter_queue.as_deref() == Some(&name) {
                Some(json!({"queue": o.name, "as": "dead-letter"}))
            } else if o.options.expiry_queue.as_deref() == Some(&name) {
                Some(json!({"queue": o.name, "as": "expiry"}))
            } else {
                None
            }
        })
        .collect();
    let consumers: Vec<Value> = state
        .mgmt
        .sessions()
        .into_iter()
        .flat_map(|s| {
            s.subscriptions
                .into_iter()
                .filter(|sub| sub.queue == name)
                .map(move |sub| json!({"client": s.client, "selector": sub.selector}))
        })
        .collect();
    if let Some(o) = v.as_object_mut() {
        o.insert("used_by".into(), Value::Array(used_by));
        o.insert("consumers".into(), Value::Array(consumers));
        o.insert("entered_total".into(), json!(q.entered_total));
        o.insert("left_total".into(), json!(q.left_total));
    }
    Ok(Json(v))
}

/// Creates a queue with settings (body optional: an empty one means the defaults).
pub async fn create(
    state: St,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let settings: Settings = if body.iter().all(u8::is_ascii_whitespace) {
        Settings::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("queue settings: {e}")))?
    };
    let options = settings.apply(QueueOptions::default());
    state.mgmt.create_queue(&name, options).await?;
    Ok(Json(json!({"created": name})))
}

/// Changes the dead-letter, expiry and max-delivery settings (fields left out keep their
/// value). Applies from now on; see docs/semantics.md.
pub async fn update(
    state: St,
    Path(name): Path<String>,
    body: Result<Json<Settings>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Json(settings) = body?;
    let current = details(&state, &name).await?;
    let options = settings.apply(current.options);
    state.mgmt.set_queue_options(&name, &options).await?;
    let q = details(&state, &name).await?;
    Ok(Json(queue_json(&q, &state.rates, state.mgmt.now_ms())))
}

/// Deletes a queue (`?force=true` when it holds messages or is another's dead-letter queue).
pub async fn remove(
    state: St,
    Path(name): Path<String>,
    Query(f): Query<Force>,
) -> ApiResult<Json<Value>> {
    state.mgmt.delete_queue(&name, f.force).await?;
    Ok(Json(json!({"deleted": name})))
}

/// Removes every ready and delayed message.
pub async fn purge(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let n = state.mgmt.store().admin().purge_queue(&name).await?;
    Ok(Json(json!({"queue": name, "purged": n})))
}
