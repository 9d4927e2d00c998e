//! Errors as JSON: `{"code": 1, "error": "QueueNotFound", "message": "..."}` with the
//! protocol's error codes (`docs/semantics.md`), and an HTTP status that fits.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferry_protocol::{ErrorCode, ErrorReply};
use ferry_store::StoreError;
use serde_json::json;

/// An API error.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The protocol's error code.
    pub code: ErrorCode,
    /// For people.
    pub message: String,
}

impl ApiError {
    /// An error with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
    }

    /// `InvalidArgument`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidArgument, message)
    }

    fn status(&self) -> StatusCode {
        match self.code {
            ErrorCode::QueueNotFound
            | ErrorCode::ClientNotFound
            | ErrorCode::NotFound
            | ErrorCode::TopicNotFound => StatusCode::NOT_FOUND,
            ErrorCode::QueueExists
            | ErrorCode::QueueNotEmpty
            | ErrorCode::TopicExists
            | ErrorCode::TopicNotEmpty
            | ErrorCode::SubscriptionInUse
            | ErrorCode::AlreadyOnline
            | ErrorCode::QueueInUse
            | ErrorCode::TransactionState => StatusCode::CONFLICT,
            ErrorCode::InvalidArgument | ErrorCode::UnsupportedVersion => StatusCode::BAD_REQUEST,
            ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ErrorCode::UnknownRequest => StatusCode::NOT_FOUND,
            ErrorCode::LimitExceeded | ErrorCode::ServerFull => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::StoreUnavailable | ErrorCode::ResourceExhausted => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<ErrorReply> for ApiError {
    fn from(e: ErrorReply) -> Self {
        ApiError::new(e.code, e.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::new(e.code(), e.to_string())
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(e: axum::extract::rejection::JsonRejection) -> Self {
        use axum::extract::rejection::JsonRejection as R;
        match e {
            R::BytesRejection(b) if b.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(ErrorCode::TooLarge, "request body over the limit")
            }
            other => ApiError::invalid(other.body_text()),
        }
    }
}

impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(e: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::invalid(e.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "code": self.code.as_u16(),
            "error": self.code.name(),
            "message": self.message,
        });
        (self.status(), Json(body)).into_response()
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;

/// Most bytes of a non-JSON error body kept as the message.
const MAX_MESSAGE: usize = 1024;

/// Turns an error answered by a layer or an extractor in plain text (a path that does not
/// parse, a body over the limit, ...) into the API's JSON error, keeping its status: every
/// error a client gets has the same shape.
pub async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (_, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, MAX_MESSAGE)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::SERVICE_UNAVAILABLE => ErrorCode::StoreUnavailable,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::InvalidArgument,
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut out = ApiError::new(code, message).into_response();
    *out.status_mut() = status;
    out
}
