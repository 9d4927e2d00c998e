//! `docs/openapi.json` against the real routes: it documents exactly the router's route list
//! ([`ferry_http::routes::ROUTES`]), the real binary serves every route of that list, and what
//! the API answers matches the document's schemas (successes and errors alike).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::collections::BTreeSet;

use common::{client, start, Api};
use ferry_http::routes::ROUTES;
use ferry_protocol::requests::{Subscribe, SubscribeTopic};
use ferry_protocol::{AckMode, Order, OutgoingMessage, QueueOptions};
use reqwest::Method;
use serde_json::{json, Value};

fn document() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let text = std::fs::read_to_string(path).expect("docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            out.insert((method.to_uppercase(), path.clone()));
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_routes_served() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let routes: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let listed = documented(&doc);
    let undocumented: Vec<_> = routes.difference(&listed).collect();
    let not_served: Vec<_> = listed.difference(&routes).collect();
    assert!(
        undocumented.is_empty() && not_served.is_empty(),
        "routes missing from docs/openapi.json: {undocumented:?}; documented but not in ROUTES: {not_served:?}"
    );
    // Every path parameter of a route is declared, and every $ref resolves.
    for (method, path) in &routes {
        let op = &doc["paths"][path][method.to_lowercase()];
        let declared: BTreeSet<&str> = op["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["in"] == "path")
                    .filter_map(|p| p["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let in_path: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        assert_eq!(declared, in_path, "{method} {path}: path parameters");
        assert!(op["responses"]["200"].is_object(), "{method} {path}: 200");
    }
    let text = doc.to_string();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "$ref to missing schema {name}"
        );
    }
}

/// A concrete path for a route template.
fn concrete(path: &str) -> String {
    path.replace("{name}", "x")
        .replace("{topic}", "t")
        .replace("{id}", "1")
        .replace("{file}", "app.js")
}

#[tokio::test]
async fn the_binary_serves_every_listed_route() {
    let server = start();
    let api = Api::of(&server);
    for (method, path) in ROUTES {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let (status, body) = api.call(m, &concrete(path), None).await;
        assert_ne!(status, 405, "{method} {path}: {body}");
        assert!(
            !(status == 404 && body["message"] == "no such route"),
            "{method} {path} falls through to the fallback: {body}"
        );
    }
    let (status, body) = api.call(Method::GET, "/api/nothing/here", None).await;
    assert_eq!(
        (status, body["message"].clone()),
        (404, json!("no such route"))
    );
}

/// Checks `value` against schema `name` of the document.
fn check(doc: &Value, name: &str, value: &Value, what: &str) {
    let schema = json!({
        "$ref": format!("#/components/schemas/{name}"),
        "components": doc["components"],
    });
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match schema {name}: {errors:?}\n{value:#}"
    );
}

/// The response schema the document gives `method path` for `status`.
fn response_schema(doc: &Value, method: &str, path: &str, status: u16) -> String {
    let r = &doc["paths"][path][method]["responses"][status.to_string()];
    let reference = r["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{method} {path} documents no JSON {status}: {r}"));
    reference
        .rsplit('/')
        .next()
        .expect("a schema name")
        .to_owned()
}

