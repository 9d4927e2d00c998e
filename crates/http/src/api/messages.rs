//! Messages: browse a queue or a sender's messages without consuming them (paged with an
//! opaque cursor, filtered by a selector, bodies as text, JSON, hex or base64; a page at most
//! [`HttpLimits::max_page_bytes`] of JSON unless one message alone is larger); send or publish
//! a test message; delete one message; move messages between queues (redrive dead letters).
//!
//! [`HttpLimits::max_page_bytes`]: crate::HttpLimits::max_page_bytes

use std::sync::Arc;

use axum::extract::{Path, Query};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use bytes::Bytes;
use ferry_protocol::{
    Message, MessageId, Order, OutgoingMessage, PropertyValue, Source, DEFAULT_PRIORITY,
};
use ferry_store::{BrowseCursor, BrowseSpec, MoveTarget};
use serde::Deserialize;
use serde_json::{json, Value};

use super::St;
use crate::error::{ApiError, ApiResult};

/// Browse parameters.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct BrowseQuery {
    /// `priority` (default) or `time`.
    pub order: Option<String>,
    /// From a previous page's `next`.
    pub cursor: Option<String>,
    /// Messages per page, 1 to 1000 (default 100).
    pub limit: Option<usize>,
    /// A JMS selector.
    pub selector: Option<String>,
    /// `text` (default), `json`, `hex` or `base64`.
    pub body: Option<String>,
}

fn encode_cursor(c: &BrowseCursor) -> String {
    let text = format!(
        "{}:{}:{}",
        c.priority,
        c.id,
        c.queue.as_deref().unwrap_or("")
    );
    URL_SAFE_NO_PAD.encode(text)
}

fn decode_cursor(s: &str) -> ApiResult<BrowseCursor> {
    let bad = || ApiError::invalid("malformed cursor: pass a page's `next` back unchanged");
    let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, ':');
    let priority = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let id = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let queue = parts.next().filter(|q| !q.is_empty()).map(str::to_owned);
    Ok(BrowseCursor {
        priority,
        id,
        queue,
    })
}

fn property_json(v: &PropertyValue) -> Value {
    match v {
        PropertyValue::Bool(b) => json!(b),
        PropertyValue::Int(i) => json!(i),
        PropertyValue::Float(f) => json!(f),
        PropertyValue::Str(s) => json!(s),
    }
}

/// A message as JSON, its body shown as `format` asks.
pub fn message_json(m: &Message, format: &str) -> Value {
    let body = match format {
        "hex" => json!(m
            .body
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()),
        "base64" => json!(STANDARD.encode(&m.body)),
        "json" => match serde_json::from_slice::<Value>(&m.body) {
            Ok(v) => v,
            Err(_) => json!(String::from_utf8_lossy(&m.body)),
        },
        _ => json!(String::from_utf8_lossy(&m.body)),
    };
    let props: serde_json::Map<String, Value> = m
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), property_json(v)))
        .collect();
    json!({
        "id": m.id,
        "queue": &*m.queue,
        "sender": &*m.sender,
        "receiver": m.receiver,
        "priority": m.priority,
        "context": m.context,
        "created_at": m.created_at,
        "expires_at": (m.expires_at != 0).then_some(m.expires_at),
        "delivery_count": m.delivery_count,
        "properties": props,
        "body_bytes": m.body.len(),
        "body": body,
    })
}

/// Bytes of a page kept for what surrounds its messages (`{"messages": [...], "next": ...}`).
const PAGE_FRAME_BYTES: usize = 512;

/// Most bytes of bodies a page reads from the store in one step (given the largest body the
/// broker takes), so that a page of large messages never holds many more of them than it shows.
const STEP_BYTES: usize = 16 << 20;

/// Where a browse resumes after `m`.
fn cursor_after(m: &Message, order: Order, source: &Source) -> BrowseCursor {
    BrowseCursor {
        priority: match order {
            Order::Priority => m.priority,
            Order::Time => 0,
        },
        id: m.id,
        queue: match source {
            Source::Sender(_) => Some(m.queue.to_string()),
            Source::Queue(_) => None,
        },
    }
}

