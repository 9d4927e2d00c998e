//! Several `ferry serve` nodes (the real binary, `cargo build -p ferry` first) over one
//! PostgreSQL started for the test: messages, long-poll wake-ups and `AlreadyOnline` across
//! nodes; a node killed with SIGKILL whose sessions and unsettled deliveries are freed after
//! the heartbeat timeout; a node frozen past the timeout that closes its sessions when it runs
//! again; the database stopped under load and started again.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::*;
use ferry_client::{Client, ClientError, ConnectOptions, SubscribeTopic};
use ferry_protocol::{AckMode, ErrorCode, Order, ReceiveMode};
use ferry_testkit::{BinaryServer, PgCluster};

/// Heartbeat timeout of the test nodes.
const NODE_TIMEOUT_MS: &str = "1000";
/// The heartbeat timeout of the database-outage test's nodes, and the outage, longer than it.
const OUTAGE_NODE_TIMEOUT_MS: &str = "3000";
const OUTAGE_MS: u64 = 3500;

/// One cluster for the tests that do not stop it (its watcher stops it when the process exits).
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn fresh_url() -> String {
    tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap()
}

/// Starts node `name` over `url`.
async fn node(url: &str, name: &str) -> BinaryServer {
    node_with_timeout(url, name, NODE_TIMEOUT_MS).await
}

/// A node whose peers take it for dead after `timeout_ms` of silence.
async fn node_with_timeout(url: &str, name: &str, timeout_ms: &str) -> BinaryServer {
    let args: Vec<String> = [
        "--store",
        url,
        "--node",
        name,
        "--node-timeout-ms",
        timeout_ms,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        BinaryServer::start(&args).expect("node starts")
    })
    .await
    .unwrap()
}

async fn connect(n: &BinaryServer, name: &str) -> Result<Client, ClientError> {
    Client::connect(&n.addr().to_string(), name).await
}

/// Connects as `name`, retrying while the name is still online somewhere (for up to `limit`).
async fn connect_when_free(n: &BinaryServer, name: &str, limit: Duration) -> Client {
    let deadline = Instant::now() + limit;
    loop {
        match connect(n, name).await {
            Ok(c) => return c,
            Err(ClientError::Server(e))
                if e.code == ErrorCode::AlreadyOnline && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{name} cannot connect: {e}"),
        }
    }
}

