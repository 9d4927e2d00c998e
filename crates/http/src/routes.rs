//! The route table. [`ROUTES`] lists every (method, path) the router serves; the OpenAPI
//! document (`openapi.json`) is checked against it by a test, so neither can drift.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use axum::Router;
use ferry_protocol::ErrorCode;

use crate::api::{clients, definitions, messages, overview, queues, topics, users};
use crate::error::ApiError;
use crate::state::{AppState, HttpLimits};
use crate::{console, metrics};

/// Every (method, path) served, in the router's path syntax.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/overview"),
    ("GET", "/api/clients"),
    ("DELETE", "/api/clients/{name}"),
    ("POST", "/api/clients/{name}/disconnect"),
    ("GET", "/api/queues"),
    ("GET", "/api/queues/{name}"),
    ("PUT", "/api/queues/{name}"),
    ("PATCH", "/api/queues/{name}"),
    ("DELETE", "/api/queues/{name}"),
    ("POST", "/api/queues/{name}/purge"),
    ("GET", "/api/queues/{name}/messages"),
    ("POST", "/api/queues/{name}/messages"),
    ("DELETE", "/api/queues/{name}/messages/{id}"),
    ("POST", "/api/queues/{name}/move"),
    ("GET", "/api/senders/{name}/messages"),
    ("GET", "/api/topics"),
    ("PUT", "/api/topics/{name}"),
    ("DELETE", "/api/topics/{name}"),
    ("POST", "/api/topics/{name}/messages"),
    ("DELETE", "/api/topics/{topic}/subscriptions/{name}"),
    ("GET", "/api/users"),
    ("GET", "/api/users/{name}"),
    ("PUT", "/api/users/{name}"),
    ("PATCH", "/api/users/{name}"),
    ("DELETE", "/api/users/{name}"),
    ("GET", "/api/definitions"),
    ("POST", "/api/definitions"),
    ("GET", "/"),
    ("GET", "/console/{file}"),
];

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::UnknownRequest, "no such route")
}

/// The router over `state`.
pub fn router(state: Arc<AppState>, limits: HttpLimits) -> Router {
    Router::new()
        .route("/healthz", get(overview::healthz))
        .route("/readyz", get(overview::readyz))
        .route("/metrics", get(scrape))
        .route("/api/overview", get(overview::overview))
        .route("/api/clients", get(clients::list))
        .route("/api/clients/{name}", delete(clients::forget))
        .route("/api/clients/{name}/disconnect", post(clients::disconnect))
        .route("/api/queues", get(queues::list))
        .route(
            "/api/queues/{name}",
            get(queues::describe)
                .put(queues::create)
                .patch(queues::update)
                .delete(queues::remove),
        )
        .route("/api/queues/{name}/purge", post(queues::purge))
        .route(
            "/api/queues/{name}/messages",
            get(messages::browse_queue).post(messages::send),
        )
        .route("/api/queues/{name}/messages/{id}", delete(messages::delete))
        .route("/api/queues/{name}/move", post(messages::move_messages))
        .route("/api/senders/{name}/messages", get(messages::browse_sender))
        .route("/api/topics", get(topics::list))
        .route(
            "/api/topics/{name}",
            put(topics::create).delete(topics::remove),
        )
        .route("/api/topics/{name}/messages", post(messages::publish))
        .route(
            "/api/topics/{topic}/subscriptions/{name}",
            delete(topics::unsubscribe),
        )
        .route("/api/users", get(users::list))
        .route(
            "/api/users/{name}",
            get(users::show)
                .put(users::create)
                .patch(users::update)
                .delete(users::remove),
        )
        .route(
            "/api/definitions",
            get(definitions::export).post(definitions::import),
        )
        .route("/", get(console::index))
        .route("/console/{file}", get(console::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                ApiError::invalid("method not allowed on this route"),
            )
        })
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::authenticate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::admit::admit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::guard::guard,
        ))
        .layer(axum::middleware::map_response(crate::error::json_errors))
        .with_state(state)
}

async fn scrape(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> impl axum::response::IntoResponse {
    let text = metrics::encode(metrics::snapshot(&state.mgmt).await);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}
