//! `ferry topic`, `publish`, `subscribe` and `unsubscribe`: listings, durable backlogs kept
//! between two `subscribe` runs, `--count 0`, selectors, live non-durable subscribers, and the
//! errors (exit code 1, the broker's one-line message).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::Duration;

use ferry_testkit::TestServer;

use crate::support::{ferry, json_lines, Out};

/// Publishes with `args` and returns the printed id.
async fn publish(server: &TestServer, args: &[&str]) -> u64 {
    let mut full = vec!["publish"];
    full.extend_from_slice(args);
    let out = ferry(server, &full).run().await;
    out.ok()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("an id: {out:?}"))
}

/// `subscribe --json` with `args`, one JSON value per message.
async fn subscribe_json(server: &TestServer, args: &[&str]) -> Vec<serde_json::Value> {
    let mut full = vec!["subscribe", "--json"];
    full.extend_from_slice(args);
    json_lines(ferry(server, &full).run().await.ok())
}

/// The `topic list --json` value.
/// `ferry topic create NAME`, which must succeed.
async fn create_topic(server: &TestServer, name: &str) {
    ferry(server, &["topic", "create", name]).run().await.ok();
}

async fn topics(server: &TestServer) -> serde_json::Value {
    let out = ferry(server, &["topic", "list", "--json"]).run().await;
    serde_json::from_str(out.ok()).unwrap()
}

/// Runs `ferry` with `args` in the background (a subscriber), for its output later.
fn spawn_ferry(server: &TestServer, args: &[&str]) -> tokio::task::JoinHandle<Out> {
    let cmd = ferry(server, args);
    tokio::spawn(async move { cmd.run().await })
}