fn long_poll(q: &str, ack: AckMode, wait_ms: u32) -> ferry_client::Receive {
    from_queue(q, Order::Time, ReceiveMode::Take, ack, wait_ms)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_messages_wakeups_and_sessions() {
    let url = fresh_url().await;
    let (a, b, c) = (
        node(&url, "a").await,
        node(&url, "b").await,
        node(&url, "c").await,
    );
    let producer = connect(&a, "producer").await.unwrap();
    producer.create_queue("jobs").await.unwrap();

    // Sent through A, received through B.
    let id = producer.send(msg(&["jobs"], "hello", 5)).await.unwrap();
    let reader = connect(&b, "reader").await.unwrap();
    let d = take(&reader, "jobs").await.expect("B sees what A stored");
    assert_eq!((d.message.id, body(&d).as_str()), (id, "hello"));

    // A long-poll on C is woken by a send on A, long before its wait ends.
    let waiter = connect(&c, "waiter").await.unwrap();
    let poll = tokio::spawn(async move {
        let r = waiter
            .receive(long_poll("jobs", AckMode::Auto, 20_000))
            .await;
        (r, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent_at = Instant::now();
    producer.send(msg(&["jobs"], "wake up", 5)).await.unwrap();
    let (got, woke_at) = poll.await.unwrap();
    let latency = woke_at.duration_since(sent_at);
    let got = got.unwrap().expect("the long-poll returns the message");
    assert_eq!(body(&got), "wake up");
    eprintln!("cross-node wake-up: {latency:?} after the send");
    assert!(
        latency < Duration::from_secs(2),
        "woken {latency:?} after the send"
    );

    // One live session per name across nodes.
    let solo = connect(&a, "solo").await.unwrap();
    for other in [&b, &c] {
        expect_code(connect(other, "solo").await, ErrorCode::AlreadyOnline);
    }
    solo.disconnect().await.unwrap();
    let solo = connect_when_free(&b, "solo", Duration::from_secs(5)).await;
    expect_code(connect(&a, "solo").await, ErrorCode::AlreadyOnline);
    drop(solo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_sessions_and_deliveries_are_freed_after_the_timeout() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let mut b = node(&url, "b").await;
    let c = node(&url, "c").await;
    let producer = connect(&a, "producer").await.unwrap();
    producer.create_queue("work").await.unwrap();
    let mut sent = BTreeSet::new();
    for i in 0..20 {
        producer
            .send(msg(&["work"], &format!("m{i:02}"), 5))
            .await
            .unwrap();
        sent.insert(format!("m{i:02}"));
    }

    // The worker on B takes five with client ack, acknowledges two, holds three.
    let worker = connect(&b, "worker").await.unwrap();
    let mut held = BTreeSet::new();
    for i in 0..5 {
        let d = take_client_ack(&worker, "work").await.unwrap();
        if i < 2 {
            worker.ack(&[d.delivery_id]).await.unwrap();
            sent.remove(&body(&d));
        } else {
            held.insert(body(&d));
        }
    }
    b.kill9();
    let killed_at = Instant::now();

    // Until the timeout the name stays online; then C can have it.
    expect_code(connect(&c, "worker").await, ErrorCode::AlreadyOnline);
    let worker = connect_when_free(&c, "worker", Duration::from_secs(15)).await;
    eprintln!("worker online again after {:?}", killed_at.elapsed());

    // Every unacknowledged message comes through C, the held ones flagged redelivered.
    let mut got = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while got.len() < sent.len() && Instant::now() < deadline {
        let Some(d) = worker
            .receive(long_poll("work", AckMode::Client, 1000))
            .await
            .unwrap()
        else {
            continue;
        };
        let text = body(&d);
        assert_eq!(
            d.message.redelivered(),
            held.contains(&text),
            "{text}: redelivered iff B held it"
        );
        worker.ack(&[d.delivery_id]).await.unwrap();
        assert!(got.insert(text), "delivered once through C");
    }
    assert_eq!(
        got, sent,
        "every unacknowledged message, and nothing acknowledged"
    );
    assert!(held.is_subset(&got));
}

/// A node frozen past the timeout is taken for dead while its process lives. When it runs
/// again it must close the sessions it still had (the other nodes freed their names), so that a
/// client name is never live on two nodes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_taken_for_dead_while_alive_closes_its_sessions_when_it_runs_again() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    let old = connect(&a, "alice").await.unwrap();
    old.ping().await.unwrap();
    let pid = a.pid().expect("node a runs");
    signal(pid, "STOP");
    let new = connect_when_free(&b, "alice", Duration::from_secs(15)).await;
    signal(pid, "CONT");

    // A's next heartbeat tells it; then alice's old session must end.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match old.ping().await {
            Ok(()) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(()) => panic!("alice's session on A is still open though B holds the name"),
            Err(ClientError::Closed | ClientError::Io(_)) => break,
            Err(e) => panic!("expected the connection to close, got {e}"),
        }
    }
    new.ping().await.expect("the session on B goes on");
    expect_code(connect(&a, "alice").await, ErrorCode::AlreadyOnline);
    // A still serves everyone else.
    connect(&a, "bob").await.unwrap().ping().await.unwrap();
}

/// A durable subscription that is not shared has one consumer at a time across the nodes; a
/// shared one spreads over consumers on several nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_that_is_not_shared_has_one_consumer_across_nodes() {
    let url = fresh_url().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    let x = connect(&a, "x").await.unwrap();
    let y = connect(&b, "y").await.unwrap();
    x.create_topic("t").await.unwrap();
    let sub = x
        .subscribe_topic(SubscribeTopic::new("t").durable("solo"))
        .await
        .unwrap();
    expect_code(
        y.subscribe_topic(SubscribeTopic::new("t").durable("solo"))
            .await,
        ErrorCode::SubscriptionInUse,
    );
    expect_code(
        y.unsubscribe("t", "solo").await,
        ErrorCode::SubscriptionInUse,
    );
    sub.cancel().await;
    let sub = y
        .subscribe_topic(SubscribeTopic::new("t").durable("solo"))
        .await
        .expect("free once the consumer on the other node is gone");
    // A disconnect ends the consumer as well.
    drop(sub);
    y.disconnect().await.unwrap();
    let again = x
        .subscribe_topic(SubscribeTopic::new("t").durable("solo"))
        .await
        .expect("free once the session on the other node ended");
    again.cancel().await;

    let pooled = x
        .subscribe_topic(SubscribeTopic::new("t").durable("pool").shared())
        .await
        .unwrap();
    let z = connect(&b, "z").await.unwrap();
    let other = z
        .subscribe_topic(SubscribeTopic::new("t").durable("pool").shared())
        .await
        .expect("a shared subscription takes consumers on every node");
    pooled.cancel().await;
    other.cancel().await;
    x.unsubscribe("t", "pool").await.unwrap();

    // A shared non-durable subscription lives while a consumer on any node does.
    let on_a = x
        .subscribe_topic(SubscribeTopic::new("t").shared_as("crowd"))
        .await
        .unwrap();
    let on_b = z
        .subscribe_topic(SubscribeTopic::new("t").shared_as("crowd"))
        .await
        .unwrap();
    on_a.cancel().await;
    let names = |c: Client| async move {
        c.list_topics().await.unwrap()[0]
            .subscriptions
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(x.clone()).await, vec!["crowd", "solo"]);
    on_b.cancel().await;
    assert_eq!(
        names(x.clone()).await,
        vec!["solo"],
        "gone with its last consumer"
    );
}

/// Sends `SIGSTOP` or `SIGCONT` to a process.
fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_outage_under_load_fails_sends_then_nodes_recover_losing_nothing() {
    // A cluster of its own: this test stops it.
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    let url = pg.url();
    // The load keeps both nodes busy: a 1 s timeout would let a late heartbeat on a loaded
    // machine look like a dead node before the outage even starts.
    let a = node_with_timeout(&url, "a", OUTAGE_NODE_TIMEOUT_MS).await;
    let b = node_with_timeout(&url, "b", OUTAGE_NODE_TIMEOUT_MS).await;
    let producer = connect(&a, "producer").await.unwrap();
    producer.create_queue("load").await.unwrap();

    let stop = stop_flag();
    let load = {
        let producer = producer.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut acknowledged, mut unavailable, mut n) = (Vec::new(), 0u32, 0u32);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                match producer.send(msg(&["load"], &format!("x{n}"), 5)).await {
                    Ok(_) => acknowledged.push(format!("x{n}")),
                    Err(ClientError::Server(e)) if e.code == ErrorCode::StoreUnavailable => {
                        unavailable += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => panic!("a send failed with {e}, not StoreUnavailable"),
                }
            }
            (acknowledged, unavailable)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop().unwrap();
        // Longer than the heartbeat timeout: the nodes must not take each other for dead.
        std::thread::sleep(Duration::from_millis(OUTAGE_MS));
        pg.start_again().unwrap();
        pg
    })
    .await
    .unwrap();
    // Let the nodes recover by themselves and take load again.
    let recovered = Instant::now();
    loop {
        match producer.send(msg(&["load"], "probe", 5)).await {
            Ok(_) => break,
            Err(_) if recovered.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("node A did not recover: {e}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acknowledged, unavailable) = load.await.unwrap();
    eprintln!(
        "{} sends acknowledged, {unavailable} refused with StoreUnavailable",
        acknowledged.len()
    );
    assert!(
        unavailable > 0,
        "sends during the outage fail with StoreUnavailable"
    );

    // Node B drains everything acknowledged (its pool and listener reconnected too).
    let consumer = connect_when_free(&b, "consumer", Duration::from_secs(10)).await;
    let mut got = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match consumer.receive(long_poll("load", AckMode::Auto, 0)).await {
            Ok(Some(d)) => {
                got.insert(body(&d));
            }
            Ok(None) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("receive on B while recovering: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("node B did not recover: {e}"),
        }
    }
    for m in &acknowledged {
        assert!(got.contains(m), "acknowledged {m} was lost");
    }

    // Wake-ups across nodes work again once B's listener has reconnected (it backs off while
    // the database is away): a long poll on B is woken by a send on A well before its fallback
    // re-check. Tried a few times, so a slow reconnection on a loaded machine is not a failure.
    let mut woken_promptly = false;
    for attempt in 0..10 {
        let waiter = consumer.clone();
        let poll = tokio::spawn(async move {
            let r = waiter
                .receive(long_poll("load", AckMode::Auto, 20_000))
                .await;
            (r, Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent_at = Instant::now();
        let text = format!("after{attempt}");
        producer.send(msg(&["load"], &text, 5)).await.unwrap();
        let (d, woke_at) = poll.await.unwrap();
        assert_eq!(body(&d.unwrap().unwrap()), text);
        if woke_at.duration_since(sent_at) < Duration::from_secs(2) {
            woken_promptly = true;
            break;
        }
    }
    assert!(woken_promptly, "B's change listener never reconnected");
    drop((a, b));
    drop(pg);
}

/// A flag that ends the load task.
fn stop_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false))
}

/// Several addresses: a client fails over to the next node when its node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_fail_over_to_the_next_node() {
    let url = fresh_url().await;
    let mut a = node(&url, "a").await;
    let b = node(&url, "b").await;
    let opts = ConnectOptions::with_addrs(&[a.addr().to_string(), b.addr().to_string()], "roamer");
    let client = Client::connect_with(opts.clone()).await.unwrap();
    assert_eq!(client.server_addr(), a.addr().to_string());
    client.create_queue("q").await.unwrap();
    client.send(msg(&["q"], "before", 5)).await.unwrap();
    a.kill9();
    assert!(matches!(
        client.ping().await,
        Err(ClientError::Closed | ClientError::Io(_))
    ));
    // The name is still held by the dead node until the heartbeat timeout.
    let deadline = Instant::now() + Duration::from_secs(15);
    let client = loop {
        match Client::connect_with(opts.clone()).await {
            Ok(c) => break c,
            Err(ClientError::Server(e))
                if e.code == ErrorCode::AlreadyOnline && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no failover: {e}"),
        }
    };
    assert_eq!(client.server_addr(), b.addr().to_string());
    assert_eq!(body(&take(&client, "q").await.unwrap()), "before");
}