async fn browse(state: St, source: Source, q: BrowseQuery) -> ApiResult<Response> {
    let order = match q.order.as_deref() {
        None | Some("priority") => Order::Priority,
        Some("time") => Order::Time,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "order '{o}': use priority or time"
            )))
        }
    };
    let format = q.body.unwrap_or_else(|| "text".into());
    if !["text", "json", "hex", "base64"].contains(&format.as_str()) {
        return Err(ApiError::invalid(format!(
            "body '{format}': use text, json, hex or base64"
        )));
    }
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > ferry_store::admin::MAX_BROWSE_PAGE {
        return Err(ApiError::invalid("limit must be 1 to 1000"));
    }
    let selector = match q.selector.as_deref().filter(|s| !s.trim().is_empty()) {
        None => None,
        Some(text) => Some(Arc::new(
            ferry_selector::Selector::parse(text)
                .map_err(|e| ApiError::invalid(format!("invalid selector: {e}")))?,
        )),
    };
    let largest_body = (state.mgmt.limits().max_body_bytes as usize).max(1);
    // A page stops before the message that would take it past this (with a `next` to go on
    // from), though it always shows at least one.
    let max_page_bytes = state.limits.max_page_bytes;
    let mut spec = BrowseSpec {
        source,
        order,
        after: q.cursor.as_deref().map(decode_cursor).transpose()?,
        limit,
        selector,
        now_ms: state.mgmt.now_ms(),
    };
    // The messages as JSON text, and the page's size so far (with the commas between them).
    let mut shown: Vec<String> = Vec::new();
    let mut bytes = PAGE_FRAME_BYTES;
    let next = loop {
        let wanted = limit.saturating_sub(shown.len());
        spec.limit = (STEP_BYTES / largest_body).clamp(1, wanted.max(1));
        let step = state.mgmt.store().admin().browse(&spec).await?;
        let got = step.messages.len();
        let mut full = false;
        for b in &step.messages {
            let text = message_json(&b.message, &format).to_string();
            if !shown.is_empty() && bytes + text.len() + 1 > max_page_bytes {
                full = true;
                break;
            }
            bytes += text.len() + 1;
            spec.after = Some(cursor_after(&b.message, order, &spec.source));
            shown.push(text);
        }
        if full {
            break spec.after;
        }
        // The store's cursor: past the entries a selector skipped, too.
        let Some(after) = step.next else {
            break None;
        };
        spec.after = Some(after);
        // A short step: the store examined as many entries as one call may.
        if got < spec.limit || shown.len() >= limit {
            break spec.after;
        }
    };
    let next = serde_json::to_string(&next.as_ref().map(encode_cursor))
        .map_err(|e| ApiError::new(ferry_protocol::ErrorCode::Internal, e.to_string()))?;
    let mut page = String::with_capacity(bytes + next.len() + 32);
    page.push_str("{\"messages\":[");
    page.push_str(&shown.join(","));
    page.push_str("],\"next\":");
    page.push_str(&next);
    page.push('}');
    Ok(([(header::CONTENT_TYPE, "application/json")], page).into_response())
}

/// `GET /api/queues/{name}/messages`.
pub async fn browse_queue(
    state: St,
    Path(name): Path<String>,
    q: Result<Query<BrowseQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    browse(state, Source::Queue(name), q?.0).await
}

/// `GET /api/senders/{name}/messages`.
pub async fn browse_sender(
    state: St,
    Path(name): Path<String>,
    q: Result<Query<BrowseQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    browse(state, Source::Sender(name), q?.0).await
}

/// A test message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    /// The body (text).
    #[serde(default)]
    pub body: String,
    /// The body is base64 (binary).
    #[serde(default)]
    pub base64: bool,
    /// Sending client (registered if new); default `ferry-console`.
    pub sender: Option<String>,
    /// Addressed client.
    pub to: Option<String>,
    /// 1 to 10.
    pub priority: Option<u8>,
    /// Application context.
    #[serde(default)]
    pub context: u64,
    /// Properties: strings, numbers, booleans.
    #[serde(default)]
    pub properties: serde_json::Map<String, Value>,
    /// Time to live in ms.
    #[serde(default)]
    pub ttl_ms: u64,
    /// Delay in ms.
    #[serde(default)]
    pub delay_ms: u64,
    /// Memory only.
    #[serde(default)]
    pub non_persistent: bool,
}