/// Waits (up to 15 s) until the first topic has a subscription, and returns it.
async fn first_subscription(server: &TestServer) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let t = topics(server).await;
        if let Some(sub) = t[0]["subscriptions"].as_array().and_then(|s| s.first()) {
            return sub.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no subscription: {t}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (up to 15 s) until the first topic has no subscription left.
async fn no_subscription_left(server: &TestServer) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while topics(server).await[0]["subscriptions"] != serde_json::json!([]) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "subscription left behind its consumer"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_list_delete_and_their_errors() {
    let server = TestServer::start().await;
    let out = ferry(&server, &["topic", "create", "prices"]).run().await;
    assert_eq!(out.ok(), "created topic 'prices'\n");
    create_topic(&server, "empty").await;
    let out = ferry(&server, &["topic", "create", "prices"]).run().await;
    assert_eq!(out.failed(), "ferry: topic 'prices' already exists");
    // Topics and queues have separate names.
    ferry(&server, &["queue", "create", "prices"])
        .run()
        .await
        .ok();

    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "prices",
            "--durable",
            "audit",
            "--shared",
            "--selector",
            "region = 'eu'",
            "--count",
            "0",
        ],
    )
    .run()
    .await;
    assert_eq!(
        out.ok(),
        "subscription 'audit' to topic 'prices' is ready (queue 'prices:audit')\n"
    );
    publish(&server, &["--topic", "prices", "-p", "region=eu", "x"]).await;

    let out = ferry(&server, &["topic", "list"]).run().await;
    let table = out.ok();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "TOPIC",
            "SUBSCRIPTION",
            "DURABLE",
            "SHARED",
            "READY",
            "IN",
            "FLIGHT",
            "SELECTOR"
        ],
        "{table}"
    );
    assert_eq!(rows[1], ["empty", "-", "-", "-", "-", "-"], "{table}");
    assert_eq!(
        rows[2],
        ["prices", "audit", "yes", "yes", "1", "0", "region", "=", "'eu'"],
        "{table}"
    );
    let json = topics(&server).await;
    assert_eq!(json[1]["name"], "prices");
    let sub = &json[1]["subscriptions"][0];
    assert_eq!(sub["name"], "audit");
    assert_eq!(sub["durable"], true);
    assert_eq!(sub["shared"], true);
    assert_eq!(sub["selector"], "region = 'eu'");
    assert_eq!(sub["ready"], 1);
    assert_eq!(sub["in_flight"], 0);

    // A subscription holds a message: refused without --force, the topic stays.
    let out = ferry(&server, &["topic", "delete", "prices"]).run().await;
    let line = out.failed();
    assert!(
        line.contains("prices") && line.contains("not empty"),
        "{line}"
    );
    let out = ferry(&server, &["topic", "delete", "prices", "--force"])
        .run()
        .await;
    assert_eq!(out.ok(), "deleted topic 'prices'\n");
    let out = ferry(&server, &["topic", "delete", "prices"]).run().await;
    assert_eq!(out.failed(), "ferry: topic 'prices' does not exist");
    assert_eq!(topics(&server).await[0]["name"], "empty");
    assert_eq!(topics(&server).await.as_array().unwrap().len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_backlog_is_kept_between_runs() {
    let server = TestServer::start().await;
    create_topic(&server, "news").await;
    let durable = ["--topic", "news", "--durable", "reader", "--wait", "300ms"];
    // --count 0 creates it without consuming: nothing printed with --json.
    let first = subscribe_json(&server, &[&durable[..], &["--count", "0"]].concat()).await;
    assert!(first.is_empty());
    let mut ids = Vec::new();
    for body in ["one", "two", "three"] {
        ids.push(publish(&server, &["--topic", "news", "--priority", "5", body]).await);
    }

    // A first run takes two; the third stays on the subscription.
    let got = subscribe_json(&server, &[&durable[..], &["--count", "2"]].concat()).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["one", "two"]);
    assert_eq!(got[0]["id"], ids[0]);
    assert_eq!(got[0]["queue"], "news:reader");
    assert_eq!(got[0]["redelivered"], false);
    assert_eq!(topics(&server).await[0]["subscriptions"][0]["ready"], 1);

    // Published while nobody consumes: kept too.
    publish(&server, &["--topic", "news", "four"]).await;
    let got = subscribe_json(&server, &[&durable[..], &["--count", "10"]].concat()).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["three", "four"]);
    // Settled before the cancel: nothing came back marked redelivered.
    assert!(got.iter().all(|m| m["redelivered"] == false), "{got:?}");
    let sub = &topics(&server).await[0]["subscriptions"][0];
    assert_eq!(
        (sub["ready"].as_u64(), sub["in_flight"].as_u64()),
        (Some(0), Some(0))
    );

    // The human block is recv's.
    publish(&server, &["--topic", "news", "-p", "k=v", "five"]).await;
    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "news",
            "--durable",
            "reader",
            "--count",
            "1",
        ],
    )
    .run()
    .await;
    let text = out.ok();
    assert!(
        text.contains("queue:       news:reader\ntopic:       news\n"),
        "{text}"
    );
    assert!(text.contains("properties:  k=\"v\"\n"), "{text}");
    assert!(text.ends_with("\n\nfive\n"), "{text}");

    // Unsubscribe removes it with its backlog; a second time it is not there.
    publish(&server, &["--topic", "news", "six"]).await;
    let out = ferry(
        &server,
        &["unsubscribe", "--topic", "news", "--durable", "reader"],
    )
    .run()
    .await;
    assert_eq!(out.ok(), "unsubscribed 'reader' from topic 'news'\n");
    assert_eq!(
        topics(&server).await[0]["subscriptions"],
        serde_json::json!([])
    );
    let out = ferry(
        &server,
        &["unsubscribe", "--topic", "news", "--durable", "reader"],
    )
    .run()
    .await;
    assert!(out.failed().contains("reader"), "{out:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_filter_what_a_subscription_gets() {
    let server = TestServer::start().await;
    create_topic(&server, "orders").await;
    let eu = [
        "--topic",
        "orders",
        "--durable",
        "eu-big",
        "--selector",
        "region = 'eu' AND total > 50",
        "--wait",
        "300ms",
    ];
    subscribe_json(&server, &[&eu[..], &["--count", "0"]].concat()).await;
    ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "orders",
            "--durable",
            "all",
            "--count",
            "0",
        ],
    )
    .run()
    .await
    .ok();
    for (region, total) in [("eu", "10"), ("us", "99"), ("eu", "150")] {
        publish(
            &server,
            &[
                "--topic",
                "orders",
                "-p",
                &format!("region={region}"),
                "-p",
                &format!("total={total}"),
                &format!("{region} {total}"),
            ],
        )
        .await;
    }
    let got = subscribe_json(&server, &[&eu[..], &["--count", "10"]].concat()).await;
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["eu 150"]);
    let all = subscribe_json(
        &server,
        &[
            "--topic",
            "orders",
            "--durable",
            "all",
            "--count",
            "10",
            "--wait",
            "300ms",
            "--ack",
            "auto",
        ],
    )
    .await;
    assert_eq!(all.len(), 3);

    // Subscribing again with another selector is refused, naming the difference.
    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "orders",
            "--durable",
            "eu-big",
            "--selector",
            "total > 1",
            "--count",
            "0",
        ],
    )
    .run()
    .await;
    assert!(out.failed().contains("selector"), "{out:?}");
    // A selector that does not parse: the broker's message with the position.
    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "orders",
            "--durable",
            "bad",
            "--selector",
            "total > (1",
            "--count",
            "0",
        ],
    )
    .run()
    .await;
    assert!(out.failed().contains("invalid selector"), "{out:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_subscriber_gets_what_is_published_meanwhile() {
    let server = TestServer::start().await;
    create_topic(&server, "live").await;
    let reader = spawn_ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "live",
            "--count",
            "2",
            "--wait",
            "10s",
            "--json",
        ],
    );
    // Publish once the non-durable subscription exists.
    let sub = first_subscription(&server).await;
    assert!(sub["name"].as_str().unwrap().starts_with('~'), "{sub}");
    assert_eq!(sub["durable"], false);
    publish(&server, &["--topic", "live", "--non-persistent", "first"]).await;
    publish(&server, &["--topic", "live", "--ttl", "30s", "second"]).await;
    let out = reader.await.unwrap();
    let got = json_lines(out.ok());
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["first", "second"]);
    assert!(got[1].get("expires_at").is_some(), "{got:?}");
    // The non-durable subscription ends with its consumer.
    no_subscription_left(&server).await;
    // Nobody subscribed: a publish still succeeds and goes nowhere.
    publish(&server, &["--topic", "live", "void"]).await;
    server.shutdown().await;
}

