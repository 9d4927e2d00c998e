//! Hostile input against a live broker: random and truncated frames, oversized lengths. The
//! broker closes the offending connection, never panics, and other sessions are unaffected.

mod common;

use bytes::BytesMut;
use common::*;
use ferry_protocol::{Request, Response};
use ferry_testkit::{RawConn, TestServer};
use rand::{Rng, SeedableRng};

#[tokio::test]
async fn oversized_length_prefix_closes_the_connection_and_is_counted() {
    let s = TestServer::start_with(|c| {
        c.limits.max_body_bytes = 1024;
        c.limits.max_frame_bytes = 1024 + 65536;
    })
    .await;
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "evil").await.unwrap();
    // Announces 1 GiB; the broker must refuse before buffering anything.
    let mut frame = Vec::new();
    frame.extend_from_slice(&(1u32 << 30).to_le_bytes());
    frame.extend_from_slice(&0x0020u16.to_le_bytes());
    frame.extend_from_slice(&1u32.to_le_bytes());
    raw.send_bytes(&frame).await.unwrap();
    assert!(raw.closed_by_peer().await);
    let stats = s.broker().stats();
    assert_eq!(
        ferry_broker::stats::Stats::get(&stats.connections_closed_malformed),
        1
    );
}

#[tokio::test]
async fn malformed_payload_closes_only_that_connection() {
    let s = TestServer::start().await;
    let good = s.client("good").await;
    good.create_queue("q").await.unwrap();
    let (mut raw, _) = RawConn::connect(&s.addr_string(), "evil").await.unwrap();
    // A send frame whose payload is cut short: length says 6 + 3 bytes of garbage.
    let mut frame = Vec::new();
    frame.extend_from_slice(&9u32.to_le_bytes());
    frame.extend_from_slice(&0x0020u16.to_le_bytes());
    frame.extend_from_slice(&2u32.to_le_bytes());
    frame.extend_from_slice(&[0xff, 0xff, 0xff]);
    raw.send_bytes(&frame).await.unwrap();
    assert!(raw.closed_by_peer().await);
    good.send(msg(&["q"], "still fine", 5)).await.unwrap();
    assert_eq!(body(&take(&good, "q").await.unwrap()), "still fine");
    // The evil client's name is free again.
    let (_raw2, reply) = RawConn::connect(&s.addr_string(), "evil").await.unwrap();
    assert!(matches!(reply, Response::Connected(_)), "{reply:?}");
}

/// Valid request frames to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let reqs = [
        Request::CreateQueue {
            name: "q".into(),
            options: Default::default(),
        },
        Request::Send(msg(&["q"], "hello", 5)),
        Request::SendBatch(vec![msg(&["q"], "a", 1), msg(&["q"], "b", 9)]),
        Request::Ack { ids: vec![1, 2, 3] },
        Request::ListQueues,
    ];
    for (i, r) in reqs.iter().enumerate() {
        let mut b = BytesMut::new();
        r.encode(i as u32 + 10, &mut b);
        out.push(b.to_vec());
    }
    out
}

#[tokio::test]
async fn random_and_truncated_frames_never_break_the_broker() {
    let s = TestServer::start().await;
    let good = s.client("good").await;
    good.create_queue("q").await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xF3_22);
    let seeds = seeds();
    for round in 0..200 {
        let (mut raw, _) = RawConn::connect(&s.addr_string(), &format!("fuzz{round}"))
            .await
            .unwrap();
        let mut bytes = seeds[rng.gen_range(0..seeds.len())].clone();
        match round % 4 {
            0 => {
                // Flip random bytes (anywhere, header included).
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..bytes.len());
                    bytes[i] = rng.gen();
                }
            }
            1 => {
                // Truncate, then close the write side.
                let cut = rng.gen_range(0..bytes.len());
                bytes.truncate(cut);
            }
            2 => {
                // Pure noise.
                bytes = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
            }
            _ => {
                // A valid frame with garbage appended inside its declared length.
                let extra: Vec<u8> = (0..rng.gen_range(1..16)).map(|_| rng.gen()).collect();
                let len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) + extra.len() as u32;
                bytes[0..4].copy_from_slice(&len.to_le_bytes());
                bytes.extend_from_slice(&extra);
            }
        }
        let _ = raw.send_bytes(&bytes).await;
        drop(raw);
        if round % 20 == 0 {
            // Other sessions are unaffected throughout.
            good.ping().await.unwrap();
        }
    }
    good.send(msg(&["q"], "alive", 5)).await.unwrap();
    let mut found = false;
    while let Some(d) = take(&good, "q").await {
        if body(&d) == "alive" {
            found = true;
        }
    }
    assert!(found);
    s.shutdown().await;
}
