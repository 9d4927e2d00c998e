//! `/api/clients`: every registered client (FTaB's "in system"), which are online and where,
//! with their sessions' subscriptions; force-disconnect; forgetting an offline registration.

use std::collections::HashMap;

use axum::extract::{Path, Query};
use axum::Json;
use ferry_protocol::ErrorCode;
use serde_json::{json, Value};

use super::paging::ListQuery;
use super::St;
use crate::error::{ApiError, ApiResult};

/// The registered clients by name (all of them, or a page of them) with online/offline,
/// node, and (for sessions on this node) the peer address, connection time, in-flight
/// deliveries and subscriptions; `in_system` and `online` count every client.
pub async fn list(
    state: St,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let page = ListQuery::checked(q)?;
    let mgmt = &state.mgmt;
    let records = mgmt.store().admin().list_clients().await?;
    let in_system = records.len();
    let online = records.iter().filter(|c| c.node.is_some()).count();
    let (records, next) = page.page(records, |c| c.name.as_str());
    let sessions = mgmt.sessions();
    // Looked up by name: a search per client made a listing cost clients times sessions.
    let sessions: HashMap<&str, _> = sessions.iter().map(|s| (s.client.as_str(), s)).collect();
    let clients: Vec<Value> = records
        .iter()
        .map(|c| {
            let local = sessions.get(c.name.as_str());
            let node = match (&c.node, local) {
                (_, Some(_)) => Some(mgmt.node().to_owned()),
                (Some(n), None) if !n.is_empty() => Some(n.clone()),
                (Some(_), None) => Some(mgmt.node().to_owned()),
                (None, None) => None,
            };
            json!({
                "name": c.name,
                "online": c.node.is_some() || local.is_some(),
                "node": node,
                "protocol": local.map(|s| s.protocol),
                "address": local.map(|s| s.peer.clone()),
                "connected_at": local.map(|s| s.connected_at_ms),
                "in_flight": local.map(|s| s.in_flight),
                "subscriptions": local.map(|s| s.subscriptions.iter().map(|sub| json!({
                    "queue": sub.queue, "selector": sub.selector,
                    "ack": if sub.client_ack { "client" } else { "auto" },
                })).collect::<Vec<_>>()).unwrap_or_default(),
            })
        })
        .collect();
    Ok(Json(json!({
        "in_system": in_system,
        "online": online,
        "clients": clients,
        "next": next,
    })))
}

/// Forgets an offline client's registration (refused while it is online, is named by stored
/// messages or owns a durable subscription).
pub async fn forget(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    state.mgmt.store().admin().forget_client(&name).await?;
    Ok(Json(json!({"forgotten": name})))
}

/// Closes the client's session on this node; its unsettled deliveries return to their queues.
pub async fn disconnect(state: St, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    if state.mgmt.disconnect(&name) {
        Ok(Json(json!({"disconnected": name})))
    } else {
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!("client '{name}' has no session on this node"),
        ))
    }
}
