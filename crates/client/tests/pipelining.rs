//! Many concurrent calls on one connection: pipelined, batched into few writes, and matched to
//! their callers by request id whatever order the replies come in.

mod fake;

use std::collections::HashSet;

use fake::*;
use ferry_client::{Client, Limits, OutgoingMessage};
use ferry_protocol::{Request, Response};

const N: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_sends_are_pipelined_and_matched_out_of_order() {
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        // Read every send before answering any: this only finishes if the client keeps all of
        // them in flight at once.
        // Concurrent sends may arrive coalesced into batch requests: (request id, bodies).
        let mut got: Vec<(u32, Vec<u64>, bool)> = Vec::new();
        let body =
            |m: &OutgoingMessage| -> u64 { std::str::from_utf8(&m.body).unwrap().parse().unwrap() };
        while got.iter().map(|g| g.1.len()).sum::<usize>() < N as usize {
            let (id, req) = peer.expect().await;
            match req {
                Request::Send(m) => got.push((id, vec![body(&m)], false)),
                Request::SendBatch(items) => got.push((id, items.iter().map(body).collect(), true)),
                other => panic!("expected a send, got {other:?}"),
            }
        }
        let ids: HashSet<u32> = got.iter().map(|g| g.0).collect();
        assert_eq!(ids.len(), got.len(), "request ids are unique");
        assert!(!ids.contains(&0), "request id 0 is reserved for pushes");
        // Answer in a scrambled order, in a few writes.
        got.sort_by_key(|(id, _, _)| (u64::from(*id) * 7919) % N);
        for chunk in got.chunks(128) {
            let frames: Vec<_> = chunk
                .iter()
                .map(|(id, ns, batch)| {
                    let reply = if *batch {
                        Response::BatchSent(ns.iter().map(|n| Ok(n * 10)).collect())
                    } else {
                        Response::Sent { id: ns[0] * 10 }
                    };
                    (*id, reply)
                })
                .collect();
            peer.write_all(&frames).await;
        }
        peer.drain().await;
    })
    .await;
    let client = within(Client::connect(&addr, "pipeliner")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..N {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            (i, c.send(OutgoingMessage::new("q", i.to_string())).await)
        }));
    }
    for t in tasks {
        let (i, res) = within(t).await.unwrap();
        assert_eq!(
            res.unwrap(),
            i * 10,
            "reply of send {i} went to the wrong caller"
        );
    }
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn concurrent_requests_are_written_in_batches() {
    // On this single-threaded runtime every spawned call queues its frame before the writer
    // task runs again, so the writer must send them together, not one write per frame.
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (reads_before, frames_before) = (peer.reads, peer.frames);
        let mut ids = Vec::new();
        while ids.len() < 500 {
            let (id, req) = peer.expect().await;
            assert_eq!(req, Request::Ping);
            ids.push(id);
        }
        let frames: Vec<_> = ids.iter().map(|id| (*id, Response::Pong)).collect();
        peer.write_all(&frames).await;
        let reads = peer.reads - reads_before;
        let frames = peer.frames - frames_before;
        peer.drain().await;
        (reads, frames)
    })
    .await;
    let client = within(Client::connect(&addr, "batcher")).await.unwrap();
    let tasks: Vec<_> = (0..500)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.ping().await })
        })
        .collect();
    for t in tasks {
        within(t).await.unwrap().unwrap();
    }
    drop(client);
    let (reads, frames) = within(server).await.unwrap();
    assert_eq!(frames, 500);
    assert!(
        reads <= 10,
        "500 pings took {reads} reads: frames were not batched"
    );
}

#[tokio::test]
async fn a_slow_reply_does_not_hold_up_later_ones() {
    // A long-poll receive answered last does not block the pings sent after it.
    let (addr, server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        let (recv_id, req) = peer.expect().await;
        assert!(matches!(req, Request::Receive(_)));
        for _ in 0..3 {
            peer.answer_ping().await;
        }
        peer.write(recv_id, Response::Received(Some(delivery(0, 9))))
            .await;
        peer.drain().await;
    })
    .await;
    let client = within(Client::connect(&addr, "poller")).await.unwrap();
    let c = client.clone();
    let receive = tokio::spawn(async move {
        c.receive(ferry_client::Receive {
            source: ferry_client::Source::Queue("q".into()),
            order: ferry_client::Order::Time,
            mode: ferry_client::ReceiveMode::Take,
            ack: ferry_client::AckMode::Auto,
            wait_ms: 60_000,
            selector: String::new(),
        })
        .await
    });
    tokio::task::yield_now().await;
    for _ in 0..3 {
        within(client.ping()).await.unwrap();
    }
    let got = within(receive).await.unwrap().unwrap().unwrap();
    assert_eq!(got.message.id, 9);
    drop(client);
    within(server).await.unwrap();
}

#[tokio::test]
async fn concurrent_sends_are_coalesced_into_batches_with_results_split_per_caller() {
    // On this single-threaded runtime all 300 sends queue before the writer runs: they must go
    // out as batch requests (in order, within max_batch), and each caller gets its own item's
    // result, including an error for one of them.
    let limits = Limits {
        max_batch: 100,
        ..Limits::DEFAULT
    };
    let (addr, server) = serve(move |mut peer| async move {
        peer.handshake(limits).await;
        let mut bodies = Vec::new();
        let mut requests = 0;
        while bodies.len() < 300 {
            let (id, req) = peer.expect().await;
            requests += 1;
            let Request::SendBatch(items) = req else {
                panic!("expected a batch, got {req:?}")
            };
            assert!(items.len() <= 100, "a batch over max_batch");
            let results = items
                .iter()
                .map(|m| {
                    let n: u64 = std::str::from_utf8(&m.body).unwrap().parse().unwrap();
                    bodies.push(n);
                    if n == 42 {
                        Err(ferry_client::ErrorReply::new(
                            ferry_client::ErrorCode::QueueNotFound,
                            "queue 'q' does not exist",
                        ))
                    } else {
                        Ok(n + 1000)
                    }
                })
                .collect();
            peer.write(id, Response::BatchSent(results)).await;
        }
        peer.drain().await;
        (bodies, requests)
    })
    .await;
    let client = within(Client::connect(&addr, "coalescer")).await.unwrap();
    let tasks: Vec<_> = (0..300u64)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { (i, c.send(OutgoingMessage::new("q", i.to_string())).await) })
        })
        .collect();
    for t in tasks {
        let (i, res) = within(t).await.unwrap();
        match res {
            Ok(id) => assert_eq!(id, i + 1000, "send {i} got another caller's result"),
            Err(e) => {
                assert_eq!(i, 42, "only send 42 fails: {e}");
                assert_eq!(e.code(), Some(ferry_client::ErrorCode::QueueNotFound));
            }
        }
    }
    drop(client);
    let (bodies, requests) = within(server).await.unwrap();
    assert_eq!(
        bodies,
        (0..300).collect::<Vec<_>>(),
        "sends keep their order"
    );
    assert_eq!(requests, 3, "300 queued sends in batches of at most 100");
}
