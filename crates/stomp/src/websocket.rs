//! STOMP over WebSocket (RFC 6455): the `/stomp` route of the HTTP listener, so that a web
//! page reaches Ferry with `@stomp/stompjs` and no other server.
//!
//! The subprotocols are `v12.stomp`, `v11.stomp` and `v10.stomp` (the server picks the first
//! the client offers; a client that offers none is served too, as STOMP's own CONNECT
//! negotiates the version). Each WebSocket message carries STOMP bytes: a frame, several, part
//! of one, or heart-beats; text and binary messages are read alike. What the connection writes
//! at once goes out as one message: a frame, or several frames written together (STOMP clients
//! parse a stream of frames), text when it is UTF-8 and binary otherwise. Past the upgrade, a
//! WebSocket connection is a STOMP connection like any other (see [`crate::gateway`]), with the
//! same login rules and limit per address (the peer's address as the HTTP listener accepted it).
//!
//! **Which pages may connect.** A browser lets any page open a WebSocket to any address, and
//! sends the page's origin along: a page from elsewhere could otherwise use a broker on the
//! user's own machine, where anonymous sessions are allowed. So, as the HTTP API's guard does:
//! a `Host` that is not a loopback name is refused (DNS rebinding) unless `http_allow_remote`
//! is set, and an `Origin` other than the address asked (`http://HOST:PORT` of the `Host`)
//! is refused unless `http_allow_remote` is set; clients that are not browsers send no
//! `Origin` and are served. Both are answered 403 before the upgrade.

use std::io;
use std::net::SocketAddr;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::{Bytes, BytesMut};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};

use crate::gateway::wire::{ByteSource, FrameSink};
use crate::gateway::Gateway;

/// The subprotocols served, in the server's order of preference.
pub const SUBPROTOCOLS: [&str; 3] = ["v12.stomp", "v11.stomp", "v10.stomp"];

/// The `/stomp` route, to merge into the HTTP listener's router.
pub fn router(gateway: Gateway) -> Router {
    Router::new().route(
        "/stomp",
        get(
            move |ws: WebSocketUpgrade,
                  headers: HeaderMap,
                  peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>| {
                let peer = peer.map(|axum::Extension(ConnectInfo(a))| a);
                upgrade(ws, headers, peer, gateway.clone())
            },
        ),
    )
}

/// Whether `host` (a `Host` header: name or address, maybe with a port) is a loopback name.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
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

/// Why the page or client may not connect (see the module docs), if it may not.
pub fn refusal(headers: &HeaderMap, allow_remote: bool) -> Option<String> {
    if allow_remote {
        return None;
    }
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).unwrap_or_default();
    if !is_loopback_host(host) {
        return Some(format!(
            "host '{host}' is not served: name 127.0.0.1, [::1] or localhost \
             (set http_allow_remote to serve other names)"
        ));
    }
    let origin = text(header::ORIGIN)?;
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    if authority.is_some_and(|a| a.eq_ignore_ascii_case(host)) {
        return None;
    }
    Some(format!(
        "pages from origin '{origin}' may not connect to {host} \
         (only pages from {host} itself; set http_allow_remote to allow other origins)"
    ))
}

async fn upgrade(
    ws: WebSocketUpgrade,
    headers: HeaderMap,
    peer: Option<SocketAddr>,
    gateway: Gateway,
) -> Response {
    if let Some(why) = refusal(&headers, gateway.settings().allow_remote_origins) {
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    let max = gateway.limits().max_frame_bytes + 64 * 1024;
    ws.protocols(SUBPROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            let (sink, stream) = socket.split();
            let name = peer.map_or_else(|| "websocket".to_owned(), |p| format!("websocket {p}"));
            gateway
                .serve(WsSource(stream), WsSink(sink), name, peer.map(|p| p.ip()))
                .await;
        })
}

struct WsSource(SplitStream<WebSocket>);
struct WsSink(SplitSink<WebSocket, Message>);

impl ByteSource for WsSource {
    async fn read(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        loop {
            match self.0.next().await {
                None | Some(Ok(Message::Close(_))) => return Ok(0),
                Some(Err(e)) => return Err(io::Error::other(e)),
                Some(Ok(Message::Text(t))) => {
                    buf.extend_from_slice(t.as_bytes());
                    if !t.is_empty() {
                        return Ok(t.len());
                    }
                }
                Some(Ok(Message::Binary(b))) => {
                    buf.extend_from_slice(&b);
                    if !b.is_empty() {
                        return Ok(b.len());
                    }
                }
                // Answered by the WebSocket layer itself.
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            }
        }
    }
}

impl FrameSink for WsSink {
    async fn write(&mut self, frames: &[Bytes]) -> io::Result<()> {
        for frame in frames {
            let msg = match std::str::from_utf8(frame) {
                Ok(text) => Message::Text(text.into()),
                Err(_) => Message::Binary(frame.clone()),
            };
            self.0.feed(msg).await.map_err(io::Error::other)?;
        }
        self.0.flush().await.map_err(io::Error::other)
    }

    async fn close(&mut self) {
        let _ = self.0.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, o.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_loopback_hosts_and_pages_of_the_same_address_are_served() {
        assert_eq!(refusal(&headers("127.0.0.1:6731", None), false), None);
        assert_eq!(
            refusal(
                &headers("127.0.0.1:6731", Some("http://127.0.0.1:6731")),
                false
            ),
            None
        );
        assert_eq!(
            refusal(
                &headers("localhost:6731", Some("http://localhost:6731")),
                false
            ),
            None
        );
        let cross = refusal(
            &headers("127.0.0.1:6731", Some("https://evil.example")),
            false,
        );
        assert!(cross.is_some_and(|w| w.contains("evil.example")));
        assert!(refusal(&headers("127.0.0.1:6731", Some("null")), false).is_some());
        let rebound = refusal(&headers("evil.example:6731", None), false);
        assert!(rebound.is_some_and(|w| w.contains("not served")));
        assert_eq!(
            refusal(
                &headers("broker.example:6731", Some("https://app.example")),
                true
            ),
            None
        );
    }
}
