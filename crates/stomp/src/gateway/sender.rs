//! `/sender/NAME` subscriptions: FTaB's retrieval by sender. The broker has no push
//! subscription by sender (a sender's messages sit in every queue), so a task takes them one
//! at a time with the native receive by sender (long-polling, woken by arrivals in any queue):
//! the messages client NAME sent, from every queue, in priority order, that this session may
//! receive (messages addressed to another client stay where they are). The session needs
//! `receive` on every queue, as on the native protocol.
//!
//! In `ack:auto` a message is taken for good as it is handed to the connection; in the client
//! modes it is leased until ACK (or NACK), and at most `prefetch` are unacknowledged at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use ferry_broker::local::LocalSession;
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, Order, ReceiveMode, Request, Response, Source};
use tokio::task::JoinHandle;

use super::acks::Acks;
use super::failure::Failure;
use super::subscription::StompEncoder;

/// How long one receive waits before it looks again (so that an ended subscription's task is
/// not left waiting long).
const WAIT_MS: u32 = 1_000;

/// Checks the subscription can run (the session may receive by sender, the sender exists, the
/// selector parses), then starts its task.
pub(crate) async fn start(
    session: Arc<LocalSession>,
    from: String,
    ack: AckMode,
    prefetch: u32,
    selector: String,
    encoder: Arc<StompEncoder>,
    acks: Arc<Mutex<Acks>>,
) -> Result<JoinHandle<()>, Failure> {
    let receive = Receive {
        source: Source::Sender(from),
        order: Order::Priority,
        mode: ReceiveMode::Peek,
        ack,
        wait_ms: 0,
        selector,
    };
    match session.request(Request::Receive(receive.clone())).await {
        Response::Received(_) => {}
        Response::Error(e) => return Err(Failure::refused("SUBSCRIBE", &e)),
        other => {
            return Err(Failure::new(
                "unexpected reply to SUBSCRIBE",
                format!("{:?}", other.kind()),
            ))
        }
    }
    let take = Receive {
        mode: ReceiveMode::Take,
        wait_ms: WAIT_MS,
        ..receive
    };
    Ok(tokio::spawn(run(session, take, prefetch, encoder, acks)))
}

async fn run(
    session: Arc<LocalSession>,
    take: Receive,
    prefetch: u32,
    encoder: Arc<StompEncoder>,
    acks: Arc<Mutex<Acks>>,
) {
    let closing = session.closing();
    let client_ack = take.ack == AckMode::Client;
    loop {
        if closing.is_cancelled() {
            return;
        }
        let outstanding = || {
            acks.lock()
                .unwrap_or_else(|p| p.into_inner())
                .outstanding(encoder.slot)
        };
        if (client_ack && outstanding() >= prefetch as usize) || !session.has_room() {
            // Wait for acknowledgements, or for the client to read.
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = closing.cancelled() => return,
            }
            continue;
        }
        match session.request(Request::Receive(take.clone())).await {
            Response::Received(Some(d)) => {
                let mut buf = BytesMut::new();
                encoder.put(&mut buf, &d.view());
                if !session.send_frames(buf.freeze()) {
                    return;
                }
            }
            Response::Received(None) => {}
            Response::Error(e) => {
                let mut ignored = BytesMut::new();
                ferry_broker::push::DeliveryEncoder::ended(&*encoder, &mut ignored, 0, &e);
                return;
            }
            _ => return,
        }
    }
}
