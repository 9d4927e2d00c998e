//! Several node addresses: connect tries them in order, skips nodes that are down, full or
//! without their store, stops at a refusal every node would give, and reconnecting with the
//! same options after a node loss lands on the next node that answers.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod fake;

use fake::*;
use ferry_client::{Client, ClientError, ConnectOptions, ErrorCode, Limits};

/// An address nobody listens on.
fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_skips_unreachable_full_and_storeless_nodes() {
    let (full, full_server) = serve(|mut peer| async move {
        let (id, _) = peer.expect().await;
        peer.write(id, error(ErrorCode::ServerFull, "full")).await;
    })
    .await;
    let (storeless, storeless_server) = serve(|mut peer| async move {
        let (id, _) = peer.expect().await;
        peer.write(id, error(ErrorCode::StoreUnavailable, "no database"))
            .await;
    })
    .await;
    let (good, good_server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.drain().await;
    })
    .await;
    let opts = ConnectOptions::with_addrs(&[dead_addr(), full, storeless, good.clone()], "app");
    let client = within(Client::connect_with(opts)).await.unwrap();
    assert_eq!(client.server_addr(), good);
    within(full_server).await.unwrap();
    within(storeless_server).await.unwrap();
    drop(client);
    within(good_server).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_every_node_would_give_is_not_retried_elsewhere() {
    let (twin, server) = serve(|mut peer| async move {
        let (id, _) = peer.expect().await;
        peer.write(id, error(ErrorCode::AlreadyOnline, "online elsewhere"))
            .await;
    })
    .await;
    let (never, _never_server) = serve(|mut peer| async move {
        peer.read().await;
        panic!("the second node must not be tried after AlreadyOnline");
    })
    .await;
    let opts = ConnectOptions::new(format!("{twin},{never}"), "twin");
    let e = within(Client::connect_with(opts)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::AlreadyOnline));
    within(server).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_nodes_down_gives_the_last_error_and_reconnect_fails_over() {
    let opts = ConnectOptions::with_addrs(&[dead_addr(), dead_addr()], "app");
    let e = within(Client::connect_with(opts)).await.unwrap_err();
    assert!(matches!(e, ClientError::Io(_)), "{e:?}");

    // Node A serves one session then goes away; the application reconnects with the same
    // options and lands on node B.
    let (a, a_server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
    })
    .await;
    let (b, b_server) = serve(|mut peer| async move {
        peer.handshake(Limits::DEFAULT).await;
        peer.drain().await;
    })
    .await;
    let opts = ConnectOptions::with_addrs(&[a.clone(), b.clone()], "app");
    let client = within(Client::connect_with(opts.clone())).await.unwrap();
    assert_eq!(client.server_addr(), a);
    within(a_server).await.unwrap();
    let e = within(client.ping()).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Closed | ClientError::Io(_)),
        "{e:?}"
    );
    let client = within(Client::connect_with(opts)).await.unwrap();
    assert_eq!(client.server_addr(), b);
    drop(client);
    within(b_server).await.unwrap();
}
