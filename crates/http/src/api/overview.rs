//! `/healthz`, `/readyz` and `/api/overview`.

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use super::St;
use crate::error::ApiResult;

/// The process serves.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The store accepts writes (on PostgreSQL: the database answers) and the broker is not
/// shutting down; 503 with the reason otherwise.
pub async fn readyz(state: St) -> impl IntoResponse {
    let mgmt = &state.mgmt;
    if mgmt.shutting_down() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "reason": "shutting down"})),
        );
    }
    match mgmt.store().admin().check_ready().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "reason": e.to_string()})),
        ),
    }
}

/// Node, version, uptime, totals, rates over the last minute, store figures, and the last
/// minute's samples (for charts).
pub async fn overview(state: St) -> ApiResult<Json<Value>> {
    let mgmt = &state.mgmt;
    let queues = mgmt.store().admin().queue_details().await?;
    let clients = mgmt.store().admin().list_clients().await?;
    let (mut ready, mut delayed, mut in_flight, mut user_queues, mut subscriptions) =
        (0, 0, 0, 0, 0);
    for q in &queues {
        ready += q.ready;
        delayed += q.delayed;
        in_flight += q.in_flight;
        if ferry_protocol::split_subscription_queue(&q.name).is_some() {
            subscriptions += 1;
        } else {
            user_queues += 1;
        }
    }
    let e = mgmt.store().admin().engine_stats();
    let rates = state.rates.global();
    Ok(Json(json!({
        "node": mgmt.node(),
        "version": mgmt.version(),
        "engine": mgmt.engine(),
        "started_at": mgmt.started_at_ms(),
        "uptime_secs": mgmt.uptime_secs(),
        "sessions": mgmt.session_count(),
        "clients": {"registered": clients.len(), "online": clients.iter().filter(|c| c.node.is_some()).count()},
        "queues": user_queues,
        "subscriptions": subscriptions,
        "messages": {"ready": ready, "delayed": delayed, "in_flight": in_flight},
        "rates": rates,
        "store": {
            "log_bytes": e.log_bytes,
            "segments": e.segments,
            "live_ratio": e.live_ratio,
            "refusing_writes": e.refusing_writes,
            "disk_free_bytes": e.disk_free_bytes,
            "disk_total_bytes": e.disk_total_bytes,
            "index_bytes": e.index_bytes,
            "body_cache_bytes": e.cache_bytes,
            "body_cache_hits": e.cache_hits,
            "body_cache_misses": e.cache_misses,
            "recovery_secs": e.recovery_seconds,
            "dead_lettered": e.counters.dead_lettered_max_deliveries + e.counters.dead_lettered_expired,
            "expired": e.counters.expired,
            "dropped_target_missing": e.counters.dropped_target_missing,
        },
        "series": state.rates.series(),
    })))
}
