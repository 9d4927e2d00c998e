//! The management API against the real `ferry` binary: every area of the API, with the
//! behaviour each test is named after checked through the API and the native protocol.
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::{client, start, Api};
use ferry_protocol::requests::Receive;
use ferry_protocol::{AckMode, OutgoingMessage, QueueOptions, ReceiveMode, Source};
use serde_json::json;

fn take(queue: &str, ack: AckMode) -> Receive {
    Receive {
        source: Source::Queue(queue.into()),
        order: ferry_protocol::Order::Priority,
        mode: ReceiveMode::Take,
        ack,
        wait_ms: 0,
        selector: String::new(),
    }
}

#[tokio::test]
async fn browse_pages_through_ten_thousand_messages_without_consuming_or_reordering() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "shop").await;
    c.create_queue("big").await.unwrap();
    let mut want: Vec<(u8, u64)> = Vec::new();
    for chunk in 0..10 {
        let msgs: Vec<OutgoingMessage> = (0..1000)
            .map(|i| {
                let mut m = OutgoingMessage::new("big", format!("m{}", chunk * 1000 + i));
                m.priority = 1 + ((chunk * 1000 + i) % 10) as u8;
                m
            })
            .collect();
        let prios: Vec<u8> = msgs.iter().map(|m| m.priority).collect();
        let ids = c.send_batch(msgs).await.unwrap();
        for (id, p) in ids.into_iter().zip(prios) {
            want.push((p, id.unwrap()));
        }
    }
    // Priority order: highest first, oldest first within a priority.
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for order in ["priority", "time"] {
        let mut got = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut path = format!("/api/queues/big/messages?limit=700&order={order}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = api.get(&path).await;
            for m in page["messages"].as_array().unwrap() {
                assert_eq!(m["delivery_count"], 0);
                got.push((
                    m["priority"].as_u64().unwrap() as u8,
                    m["id"].as_u64().unwrap(),
                ));
            }
            pages += 1;
            match page["next"].as_str() {
                Some(n) => cursor = Some(n.to_owned()),
                None => break,
            }
        }
        assert_eq!(pages, 15, "{order}: 10,000 messages in pages of 700");
        let mut expected = want.clone();
        if order == "time" {
            expected.sort_by_key(|e| e.1);
        }
        assert_eq!(got, expected, "{order} order, every message once");
    }
    // Nothing was consumed: the queue still holds every message, and takes see them in order.
    let q = api.get("/api/queues/big").await;
    assert_eq!(q["ready"], 10_000);
    let d = c
        .receive(take("big", AckMode::Auto))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.message.id, want[0].1);
    // A selector filters; the cursor still walks the whole backlog.
    let page = api
        .get("/api/queues/big/messages?selector=priority%20%3D%2010&order=time&limit=1000")
        .await;
    assert!(page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["priority"] == 10));
}

#[tokio::test]
async fn redrive_returns_dead_letters_to_their_queue_with_their_history() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "worker").await;
    c.create_queue("payments.dead").await.unwrap();
    c.create_queue_with(
        "payments",
        QueueOptions {
            max_deliveries: 1,
            dead_letter_queue: Some("payments.dead".into()),
            expiry_queue: None,
        },
    )
    .await
    .unwrap();
    let id = c
        .send(OutgoingMessage::new("payments", "pay 42"))
        .await
        .unwrap();
    let d = c
        .receive(take("payments", AckMode::Client))
        .await
        .unwrap()
        .unwrap();
    c.nack(&[d.delivery_id], true).await.unwrap();
    let dead = api.get("/api/queues/payments.dead/messages").await;
    let msgs = dead["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{dead}");
    assert_eq!(msgs[0]["properties"]["ferry_original_queue"], "payments");
    assert_eq!(msgs[0]["properties"]["ferry_original_id"], id);
    let dl_id = msgs[0]["id"].as_u64().unwrap();
    let described = api.get("/api/queues/payments.dead").await;
    assert_eq!(described["used_by"][0]["queue"], "payments");
    // Deleting a queue another names as its dead-letter queue is refused, naming that queue.
    let (status, err) = api
        .call(reqwest::Method::DELETE, "/api/queues/payments.dead", None)
        .await;
    assert_eq!(status, 409);
    assert_eq!(err["error"], "QueueInUse");
    assert!(
        err["message"].as_str().unwrap().contains("'payments'"),
        "{err}"
    );
    let (status, moved) = api
        .call(
            reqwest::Method::POST,
            "/api/queues/payments.dead/move",
            Some(json!({"to_origin": true})),
        )
        .await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["moved"][0]["id"], dl_id);
    assert_eq!(moved["moved"][0]["to"], "payments");
    let back = c
        .receive(take("payments", AckMode::Auto))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.message.id, dl_id);
    assert_eq!(&back.message.body[..], b"pay 42");
    assert!(back
        .message
        .properties
        .iter()
        .any(|(k, _)| k == "ferry_dead_letter_reason"));
    assert_eq!(api.get("/api/queues/payments.dead").await["ready"], 0);
}

