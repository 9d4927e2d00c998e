//! Wildcard subscriptions from the command line: `ferry subscribe --topic 'prices.>'` gets
//! what is published to the topics the pattern matches, and `ferry topic list` shows the
//! pattern with its subscriptions.

use ferry_testkit::TestServer;

use crate::support::{ferry, json_lines};

#[tokio::test]
async fn subscribe_to_a_pattern_and_list_it() {
    let server = TestServer::start().await;
    for t in ["prices.eu.fish", "prices.us.corn", "news.eu"] {
        ferry(&server, &["topic", "create", t]).run().await.ok();
    }
    let durable = ["--topic", "prices.>", "--durable", "all", "--wait", "300ms"];
    ferry(
        &server,
        &[&["subscribe"][..], &durable, &["--count", "0"]].concat(),
    )
    .run()
    .await
    .ok();
    for t in ["prices.eu.fish", "news.eu", "prices.us.corn"] {
        ferry(&server, &["publish", "--topic", t, t])
            .run()
            .await
            .ok();
    }
    let table = ferry(&server, &["topic", "list"]).run().await;
    let row = table
        .ok()
        .lines()
        .find(|l| l.starts_with("prices.>"))
        .unwrap_or_else(|| panic!("no row for the pattern: {table:?}"));
    assert!(row.contains("all") && row.contains(" 2 "), "{row}");
    let json: serde_json::Value = serde_json::from_str(
        ferry(&server, &["topic", "list", "--json"])
            .run()
            .await
            .ok(),
    )
    .unwrap();
    let pattern = json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "prices.>")
        .unwrap();
    assert_eq!(pattern["pattern"], true);
    assert_eq!(pattern["subscriptions"][0]["ready"], 2);
    let got = json_lines(
        ferry(
            &server,
            &[&["subscribe", "--json"][..], &durable, &["--count", "5"]].concat(),
        )
        .run()
        .await
        .ok(),
    );
    let bodies: Vec<&str> = got.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, vec!["prices.eu.fish", "prices.us.corn"]);
    assert_eq!(got[0]["queue"], "prices.>:all");
    ferry(
        &server,
        &["unsubscribe", "--topic", "prices.>", "--durable", "all"],
    )
    .run()
    .await
    .ok();
    let err = ferry(&server, &["publish", "--topic", "prices.*", "x"])
        .run()
        .await;
    assert!(
        err.failed().contains("patterns are for subscriptions"),
        "{err:?}"
    );
}
