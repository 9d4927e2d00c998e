//! `ferry queue create | delete | list` and `ferry waiting`.

use ferry_testkit::TestServer;

use crate::support::{ferry, json_lines, queue_info};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_list_delete() {
    let server = TestServer::start().await;
    let out = ferry(&server, &["queue", "create", "orders"]).run().await;
    assert_eq!(out.ok(), "created queue 'orders'\n");
    ferry(&server, &["queue", "create", "a-longer.name_2"])
        .run()
        .await
        .ok();
    ferry(&server, &["send", "--queue", "orders", "x"])
        .run()
        .await
        .ok();

    let out = ferry(&server, &["queue", "list"]).run().await;
    let table = out.ok();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "IN", "FLIGHT"]);
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["a-longer.name_2", "0", "0"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["orders", "1", "0"]
    );

    let out = ferry(&server, &["queue", "list", "--json"]).run().await;
    let rows = json_lines(out.ok());
    assert_eq!(rows[0][1]["name"], "orders");
    assert_eq!(rows[0][1]["ready"], 1);

    // Not empty: refused without --force, and the queue stays.
    let out = ferry(&server, &["queue", "delete", "orders"]).run().await;
    let line = out.failed();
    assert!(
        line.contains("orders") && line.contains("not empty"),
        "{line}"
    );
    assert!(queue_info(&server, "orders").await.is_some());

    let out = ferry(&server, &["queue", "delete", "orders", "--force"])
        .run()
        .await;
    assert_eq!(out.ok(), "deleted queue 'orders'\n");
    assert!(queue_info(&server, "orders").await.is_none());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_errors_use_the_broker_message() {
    let server = TestServer::start().await;
    let out = ferry(&server, &["queue", "delete", "nope"]).run().await;
    assert_eq!(out.failed(), "ferry: queue 'nope' does not exist");
    assert_eq!(out.stdout, "");

    ferry(&server, &["queue", "create", "twice"])
        .run()
        .await
        .ok();
    let out = ferry(&server, &["queue", "create", "twice"]).run().await;
    assert_eq!(out.failed(), "ferry: queue 'twice' already exists");

    let out = ferry(&server, &["queue", "create", "bad name!"])
        .run()
        .await;
    out.failed();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_lists_queues_with_mail() {
    let server = TestServer::start().await;
    for q in ["inbox", "other", "empty"] {
        ferry(&server, &["queue", "create", q]).run().await.ok();
    }
    // bob must be known before he can be addressed.
    let out = ferry(&server, &["waiting", "--name", "bob"]).run().await;
    assert_eq!(out.ok(), "");
    for q in ["inbox", "other"] {
        ferry(&server, &["send", "--queue", q, "--to", "bob", "for bob"])
            .run()
            .await
            .ok();
    }
    // A message for nobody in particular does not make a queue "waiting" for bob.
    ferry(&server, &["send", "--queue", "empty", "anyone"])
        .run()
        .await
        .ok();
    let out = ferry(&server, &["waiting", "--name", "bob"]).run().await;
    let mut names: Vec<&str> = out.ok().lines().collect();
    names.sort();
    assert_eq!(names, ["inbox", "other"]);
    // Someone else has none.
    let out = ferry(&server, &["waiting", "--name", "carol"]).run().await;
    assert_eq!(out.ok(), "");
    server.shutdown().await;
}
