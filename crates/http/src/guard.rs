//! Requests from places a loopback API must not answer: a web page the operator happens to
//! have open, reaching `127.0.0.1` through the browser.
//!
//! - DNS rebinding: a page whose host name now points at 127.0.0.1 is "same origin" for the
//!   browser, but its requests name that host in `Host`. Unless `http_allow_remote` is set
//!   (then a proxy or a real name is expected), only loopback names are served.
//! - Cross-site requests: a form or script on another site can make the browser send a POST
//!   without asking first (no preflight for a body-less POST). Requests that change anything
//!   are refused when `Origin` names another host than the one asked, or when the browser says
//!   the request is cross-site (`Sec-Fetch-Site`). Tools (curl, the CLI, Prometheus) send
//!   neither header and are served.
//!
//! Both answer 403 with the protocol's `Unauthorized` code.
//!
//! It also refuses a body announced larger than the limit at once (413, `TooLarge`), before
//! anything reads it: the body limit alone would only stop a body once that much had come.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferry_protocol::ErrorCode;

use crate::error::ApiError;
use crate::state::AppState;

/// Whether `host` (a `Host` header: name or address, maybe with a port) is a loopback name.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // [::1]:port
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, p)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The `host[:port]` part of an origin (`scheme://host[:port]`); `None` for `null` or junk.
fn origin_authority(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    Some(rest.split('/').next().unwrap_or(rest))
}

fn refused(message: String) -> Response {
    let mut r = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    *r.status_mut() = axum::http::StatusCode::FORBIDDEN;
    r
}

/// The middleware (see the module docs).
pub async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let host = text(header::HOST).unwrap_or_default();
    if !state.mgmt.http_allow_remote() && !is_loopback_host(&host) {
        return refused(format!(
            "host '{host}' is not served: name 127.0.0.1, [::1] or localhost \
             (set http_allow_remote to serve other names)"
        ));
    }
    let announced = text(header::CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > state.limits.max_body_bytes as u64) {
        return ApiError::new(
            ErrorCode::TooLarge,
            format!(
                "request body of {} bytes is over the limit of {} bytes",
                announced.unwrap_or(0),
                state.limits.max_body_bytes
            ),
        )
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        if let Some(origin) = text(header::ORIGIN) {
            if origin_authority(&origin).is_none_or(|a| !a.eq_ignore_ascii_case(&host)) {
                return refused(format!(
                    "cross-origin request from '{origin}' refused: changes are served only \
                     to the console itself and to tools"
                ));
            }
        }
        if text(header::HeaderName::from_static("sec-fetch-site")).as_deref() == Some("cross-site")
        {
            return refused("cross-site request refused".to_owned());
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_and_without_ports() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:6731",
            "localhost",
            "LOCALHOST:80",
            "[::1]:6731",
            "[::1]",
            "127.1.2.3:9",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example",
            "evil.example:6731",
            "10.0.0.1:6731",
            "localhost.evil.example",
            "[2001:db8::1]:80",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn origins_name_their_authority() {
        assert_eq!(
            origin_authority("http://127.0.0.1:6731"),
            Some("127.0.0.1:6731")
        );
        assert_eq!(origin_authority("https://a.example/x"), Some("a.example"));
        assert_eq!(origin_authority("null"), None);
    }
}