fn outgoing(b: SendBody) -> ApiResult<(String, OutgoingMessage)> {
    let body = if b.base64 {
        Bytes::from(
            STANDARD
                .decode(b.body.as_bytes())
                .map_err(|e| ApiError::invalid(format!("body is not base64: {e}")))?,
        )
    } else {
        Bytes::from(b.body.into_bytes())
    };
    let mut properties = Vec::new();
    for (k, v) in b.properties {
        let pv = match v {
            Value::Bool(x) => PropertyValue::Bool(x),
            Value::String(s) => PropertyValue::Str(s),
            Value::Number(n) if n.is_i64() => PropertyValue::Int(n.as_i64().unwrap_or(0)),
            Value::Number(n) => PropertyValue::Float(n.as_f64().unwrap_or(0.0)),
            _ => {
                return Err(ApiError::invalid(format!(
                    "property '{k}': use a string, number or boolean"
                )))
            }
        };
        properties.push((k, pv));
    }
    let mut m = OutgoingMessage::new(String::new(), body);
    m.queues.clear();
    m.receiver = b.to;
    m.priority = b.priority.unwrap_or(DEFAULT_PRIORITY);
    m.context = b.context;
    m.properties = properties.into();
    m.ttl_ms = b.ttl_ms;
    m.delay_ms = b.delay_ms;
    m.persistent = !b.non_persistent;
    Ok((b.sender.unwrap_or_else(|| "ferry-console".into()), m))
}

/// `POST /api/queues/{name}/messages`: sends a message.
pub async fn send(
    state: St,
    Path(name): Path<String>,
    body: Result<Json<SendBody>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<Value>> {
    let (sender, mut m) = outgoing(body?.0)?;
    m.queues = vec![name];
    let id = state.mgmt.send(&sender, m).await?;
    Ok(Json(json!({"id": id})))
}

/// `POST /api/topics/{name}/messages`: publishes a message.
pub async fn publish(
    state: St,
    Path(name): Path<String>,
    body: Result<Json<SendBody>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<Value>> {
    let (sender, mut m) = outgoing(body?.0)?;
    m.topic = Some(name.into());
    let id = state.mgmt.send(&sender, m).await?;
    Ok(Json(json!({"id": id})))
}

/// `DELETE /api/queues/{name}/messages/{id}`.
pub async fn delete(
    state: St,
    Path((name, id)): Path<(String, MessageId)>,
) -> ApiResult<Json<Value>> {
    state.mgmt.store().admin().delete_message(&name, id).await?;
    Ok(Json(json!({"deleted": id, "queue": name})))
}

/// A move.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    /// Target queue; absent with `to_origin`.
    pub to: Option<String>,
    /// Each message back to its original queue (redrive of dead letters).
    #[serde(default)]
    pub to_origin: bool,
    /// The messages; absent: from the head, up to `limit`.
    pub ids: Option<Vec<MessageId>>,
    /// Most messages when `ids` is absent (default 1000, at most 100000).
    pub limit: Option<usize>,
}

/// `POST /api/queues/{name}/move`.
pub async fn move_messages(
    state: St,
    Path(name): Path<String>,
    body: Result<Json<MoveBody>, axum::extract::rejection::JsonRejection>,
) -> ApiResult<Json<Value>> {
    let Json(b) = body?;
    let target = match (b.to, b.to_origin) {
        (Some(t), false) => MoveTarget::Queue(t),
        (None, true) => MoveTarget::Origin,
        _ => return Err(ApiError::invalid("give either `to` or `to_origin: true`")),
    };
    let limit = b.limit.unwrap_or(1000);
    if limit == 0 || limit > 100_000 {
        return Err(ApiError::invalid("limit must be 1 to 100000"));
    }
    let report = state
        .mgmt
        .move_messages(&name, &target, b.ids.as_deref(), limit)
        .await?;
    Ok(Json(json!({
        "moved": report.moved.iter().map(|(id, q)| json!({"id": id, "to": q})).collect::<Vec<_>>(),
        "skipped": report.skipped.iter().map(|(id, why)| json!({"id": id, "reason": why})).collect::<Vec<_>>(),
    })))
}