#[tokio::test]
async fn answers_match_the_documented_schemas() {
    let doc = document();
    let server = start();
    let api = Api::of(&server);
    // Something of everything: queues with settings, messages (one dead letter, one with
    // properties), a topic with a subscription, a client online with a push subscription.
    let c = client(&server, "worker").await;
    c.create_queue("orders.dead").await.unwrap();
    c.create_queue_with(
        "orders",
        QueueOptions {
            max_deliveries: 1,
            dead_letter_queue: Some("orders.dead".into()),
            expiry_queue: None,
        },
    )
    .await
    .unwrap();
    let mut m = OutgoingMessage::new("orders", "{\"n\": 1}");
    m.properties = vec![
        (
            "region".into(),
            ferry_protocol::PropertyValue::Str("eu".into()),
        ),
        ("n".into(), ferry_protocol::PropertyValue::Int(1)),
        ("x".into(), ferry_protocol::PropertyValue::Float(0.5)),
        ("ok".into(), ferry_protocol::PropertyValue::Bool(true)),
    ]
    .into();
    c.send(m).await.unwrap();
    c.send(OutgoingMessage::new("orders", "second"))
        .await
        .unwrap();
    api.call(Method::PUT, "/api/topics/prices", None).await;
    let mut sub = SubscribeTopic::new("prices").durable("eu");
    sub.options.selector = "region = 'eu'".into();
    drop(c.subscribe_topic(sub).await.unwrap());
    let watcher = client(&server, "watcher").await;
    let _push = watcher
        .subscribe(Subscribe {
            queue: "orders.dead".into(),
            order: Order::Priority,
            ack: AckMode::Client,
            prefetch: 10,
            selector: String::new(),
        })
        .await
        .unwrap();
    let (s, v) = api
        .call(
            Method::POST,
            "/api/queues/orders/messages",
            Some(json!({"body": "x", "properties": {"a": 1}, "ttl_ms": 60000})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    // Let the sampler take a sample, so rates and series are filled.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let gets = [
        "/healthz",
        "/readyz",
        "/api/overview",
        "/api/clients",
        "/api/queues",
        "/api/queues/{name}",
        "/api/queues/{name}/messages",
        "/api/senders/{name}/messages",
        "/api/topics",
        "/api/definitions",
    ];
    for path in gets {
        let real = path.replace(
            "{name}",
            if path.contains("senders") {
                "worker"
            } else {
                "orders"
            },
        );
        let body = api.get(&real).await;
        check(&doc, &response_schema(&doc, "get", path, 200), &body, &real);
    }
    for format in ["json", "hex", "base64"] {
        let real = format!("/api/queues/orders/messages?body={format}&order=time&limit=1");
        let body = api.get(&real).await;
        check(&doc, "MessagePage", &body, &real);
    }
    let passer = client(&server, "passer").await;
    passer.disconnect().await.unwrap();
    // Changes, each checked against its documented answer.
    let changes: Vec<(&str, &str, &str, Option<Value>)> = vec![
        (
            "put",
            "/api/queues/{name}",
            "/api/queues/new",
            Some(json!({"max_deliveries": 2})),
        ),
        (
            "patch",
            "/api/queues/{name}",
            "/api/queues/new",
            Some(json!({"expiry_queue": "orders.dead"})),
        ),
        (
            "post",
            "/api/queues/{name}/messages",
            "/api/queues/new/messages",
            Some(json!({"body": "y"})),
        ),
        (
            "post",
            "/api/queues/{name}/move",
            "/api/queues/new/move",
            Some(json!({"to": "orders"})),
        ),
        (
            "post",
            "/api/queues/{name}/purge",
            "/api/queues/orders/purge",
            None,
        ),
        (
            "post",
            "/api/topics/{name}/messages",
            "/api/topics/prices/messages",
            Some(json!({"body": "p"})),
        ),
        (
            "post",
            "/api/definitions",
            "/api/definitions",
            Some(api.get("/api/definitions").await),
        ),
        (
            "delete",
            "/api/topics/{topic}/subscriptions/{name}",
            "/api/topics/prices/subscriptions/eu",
            None,
        ),
        ("delete", "/api/topics/{name}", "/api/topics/prices", None),
        (
            "post",
            "/api/clients/{name}/disconnect",
            "/api/clients/watcher/disconnect",
            None,
        ),
        ("delete", "/api/queues/{name}", "/api/queues/new", None),
        ("delete", "/api/clients/{name}", "/api/clients/passer", None),
    ];
    for (method, template, real, body) in changes {
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let (status, answer) = api.call(m, real, body).await;
        assert_eq!(status, 200, "{method} {real}: {answer}");
        check(
            &doc,
            &response_schema(&doc, method, template, 200),
            &answer,
            real,
        );
    }
    let id = c
        .send(OutgoingMessage::new("orders", "to delete"))
        .await
        .unwrap();
    let (status, answer) = api
        .call(
            Method::DELETE,
            &format!("/api/queues/orders/messages/{id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    check(
        &doc,
        &response_schema(&doc, "delete", "/api/queues/{name}/messages/{id}", 200),
        &answer,
        "delete message",
    );

    // Errors: each documented status answers the Error schema.
    let errors: Vec<(&str, &str, &str, u16, Option<Value>)> = vec![
        ("get", "/api/queues", "/api/queues?limit=0", 400, None),
        ("get", "/api/topics", "/api/topics?limit=0", 400, None),
        (
            "get",
            "/api/clients",
            "/api/clients?after=a&bogus=1",
            400,
            None,
        ),
        ("get", "/api/queues/{name}", "/api/queues/nope", 404, None),
        ("put", "/api/queues/{name}", "/api/queues/orders", 409, None),
        (
            "patch",
            "/api/queues/{name}",
            "/api/queues/orders",
            400,
            Some(json!({"bogus": 1})),
        ),
        (
            "delete",
            "/api/queues/{name}",
            "/api/queues/orders.dead",
            409,
            None,
        ),
        (
            "get",
            "/api/queues/{name}/messages",
            "/api/queues/orders/messages?limit=0",
            400,
            None,
        ),
        (
            "delete",
            "/api/queues/{name}/messages/{id}",
            "/api/queues/orders/messages/not-a-number",
            400,
            None,
        ),
        (
            "post",
            "/api/clients/{name}/disconnect",
            "/api/clients/nobody/disconnect",
            404,
            None,
        ),
        (
            "delete",
            "/api/topics/{name}",
            "/api/topics/nope",
            404,
            None,
        ),
        (
            "delete",
            "/api/clients/{name}",
            "/api/clients/worker",
            409,
            None,
        ),
        (
            "delete",
            "/api/clients/{name}",
            "/api/clients/nobody",
            404,
            None,
        ),
    ];
    for (method, template, real, want, body) in errors {
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let (status, answer) = api.call(m, real, body).await;
        assert_eq!(status, want, "{method} {real}: {answer}");
        check(
            &doc,
            &response_schema(&doc, method, template, want),
            &answer,
            real,
        );
    }
}
