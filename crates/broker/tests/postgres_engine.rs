//! The broker on the PostgreSQL engine (`store = postgres://...`), through the real
//! `Broker::start` path, against a PostgreSQL started for this test ([`PgCluster`]).

mod common;

use common::*;
use ferry_broker::StoreSetting;
use ferry_protocol::ErrorCode;
use ferry_testkit::{PgCluster, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_serves_from_postgres_and_keeps_messages_across_restarts() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    let url = pg.url();
    let use_pg = |c: &mut ferry_broker::BrokerConfig| {
        c.store = StoreSetting::Postgres(url.clone());
        c.store_pool_size = 4;
    };

    let s = TestServer::start_with(use_pg).await;
    let alice = s.client("alice").await;
    let bob = s.client("bob").await;
    alice.create_queue("orders").await.unwrap();
    expect_code(alice.create_queue("orders").await, ErrorCode::QueueExists);
    for (b, p) in [("low", 1), ("high", 9), ("mid", 5)] {
        alice.send(msg(&["orders"], b, p)).await.unwrap();
    }
    let d = take(&bob, "orders").await.unwrap();
    assert_eq!(body(&d), "high");
    assert_eq!(d.message.sender, "alice");
    // Time order: the oldest left.
    let d = take_client_ack(&bob, "orders").await.unwrap();
    assert_eq!(body(&d), "low");
    bob.ack(&[d.delivery_id]).await.unwrap();
    let qs = alice.list_queues().await.unwrap();
    assert_eq!((qs[0].ready, qs[0].in_flight), (1, 0));
    drop((alice, bob));
    s.shutdown().await;

    // A new broker over the same database finds what the first one stored.
    let s = TestServer::start_with(use_pg).await;
    let carol = s.client("carol").await;
    let d = take(&carol, "orders").await.unwrap();
    assert_eq!(body(&d), "mid");
    assert!(take(&carol, "orders").await.is_none());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_on_postgres_push_and_wait_for_matching_messages_only() {
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    for scenario in 0..2 {
        let url = tokio::task::block_in_place(|| pg.fresh_database());
        let s = TestServer::start_with(|c| {
            c.store = StoreSetting::Postgres(url);
            c.store_pool_size = 4;
        })
        .await;
        match scenario {
            0 => selectors::subscription_pushes_only_matching_messages(s).await,
            _ => selectors::long_poll_waits_past_non_matching_arrivals(s).await,
        }
    }
}
