//! PostgreSQL-engine tests of topics beyond the conformance suite: several nodes over one
//! database (a subscription made on one node gets what another publishes, and its waiters are
//! told), non-durable subscriptions dropped when their owner's node leaves or dies, publishes
//! racing unsubscribes without leaving rows behind, and non-persistent transactions.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ferry_protocol::{PropertyValue, QueueOptions, SubscriptionOptions};
use ferry_store::conformance::{bodies, lease, msg, setup, take};
use ferry_store::{NewMessage, PostgresConfig, PostgresStore, Registration, Store};
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

async fn open_node(url: &str, node: &str) -> Arc<PostgresStore> {
    let mut cfg = PostgresConfig::new(url);
    cfg.node = node.into();
    cfg.pool_size = 4;
    PostgresStore::open(cfg).await.unwrap()
}

fn db_name(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_owned()
}

fn psql(url: &str, sql: &str) -> String {
    cluster()
        .psql(&db_name(url), sql)
        .unwrap()
        .trim()
        .to_owned()
}

fn publish(topic: &str, sender: &str, body: &str) -> NewMessage {
    let mut m = msg(&[], sender, body);
    m.topic = Some(topic.into());
    m
}

fn options(durable: bool, selector: &str) -> SubscriptionOptions {
    SubscriptionOptions {
        durable,
        shared: false,
        selector: selector.into(),
        queue: QueueOptions::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_made_on_one_node_gets_what_another_publishes() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    let b = open_node(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    // Node a publishes once before b subscribes, so anything it might have kept about the
    // topic's subscriptions would be stale afterwards.
    a.queues().send(publish("t", "p", "before")).await.unwrap();
    let mut changes = a.sessions().subscribe_changes().unwrap();
    b.topics()
        .subscribe_topic("t", "s", &options(true, "n > 1"), "c")
        .await
        .unwrap();
    for n in [1, 2] {
        let mut m = publish("t", "p", &format!("n{n}"));
        m.properties = vec![("n".into(), PropertyValue::Int(n))].into();
        b.queues().send(m).await.unwrap();
    }
    let heard = tokio::time::timeout(Duration::from_secs(10), changes.recv())
        .await
        .expect("node a hears of the publish")
        .unwrap();
    assert_eq!(heard, vec!["t:s".to_owned()]);
    let mut m = publish("t", "p", "n3");
    m.properties = vec![("n".into(), PropertyValue::Int(3))].into();
    a.queues().send(m).await.unwrap();
    let got = a.queues().receive(&take("t:s", "c"), 10).await.unwrap();
    assert_eq!(bodies(&got), vec!["n2", "n3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_durable_subscriptions_go_when_their_owner_node_leaves() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await;
    let b = open_node(&url, "b").await;
    let (sa, sb) = (a.clone() as Arc<dyn Store>, b.clone() as Arc<dyn Store>);
    setup(&sa, &["p"], &[]).await;
    sa.topics().create_topic("t").await.unwrap();
    sa.sessions()
        .claim_session("c", 1, Registration::Permanent)
        .await
        .unwrap();
    sb.sessions()
        .claim_session("d", 1, Registration::Permanent)
        .await
        .unwrap();
    sa.topics()
        .subscribe_topic("t", "~c.1", &options(false, ""), "c")
        .await
        .unwrap();
    sa.topics()
        .subscribe_topic("t", "keep", &options(true, ""), "c")
        .await
        .unwrap();
    sb.topics()
        .subscribe_topic("t", "~d.1", &options(false, ""), "d")
        .await
        .unwrap();
    sa.queues().send(publish("t", "p", "x")).await.unwrap();
    let leased = sa.queues().receive(&lease("t:~c.1", "c"), 1).await.unwrap();
    assert_eq!(leased.len(), 1);
    sa.sessions().leave().await.unwrap();
    let subs: Vec<String> = sb.topics().list_topics().await.unwrap()[0]
        .subscriptions
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(subs, vec!["keep", "~d.1"], "c's non-durable one went");
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM message_queue mq \
             WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = mq.queue_id)"
        ),
        "0",
        "its messages went with it"
    );
    // The message stays on the other two subscriptions.
    assert_eq!(
        bodies(&sb.queues().receive(&take("t:~d.1", "d"), 10).await.unwrap()),
        vec!["x"]
    );
    assert_eq!(
        bodies(&sb.queues().receive(&take("t:keep", "d"), 10).await.unwrap()),
        vec!["x"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_durable_subscriptions_go_when_their_owner_node_dies() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    let b = open_node(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["p"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    a.sessions()
        .claim_session("c", 1, Registration::Permanent)
        .await
        .unwrap();
    a.topics()
        .subscribe_topic("t", "~c.1", &options(false, ""), "c")
        .await
        .unwrap();
    b.sessions()
        .claim_session("d", 1, Registration::Permanent)
        .await
        .unwrap();
    b.topics()
        .subscribe_topic("t", "~d.1", &options(false, ""), "d")
        .await
        .unwrap();
    // Node a stops beating; b takes it for dead once the timeout has passed.
    drop(a);
    common::outlive(b.as_ref(), 100).await;
    let subs: Vec<String> = b.topics().list_topics().await.unwrap()[0]
        .subscriptions
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(subs, vec!["~d.1"]);
    b.queues().send(publish("t", "p", "y")).await.unwrap();
    assert_eq!(
        bodies(&b.queues().receive(&take("t:~d.1", "d"), 10).await.unwrap()),
        vec!["y"]
    );
}

/// Exclusive consumption holds across nodes: a durable subscription consumed on node a cannot
/// get a consumer on node b, until a's consumer ends, or node a dies or leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_has_one_exclusive_consumer_across_nodes_until_its_node_goes() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    let b = open_node(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["c", "d"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    a.topics()
        .subscribe_topic("t", "d1", &options(true, ""), "c")
        .await
        .unwrap();
    a.topics()
        .attach_consumer("t", "d1", 1, false)
        .await
        .unwrap();
    let in_use = |r: Result<(), ferry_store::StoreError>| {
        assert!(
            matches!(r, Err(ferry_store::StoreError::SubscriptionInUse(_))),
            "{r:?}"
        )
    };
    // Session 1 on b is another session than session 1 on a.
    in_use(b.topics().attach_consumer("t", "d1", 1, false).await);
    in_use(b.topics().unsubscribe("t", "d1").await);
    a.topics().detach_consumer("t", "d1", 1).await.unwrap();
    b.topics()
        .attach_consumer("t", "d1", 1, false)
        .await
        .unwrap();
    in_use(a.topics().attach_consumer("t", "d1", 2, false).await);
    // Node b stops beating; a takes it for dead, and with it b's consumer.
    drop(b);
    common::outlive(a.as_ref(), 100).await;
    a.topics()
        .attach_consumer("t", "d1", 2, false)
        .await
        .unwrap();
    // A node that leaves takes its consumers with it too.
    a.sessions().leave().await.unwrap();
    let c = open_node(&url, "c").await as Arc<dyn Store>;
    c.topics()
        .attach_consumer("t", "d1", 1, false)
        .await
        .unwrap();
    c.topics().detach_consumer("t", "d1", 1).await.unwrap();
    c.topics().unsubscribe("t", "d1").await.unwrap();
    assert_eq!(
        psql(&url, "SELECT count(*) FROM subscription_consumers"),
        "0",
        "no consumer rows left"
    );
}

/// A shared non-durable subscription whose only consumer was on a node that died goes when
/// that node is taken for dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_non_durable_subscription_goes_with_the_node_of_its_last_consumer() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    let b = open_node(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["c", "d"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    let pool = SubscriptionOptions {
        shared: true,
        ..options(false, "")
    };
    // Made by c on a; consumed only by d on b.
    a.topics()
        .subscribe_topic("t", "w", &pool, "c")
        .await
        .unwrap();
    b.topics().attach_consumer("t", "w", 1, true).await.unwrap();
    a.topics().detach_consumer("t", "w", 1).await.unwrap();
    let names = |s: Arc<dyn Store>| async move {
        s.topics().list_topics().await.unwrap()[0]
            .subscriptions
            .iter()
            .map(|x| x.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(a.clone()).await, vec!["w"], "b still consumes it");
    drop(b);
    common::outlive(a.as_ref(), 100).await;
    assert!(names(a.clone()).await.is_empty(), "gone with b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_racing_unsubscribes_leave_no_rows_behind() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    let b = open_node(&url, "b").await as Arc<dyn Store>;
    setup(&a, &["p", "c"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    a.topics()
        .subscribe_topic("t", "stay", &options(true, ""), "c")
        .await
        .unwrap();
    let publisher = {
        let a = a.clone();
        tokio::spawn(async move {
            let mut n = 0;
            for i in 0..150 {
                let batch: Vec<NewMessage> = (0..4)
                    .map(|j| publish("t", "p", &format!("{i}.{j}")))
                    .collect();
                for r in a.queues().send_batch(batch).await {
                    r.unwrap();
                    n += 1;
                }
            }
            n
        })
    };
    for round in 0..30 {
        let name = format!("s{round}");
        b.topics()
            .subscribe_topic("t", &name, &options(true, ""), "c")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        b.topics().unsubscribe("t", &name).await.unwrap();
    }
    let published = publisher.await.unwrap();
    assert_eq!(published, 600);
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM message_queue mq \
             WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = mq.queue_id)"
        ),
        "0",
        "no row on a queue that is gone"
    );
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM messages m \
             WHERE NOT EXISTS (SELECT 1 FROM message_queue mq WHERE mq.message_id = m.id)"
        ),
        "0",
        "no message left on no queue"
    );
    let listed = a.topics().list_topics().await.unwrap();
    let subs = &listed[0].subscriptions;
    assert_eq!(subs.len(), 1);
    assert_eq!(
        subs[0].ready, 600,
        "the subscription that stayed got every message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_persistent_transactions_commit_and_roll_back() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    setup(&a, &["p", "c"], &["q"]).await;
    let mut m = msg(&["q"], "p", "fast");
    m.persistent = false;
    let ids = a
        .transactions()
        .commit(7, vec![m.clone(), m.clone()], &[])
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert!(ids[0] < ids[1]);
    let mut missing = m.clone();
    missing.queues = vec!["nope".into()];
    assert!(a
        .transactions()
        .commit(7, vec![m.clone(), missing], &[])
        .await
        .is_err());
    let got = a.queues().receive(&take("q", "c"), 10).await.unwrap();
    assert_eq!(
        bodies(&got),
        vec!["fast", "fast"],
        "the failed commit stored nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_session_drops_the_non_durable_subscriptions_its_client_left_unconsumed() {
    let url = fresh_url().await;
    let a = open_node(&url, "a").await as Arc<dyn Store>;
    setup(&a, &["c", "d"], &[]).await;
    a.topics().create_topic("t").await.unwrap();
    a.sessions()
        .claim_session("c", 7, Registration::Permanent)
        .await
        .unwrap();
    let pool = SubscriptionOptions {
        shared: true,
        ..options(false, "")
    };
    // What a failure leaves: a shared subscription made but never attached to (the database
    // went away in between), and a plain one whose removal failed.
    a.topics()
        .subscribe_topic("t", "orphan", &pool, "c")
        .await
        .unwrap();
    a.topics()
        .subscribe_topic("t", "left", &options(false, ""), "c")
        .await
        .unwrap();
    // What must stay: a shared one another session consumes, and a durable one.
    a.topics()
        .subscribe_topic("t", "used", &pool, "c")
        .await
        .unwrap();
    a.topics()
        .attach_consumer("t", "used", 9, true)
        .await
        .unwrap();
    a.topics()
        .subscribe_topic("t", "kept", &options(true, ""), "c")
        .await
        .unwrap();
    let names = || async {
        let mut n: Vec<String> = a.topics().list_topics().await.unwrap()[0]
            .subscriptions
            .iter()
            .map(|x| x.name.clone())
            .collect();
        n.sort();
        n
    };
    // Ending a session that does not hold the name changes nothing.
    a.sessions().end_session("c", 8).await.unwrap();
    assert_eq!(names().await, ["kept", "left", "orphan", "used"]);
    a.sessions().end_session("c", 7).await.unwrap();
    assert_eq!(names().await, ["kept", "used"]);
}