#[tokio::test]
async fn purge_settings_send_delete_and_errors_use_the_protocol_codes() {
    let server = start();
    let api = Api::of(&server);
    let (status, _) = api
        .call(reqwest::Method::PUT, "/api/queues/jobs", Some(json!({})))
        .await;
    assert_eq!(status, 200);
    let (status, err) = api
        .call(reqwest::Method::PUT, "/api/queues/jobs", None)
        .await;
    assert_eq!(
        (status, err["code"].clone(), err["error"].clone()),
        (409, json!(2), json!("QueueExists"))
    );
    let (status, err) = api
        .call(reqwest::Method::GET, "/api/queues/nope", None)
        .await;
    assert_eq!(
        (status, err["error"].clone()),
        (404, json!("QueueNotFound"))
    );
    let (status, err) = api.call(reqwest::Method::GET, "/api/nothing", None).await;
    assert_eq!(
        (status, err["error"].clone()),
        (404, json!("UnknownRequest"))
    );
    for i in 0..3 {
        let (s, v) = api
            .call(
                reqwest::Method::POST,
                "/api/queues/jobs/messages",
                Some(json!({"body": format!("job {i}"), "priority": 7, "properties": {"n": i}})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    let page = api.get("/api/queues/jobs/messages?body=hex").await;
    assert_eq!(page["messages"][0]["body"], "6a6f622030");
    let first = page["messages"][0]["id"].as_u64().unwrap();
    let (s, _) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/api/queues/jobs/messages/{first}"),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (s, err) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/api/queues/jobs/messages/{first}"),
            None,
        )
        .await;
    assert_eq!((s, err["error"].clone()), (404, json!("NotFound")));
    assert_eq!(api.get("/api/queues/jobs").await["ready"], 2);
    let (s, p) = api
        .call(reqwest::Method::POST, "/api/queues/jobs/purge", None)
        .await;
    assert_eq!((s, p["purged"].clone()), (200, json!(2)));
    assert_eq!(api.get("/api/queues/jobs").await["ready"], 0);
    // Settings change: a target must exist; a cycle is refused.
    api.call(reqwest::Method::PUT, "/api/queues/jobs.dead", None)
        .await;
    let (s, q) = api
        .call(
            reqwest::Method::PATCH,
            "/api/queues/jobs",
            Some(json!({"max_deliveries": 3, "dead_letter_queue": "jobs.dead"})),
        )
        .await;
    assert_eq!(
        (
            s,
            q["max_deliveries"].clone(),
            q["dead_letter_queue"].clone()
        ),
        (200, json!(3), json!("jobs.dead"))
    );
    let (s, err) = api
        .call(
            reqwest::Method::PATCH,
            "/api/queues/jobs.dead",
            Some(json!({"dead_letter_queue": "jobs"})),
        )
        .await;
    assert_eq!(
        (s, err["error"].clone()),
        (400, json!("InvalidArgument")),
        "{err}"
    );
    let (s, err) = api
        .call(
            reqwest::Method::GET,
            "/api/queues/jobs/messages?cursor=!!!",
            None,
        )
        .await;
    assert_eq!((s, err["error"].clone()), (400, json!("InvalidArgument")));
    let (s, err) = api
        .call(
            reqwest::Method::GET,
            "/api/queues/jobs/messages?selector=a%20%3E%20(",
            None,
        )
        .await;
    assert_eq!((s, err["error"].clone()), (400, json!("InvalidArgument")));
}

#[tokio::test]
async fn clients_show_in_system_and_online_and_force_disconnect_returns_deliveries() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "alice").await;
    let _bob = client(&server, "bob").await;
    c.create_queue("work").await.unwrap();
    c.send(OutgoingMessage::new("work", "x")).await.unwrap();
    let d = c
        .receive(take("work", AckMode::Client))
        .await
        .unwrap()
        .unwrap();
    assert!(d.delivery_id > 0);
    let list = api.get("/api/clients").await;
    assert_eq!(list["in_system"], 2);
    assert_eq!(list["online"], 2);
    let alice = &list["clients"][0];
    assert_eq!(alice["name"], "alice");
    assert_eq!(alice["online"], true);
    assert_eq!(alice["in_flight"], 1);
    assert!(alice["address"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert_eq!(api.get("/api/queues/work").await["in_flight"], 1);
    let (s, _) = api
        .call(reqwest::Method::POST, "/api/clients/alice/disconnect", None)
        .await;
    assert_eq!(s, 200);
    // The session ends; its unsettled delivery is back on the queue.
    let mut back = false;
    for _ in 0..100 {
        let q = api.get("/api/queues/work").await;
        if q["ready"] == 1 && q["in_flight"] == 0 {
            back = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(back, "the delivery came back");
    assert!(c.ping().await.is_err(), "the session is closed");
    let list = api.get("/api/clients").await;
    assert_eq!(list["online"], 1);
    let (s, err) = api
        .call(reqwest::Method::POST, "/api/clients/alice/disconnect", None)
        .await;
    assert_eq!((s, err["error"].clone()), (404, json!("NotFound")));
}

#[tokio::test]
async fn definitions_export_import_export_gives_the_same_document() {
    let first = start();
    let api = Api::of(&first);
    let c = client(&first, "setup").await;
    c.create_queue("a.dead").await.unwrap();
    c.create_queue_with(
        "a",
        QueueOptions {
            max_deliveries: 4,
            dead_letter_queue: Some("a.dead".into()),
            expiry_queue: Some("a.dead".into()),
        },
    )
    .await
    .unwrap();
    api.call(reqwest::Method::PUT, "/api/topics/prices", None)
        .await;
    let mut sub = ferry_protocol::requests::SubscribeTopic::new("prices").durable("eu");
    sub.options.selector = "region = 'eu'".into();
    drop(c.subscribe_topic(sub).await.unwrap());
    let exported = api.get("/api/definitions").await;
    assert_eq!(
        exported["queues"].as_array().unwrap().len(),
        2,
        "{exported}"
    );
    assert_eq!(
        exported["topics"][0]["subscriptions"][0]["selector"],
        "region = 'eu'"
    );
    let second = start();
    let api2 = Api::of(&second);
    let (s, r) = api2
        .call(
            reqwest::Method::POST,
            "/api/definitions",
            Some(exported.clone()),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(api2.get("/api/definitions").await, exported);
    // Importing again changes nothing.
    let (s, r) = api2
        .call(
            reqwest::Method::POST,
            "/api/definitions",
            Some(exported.clone()),
        )
        .await;
    assert_eq!((s, r["created"].clone()), (200, json!([])));
    assert_eq!(api2.get("/api/definitions").await, exported);
}

#[tokio::test]
async fn health_readiness_overview_and_the_console_answer() {
    let server = start();
    let api = Api::of(&server);
    assert_eq!(api.get("/healthz").await["status"], "ok");
    assert_eq!(api.get("/readyz").await["status"], "ready");
    let o = api.get("/api/overview").await;
    assert_eq!(o["engine"], "embedded");
    assert_eq!(o["version"], env!("CARGO_PKG_VERSION"));
    let page = reqwest::get(format!("{}/", api.base)).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("/console/app.js"));
    for file in ["app.js", "style.css"] {
        let r = reqwest::get(format!("{}/console/{file}", api.base))
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
    }
}

#[tokio::test]
async fn force_disconnect_ends_a_session_waiting_in_a_long_poll() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "poller").await;
    c.create_queue("empty").await.unwrap();
    let mut wait = take("empty", AckMode::Client);
    wait.wait_ms = 60_000;
    let polling = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let r = c.receive(wait).await;
        (r.map(|d| d.is_none()), started.elapsed())
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (s, _) = api
        .call(
            reqwest::Method::POST,
            "/api/clients/poller/disconnect",
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (result, took) = tokio::time::timeout(std::time::Duration::from_secs(10), polling)
        .await
        .expect("the long poll ended")
        .unwrap();
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    let _ = result;
    let mut offline = false;
    for _ in 0..100 {
        if api.get("/api/clients").await["online"] == 0 {
            offline = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(offline, "the session is gone");
}

/// Every page of listing `path` (`key`: its array) in pages of `limit`: the page sizes and
/// the names shown, checking that each `next` is the last name shown.
async fn every_page(api: &Api, path: &str, key: &str, limit: usize) -> (Vec<usize>, Vec<String>) {
    let (mut seen, mut sizes, mut after) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let url = match &after {
            None => format!("{path}?limit={limit}"),
            Some(a) => format!("{path}?limit={limit}&after={a}"),
        };
        let page = api.get(&url).await;
        let entries = page[key].as_array().expect("an array of entries");
        sizes.push(entries.len());
        seen.extend(
            entries
                .iter()
                .map(|e| e["name"].as_str().expect("a name").to_owned()),
        );
        match page["next"].as_str() {
            Some(n) => {
                assert_eq!(Some(n), seen.last().map(String::as_str));
                after = Some(n.to_owned());
            }
            None => return (sizes, seen),
        }
    }
}

/// A limit out of range is refused precisely.
async fn bad_limits_are_refused(api: &Api, path: &str) {
    for bad in ["0", "10001", "ten"] {
        let (status, body) = api
            .call(reqwest::Method::GET, &format!("{path}?limit={bad}"), None)
            .await;
        assert_eq!(status, 400, "{path} {bad}: {body}");
        assert_eq!(body["error"], "InvalidArgument", "{path} {bad}: {body}");
    }
}

#[tokio::test]
async fn the_queue_list_pages_by_name_when_asked() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "maker").await;
    let mut names: Vec<String> = (0..25).map(|i| format!("paged-{i:02}")).collect();
    for n in names.iter().rev() {
        c.create_queue(n).await.unwrap();
    }
    names.sort();
    // Without a limit, every queue at once.
    let all = api.get("/api/queues").await;
    assert_eq!(all["queues"].as_array().unwrap().len(), 25);
    assert_eq!(all["next"], serde_json::Value::Null);
    // Pages of ten: 10, 10, 5, each `next` the last name shown, every queue once, by name.
    let (sizes, seen) = every_page(&api, "/api/queues", "queues", 10).await;
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(seen, names);
    bad_limits_are_refused(&api, "/api/queues").await;
}

#[tokio::test]
async fn the_topic_and_client_lists_page_by_name_when_asked() {
    let server = start();
    let api = Api::of(&server);
    let c = client(&server, "maker").await;
    let mut topics: Vec<String> = (0..12).map(|i| format!("paged-{i:02}")).collect();
    for t in topics.iter().rev() {
        c.create_topic(t).await.unwrap();
    }
    topics.sort();
    let all = api.get("/api/topics").await;
    assert_eq!(all["topics"].as_array().unwrap().len(), 12);
    assert_eq!(all["next"], serde_json::Value::Null);
    let (sizes, seen) = every_page(&api, "/api/topics", "topics", 5).await;
    assert_eq!(sizes, vec![5, 5, 2]);
    assert_eq!(seen, topics);
    bad_limits_are_refused(&api, "/api/topics").await;
    // Clients: seven online besides the maker; the counts cover every client on every page.
    let mut held = Vec::new();
    for i in 0..7 {
        held.push(client(&server, &format!("pager-{i}")).await);
    }
    let all = api.get("/api/clients").await;
    let every: Vec<String> = all["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(every.windows(2).all(|w| w[0] < w[1]), "by name: {every:?}");
    let (sizes, seen) = every_page(&api, "/api/clients", "clients", 3).await;
    assert_eq!(seen, every);
    assert!(sizes.iter().all(|&n| n <= 3), "{sizes:?}");
    let first = api.get("/api/clients?limit=3").await;
    assert_eq!(first["in_system"], all["in_system"]);
    assert_eq!(first["online"], all["online"]);
    assert_eq!(
        first["clients"][0]["online"], true,
        "a page still says who is online"
    );
    bad_limits_are_refused(&api, "/api/clients").await;
}