/// `--shared-name`: a shared non-durable subscription under that name, gone after its last
/// consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_name_subscriber_consumes_a_shared_non_durable_subscription() {
    let server = TestServer::start().await;
    create_topic(&server, "jobs").await;
    let reader = spawn_ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "jobs",
            "--shared-name",
            "pool",
            "--count",
            "1",
            "--wait",
            "10s",
            "--json",
        ],
    );
    let sub = first_subscription(&server).await;
    assert_eq!(sub["name"], "pool", "{sub}");
    assert_eq!(sub["shared"], true, "{sub}");
    assert_eq!(sub["durable"], false, "{sub}");
    publish(&server, &["--topic", "jobs", "job"]).await;
    let got = json_lines(reader.await.unwrap().ok());
    assert_eq!(got[0]["body"], "job");
    assert_eq!(got[0]["queue"], "jobs:pool");
    no_subscription_left(&server).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_what_is_missing() {
    let server = TestServer::start().await;
    let out = ferry(&server, &["publish", "--topic", "nope", "x"])
        .run()
        .await;
    assert_eq!(out.failed(), "ferry: topic 'nope' does not exist");
    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "nope",
            "--durable",
            "d",
            "--count",
            "0",
        ],
    )
    .run()
    .await;
    assert_eq!(out.failed(), "ferry: topic 'nope' does not exist");
    let out = ferry(
        &server,
        &["subscribe", "--topic", "nope", "--wait", "100ms"],
    )
    .run()
    .await;
    assert_eq!(out.failed(), "ferry: topic 'nope' does not exist");
    let out = ferry(
        &server,
        &["unsubscribe", "--topic", "nope", "--durable", "d"],
    )
    .run()
    .await;
    assert_eq!(out.failed(), "ferry: topic 'nope' does not exist");
    // A shared name the broker refuses: one line naming it.
    create_topic(&server, "t").await;
    let out = ferry(
        &server,
        &[
            "subscribe",
            "--topic",
            "t",
            "--shared-name",
            "bad name!",
            "--wait",
            "100ms",
        ],
    )
    .run()
    .await;
    assert!(out.failed().contains("bad name!"), "{out:?}");
    // --count 0 without a name makes no sense: refused before connecting.
    let out = ferry(&server, &["subscribe", "--topic", "t", "--count", "0"])
        .run()
        .await;
    assert!(out.failed().contains("--durable"), "{out:?}");
    // A non-persistent send to a queue works like any other.
    ferry(&server, &["queue", "create", "q"]).run().await.ok();
    ferry(
        &server,
        &["send", "--queue", "q", "--non-persistent", "mem"],
    )
    .run()
    .await
    .ok();
    let out = ferry(&server, &["recv", "--queue", "q", "--json"])
        .run()
        .await;
    assert_eq!(json_lines(out.ok())[0]["body"], "mem");
    // Usage errors exit 2.
    for args in [
        vec!["publish", "body"],
        vec!["subscribe", "--topic", "t", "--shared"],
        vec![
            "subscribe",
            "--topic",
            "t",
            "--shared-name",
            "w",
            "--durable",
            "d",
        ],
        vec!["unsubscribe", "--topic", "t"],
        vec!["topic"],
    ] {
        let out = ferry(&server, &args).run().await;
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
    }
    server.shutdown().await;
}
