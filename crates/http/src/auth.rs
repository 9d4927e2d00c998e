//! Who may use the HTTP API. While the broker has no users, the API is as open as its
//! listener (loopback unless `http_allow_remote`). Once a user exists, every request but the
//! health checks and the console's static files must carry HTTP basic credentials of a user
//! (checked like any password, with the same per-address limit, delay and counters):
//! reads (`GET`) need `monitor`, changes and everything under `/api/users` need `admin`.
//! Refusals are 401 with a `WWW-Authenticate` challenge (no or bad credentials) or 403
//! (`Unauthorized` naming the permission).
//!
//! Basic credentials cross the wire as they are: keep the API on loopback, or behind a
//! TLS-terminating proxy, until the listener speaks TLS itself.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ferry_protocol::ErrorCode;

use crate::error::ApiError;
use crate::state::AppState;

fn open_path(path: &str) -> bool {
    path == "/healthz" || path == "/readyz" || path == "/" || path.starts_with("/console/")
}

fn challenge(message: &str) -> Response {
    let mut r = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"ferry\", charset=\"UTF-8\""),
    );
    r
}

fn forbidden(message: String) -> Response {
    let mut r = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    *r.status_mut() = StatusCode::FORBIDDEN;
    r
}

/// `user:password` of a `Basic` authorization header.
fn basic(value: &str) -> Option<(String, String)> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") || rest.len() > 1024 {
        return None;
    }
    let text = String::from_utf8(B64.decode(rest.trim()).ok()?).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The middleware (see the module docs).
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let mgmt = &state.mgmt;
    if !mgmt.requires_login() || open_path(req.uri().path()) {
        return next.run(req).await;
    }
    let Some((user, password)) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(basic)
    else {
        return challenge("authentication required: HTTP basic credentials of a user");
    };
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let principal = match mgmt.login(&user, &password, ip).await {
        Ok(p) => p,
        Err(e) if e.code == ErrorCode::Unauthorized => return challenge(&e.message),
        Err(e) => return ApiError::new(e.code, e.message).into_response(),
    };
    let access = mgmt.http_access(&principal);
    let reading = matches!(*req.method(), Method::GET | Method::HEAD);
    let users = req.uri().path().starts_with("/api/users");
    let (needed, ok) = if reading && !users {
        ("monitor", access.monitor)
    } else {
        ("admin", access.admin)
    };
    if !ok {
        return forbidden(format!(
            "permission denied: user '{user}' lacks '{needed}', which {} {} needs",
            req.method(),
            req.uri().path()
        ));
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_parse_and_junk_does_not() {
        let v = format!("Basic {}", B64.encode("alice:pa:ss"));
        assert_eq!(basic(&v), Some(("alice".into(), "pa:ss".into())));
        assert_eq!(basic("Bearer x"), None);
        assert_eq!(basic("Basic !!!"), None);
        assert_eq!(basic(&format!("Basic {}", B64.encode("nocolon"))), None);
    }
}
