//! PostgreSQL-engine tests beyond the conformance suite: migrations (idempotent, racing opens),
//! concurrency through the batcher and `SKIP LOCKED`, message rows removed with their last
//! queue row, leases of a previous run returned, and `Unavailable` then recovery when the
//! database stops and starts again.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ferry_store::conformance::{lease, msg, msg_prio, msg_to, setup, take};
use ferry_store::{PostgresConfig, PostgresStore, Registration, Store, StoreError};
use ferry_testkit::PgCluster;

fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

async fn fresh_url() -> String {
    tokio::task::spawn_blocking(|| cluster().fresh_database())
        .await
        .unwrap()
}

async fn open(url: &str) -> Arc<dyn Store> {
    PostgresStore::open(PostgresConfig::new(url)).await.unwrap() as Arc<dyn Store>
}

/// Opens the store at `url` as node `node`.
async fn open_as(url: &str, node: &str) -> Arc<PostgresStore> {
    let mut cfg = PostgresConfig::new(url);
    cfg.node = node.into();
    PostgresStore::open(cfg).await.unwrap()
}

fn db_name(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_idempotent_and_safe_when_opens_race() {
    let url = fresh_url().await;
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PostgresStore::open(PostgresConfig::new(url)).await })
        })
        .collect();
    for o in opens {
        o.await.unwrap().expect("every racing open succeeds");
    }
    let again = open(&url).await;
    again.queues().create_queue("q").await.unwrap();
    let versions = cluster()
        .psql(
            &db_name(&url),
            "SELECT count(*), max(version) FROM ferry_schema_version",
        )
        .unwrap();
    let migrations = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/postgres/migrations"
    ))
    .unwrap()
    .count();
    assert_eq!(
        versions.trim(),
        format!("{migrations}|{migrations}"),
        "each migration applied exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_and_takes_deliver_each_message_once() {
    let url = fresh_url().await;
    let store = open(&url).await;
    setup(&store, &["p", "c"], &["q", "r"]).await;
    let sends: Vec<_> = (0..200)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .queues()
                    .send(msg(&["q", "r"], "p", &format!("{i}")))
                    .await
            })
        })
        .collect();
    let mut ids = HashSet::new();
    for s in sends {
        assert!(ids.insert(s.await.unwrap().unwrap()), "ids are unique");
    }
    let takers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let d = store.queues().receive(&take("q", "c"), 7).await.unwrap();
                    if d.is_empty() {
                        return got;
                    }
                    got.extend(d.into_iter().map(|d| d.message.id));
                }
            })
        })
        .collect();
    let mut taken = Vec::new();
    for t in takers {
        taken.extend(t.await.unwrap());
    }
    assert_eq!(taken.len(), 200, "every message taken once");
    assert_eq!(taken.iter().copied().collect::<HashSet<_>>(), ids);
    let db = db_name(&url);
    assert_eq!(
        cluster()
            .psql(&db, "SELECT count(*) FROM messages")
            .unwrap()
            .trim(),
        "200",
        "messages still on queue r are kept"
    );
    // Settle the copies on r through client acks, concurrently.
    let d = store.queues().receive(&lease("r", "c"), 500).await.unwrap();
    let acks: Vec<_> = d
        .chunks(10)
        .map(|chunk| {
            let store = store.clone();
            let ids: Vec<_> = chunk.iter().map(|d| d.delivery_id).collect();
            tokio::spawn(async move { store.queues().ack(1, &ids).await })
        })
        .collect();
    for a in acks {
        a.await.unwrap().unwrap();
    }
    assert_eq!(
        cluster()
            .psql(&db, "SELECT count(*) FROM messages")
            .unwrap()
            .trim(),
        "0",
        "a message row goes with its last queue row"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_client_ack_takes_share_the_queue_in_order() {
    // Many sessions of several clients take with client ack at once, so their receives are
    // served together: each message goes to exactly one of them, an addressed message only to
    // its client, each answer is in priority order, and every delivery is settled by the
    // session it was leased to.
    let url = fresh_url().await;
    let store = open(&url).await;
    let clients = ["c0", "c1", "c2", "c3"];
    setup(&store, &["p", "c0", "c1", "c2", "c3"], &["q"]).await;
    let mut batch = Vec::new();
    for i in 0..600u32 {
        let body = format!("{i}");
        batch.push(match i % 10 {
            0 => msg_to(&["q"], "p", clients[(i / 10 % 4) as usize], &body),
            _ => msg_prio(&["q"], "p", &body, (i % 7 + 1) as u8),
        });
    }
    let mut ids = HashSet::new();
    for r in store.queues().send_batch(batch).await {
        assert!(ids.insert(r.unwrap()));
    }
    let takers: Vec<_> = (0..12u64)
        .map(|session| {
            let store = store.clone();
            let client = clients[(session % 4) as usize];
            tokio::spawn(async move {
                let mut spec = lease("q", client);
                spec.session = 100 + session;
                let mut got = Vec::new();
                loop {
                    let ds = store.queues().receive(&spec, 9).await.unwrap();
                    if ds.is_empty() {
                        return (session, client, got);
                    }
                    assert!(ds.len() <= 9);
                    let keys: Vec<_> = ds
                        .iter()
                        .map(|d| (std::cmp::Reverse(d.message.priority), d.message.id))
                        .collect();
                    let mut sorted = keys.clone();
                    sorted.sort();
                    assert_eq!(keys, sorted, "one answer is in priority order");
                    let delivery_ids: Vec<u64> = ds.iter().map(|d| d.delivery_id).collect();
                    for d in &ds {
                        if let Some(r) = &d.message.receiver {
                            assert_eq!(r, client, "addressed to another client");
                        }
                        assert_eq!(d.message.queue, "q");
                        assert_eq!(d.message.sender, "p");
                    }
                    got.extend(ds.iter().map(|d| d.message.id));
                    store
                        .queues()
                        .ack(100 + session, &delivery_ids)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let mut taken = Vec::new();
    for t in takers {
        let (_, _, got) = t.await.unwrap();
        taken.extend(got);
    }
    assert_eq!(taken.len(), 600, "every message delivered once");
    assert_eq!(taken.into_iter().collect::<HashSet<_>>(), ids);
    let db = db_name(&url);
    assert_eq!(
        cluster()
            .psql(&db, "SELECT count(*) FROM messages")
            .unwrap()
            .trim(),
        "0",
        "acked messages are gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopening_returns_the_previous_runs_leases() {
    let url = fresh_url().await;
    let store = open(&url).await;
    setup(&store, &["p", "c"], &["q"]).await;
    store.queues().send(msg(&["q"], "p", "x")).await.unwrap();
    let d = store.queues().receive(&lease("q", "c"), 1).await.unwrap();
    drop(store);
    let store = open(&url).await;
    assert_eq!(
        store.queues().ack(1, &[d[0].delivery_id]).await,
        Err(StoreError::DeliveriesNotFound(vec![d[0].delivery_id])),
        "a lease of the previous run is gone"
    );
    let d = store.queues().receive(&take("q", "c"), 1).await.unwrap();
    assert!(d[0].message.redelivered());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_while_database_is_down_then_recovers_losing_nothing() {
    // A cluster of its own: this test stops it.
    let pg = tokio::task::spawn_blocking(PgCluster::start).await.unwrap();
    let store = open(&pg.url()).await;
    setup(&store, &["p", "c"], &["q"]).await;
    let mut acknowledged = Vec::new();
    for i in 0..20 {
        acknowledged.push(
            store
                .queues()
                .send(msg(&["q"], "p", &format!("{i}")))
                .await
                .unwrap(),
        );
    }
    pg.stop().unwrap();
    match store.queues().send(msg(&["q"], "p", "down")).await {
        Err(StoreError::Unavailable(m)) => assert!(!m.is_empty()),
        other => panic!("a send with the database down is Unavailable, got {other:?}"),
    }
    assert!(matches!(
        store.queues().receive(&take("q", "c"), 1).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.queues().list_queues().await,
        Err(StoreError::Unavailable(_))
    ));
    pg.start_again().unwrap();
    // The pool reconnects by itself; the first calls may still hit dead connections.
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        match store.queues().send(msg(&["q"], "p", "after")).await {
            Ok(id) => break id,
            Err(StoreError::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no recovery: {e}"),
        }
    };
    acknowledged.push(after);
    let mut got = Vec::new();
    loop {
        let d = store.queues().receive(&take("q", "c"), 100).await.unwrap();
        if d.is_empty() {
            break;
        }
        got.extend(d.into_iter().map(|d| d.message.id));
    }
    for id in &acknowledged {
        assert!(got.contains(id), "acknowledged message {id} was lost");
    }
}

/// Names in the `nodes` table, read directly.
async fn node_rows(url: &str) -> Vec<String> {
    let (db, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    let rows = db
        .query("SELECT name FROM nodes ORDER BY name", &[])
        .await
        .unwrap();
    drop(db);
    let _ = task.await;
    rows.iter().map(|r| r.get::<_, String>(0)).collect()
}

/// A node whose heartbeat was late enough for another to reap it learns so from its next
/// heartbeat, once; its claims are gone meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_taken_for_dead_hears_it_from_its_next_heartbeat() {
    let url = fresh_url().await;
    let a = open_as(&url, "a").await;
    let b = open_as(&url, "b").await;
    assert!(
        !a.sessions()
            .heartbeat(60_000)
            .await
            .unwrap()
            .was_taken_for_dead
    );
    a.sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .unwrap();
    // a stays silent; b takes it for dead once the timeout has passed.
    // b's first heartbeat comes after a timeout of a's silence, but b has only just reached
    // the database itself (as after an outage): it judges nobody yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.sessions().heartbeat(100).await.unwrap();
    assert!(
        matches!(
            b.sessions()
                .claim_session("alice", 7, Registration::Permanent)
                .await,
            Err(StoreError::AlreadyOnline(_))
        ),
        "a node just in contact judges nobody yet"
    );
    common::outlive(b.as_ref(), 100).await;
    b.sessions()
        .claim_session("alice", 7, Registration::Permanent)
        .await
        .expect("a's claim on alice ended with a");
    let back = a.sessions().heartbeat(60_000).await.unwrap();
    assert!(
        back.was_taken_for_dead,
        "a must learn it was taken for dead"
    );
    assert!(
        !a.sessions()
            .heartbeat(60_000)
            .await
            .unwrap()
            .was_taken_for_dead,
        "said once, by the first heartbeat after it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_leaves_frees_its_sessions_and_its_nodes_row() {
    let url = fresh_url().await;
    let a = open_as(&url, "a").await;
    let b = open_as(&url, "b").await;
    a.sessions().heartbeat(60_000).await.unwrap();
    b.sessions().heartbeat(60_000).await.unwrap();
    a.sessions()
        .claim_session("alice", 1, Registration::Permanent)
        .await
        .unwrap();
    assert_eq!(node_rows(&url).await, vec!["a", "b"]);
    assert!(matches!(
        b.sessions()
            .claim_session("alice", 7, Registration::Permanent)
            .await,
        Err(StoreError::AlreadyOnline(_))
    ));

    a.sessions().leave().await.unwrap();
    assert_eq!(node_rows(&url).await, vec!["b"], "a's row is gone at once");
    b.sessions()
        .claim_session("alice", 7, Registration::Permanent)
        .await
        .expect("the name is free without waiting for a's heartbeat to time out");
}

/// A delivery that returns because its node died is checked against its queue's maximum
/// delivery count like any other return: over it, it goes to the dead-letter queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_freed_from_a_dead_node_are_dead_lettered_over_the_limit() {
    let url = fresh_url().await;
    let a = open_as(&url, "a").await as Arc<dyn Store>;
    let b = open_as(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["p", "c"], &["dead"]).await;
    let options = ferry_protocol::QueueOptions {
        max_deliveries: 1,
        dead_letter_queue: Some("dead".into()),
        expiry_queue: None,
    };
    a.queues()
        .create_queue_with("work", &options)
        .await
        .unwrap();
    a.queues()
        .send(msg(&["work"], "p", "poison"))
        .await
        .unwrap();
    a.sessions()
        .claim_session("c", 1, Registration::Permanent)
        .await
        .unwrap();
    let got = a.queues().receive(&lease("work", "c"), 1).await.unwrap();
    assert_eq!(got.len(), 1, "leased once: its one allowed delivery");
    // Node a stops beating; b takes it for dead once the timeout has passed.
    drop(a);
    let queues = common::outlive(b.as_ref(), 100).await;
    assert!(queues.contains(&"dead".to_string()), "{queues:?}");
    assert!(b
        .queues()
        .receive(&take("work", "c"), 1)
        .await
        .unwrap()
        .is_empty());
    let dead = b.queues().receive(&take("dead", "c"), 1).await.unwrap();
    assert_eq!(dead.len(), 1, "the message is on the dead-letter queue");
    assert_eq!(dead[0].message.body.as_ref(), b"poison");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_client_ack_takes_keep_their_byte_limits() {
    // Client-ack takes at once are served together; each still gets no more bodies than its
    // byte limit (or one message), and every message goes to exactly one of them.
    let url = fresh_url().await;
    let store = open(&url).await;
    setup(&store, &["p", "c"], &["q"]).await;
    let batch = (0..300usize)
        .map(|i| msg(&["q"], "p", &"x".repeat(100 + i % 10 * 100)))
        .collect();
    for r in store.queues().send_batch(batch).await {
        r.unwrap();
    }
    const LIMIT: u64 = 2500;
    let takers: Vec<_> = (0..8u64)
        .map(|session| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut spec = lease("q", "c");
                spec.session = 100 + session;
                spec.max_bytes = Some(LIMIT);
                let mut got = Vec::new();
                loop {
                    let ds = store.queues().receive(&spec, 50).await.unwrap();
                    if ds.is_empty() {
                        return got;
                    }
                    let bytes: usize = ds.iter().map(|d| d.message.body.len()).sum();
                    assert!(
                        ds.len() == 1 || bytes as u64 <= LIMIT,
                        "{} messages of {bytes} bytes under a limit of {LIMIT}",
                        ds.len()
                    );
                    let delivery_ids: Vec<u64> = ds.iter().map(|d| d.delivery_id).collect();
                    got.extend(ds.iter().map(|d| d.message.id));
                    store
                        .queues()
                        .ack(100 + session, &delivery_ids)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let mut taken = HashSet::new();
    for t in takers {
        for id in t.await.unwrap() {
            assert!(taken.insert(id), "message {id} delivered twice");
        }
    }
    assert_eq!(taken.len(), 300, "every message delivered once");
}
